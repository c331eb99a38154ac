//! The faults the browser test turns on and off over HTTP (`POST /test/{fault}/{on|off}`):
//! a consumer that fails, an event store whose appends wait (a request stays in flight) or
//! whose reads fail (history cannot be asked), and a stream the aggregate cannot read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use tokio::sync::Notify;
use wow_core::event::{ConsumerError, DomainEvent, EventConsumer};
use wow_core::eventsourcing::{EventStore, EventStoreDecorator, EventStoreError, RequestDecision};
use wow_core::{AggregateId, DomainEventStream, ErrorCode};

/// What is broken now.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    /// The `ledger` consumer fails every stream.
    pub(crate) consumer: AtomicBool,
    /// Appends wait until this is off again.
    pub(crate) gate: AtomicBool,
    /// Reads of history fail.
    pub(crate) reads: AtomicBool,
    opened: Notify,
}

impl Faults {
    fn set(&self, fault: &str, on: bool) -> bool {
        let flag = match fault {
            "consumer" => &self.consumer,
            "gate" => &self.gate,
            "reads" => &self.reads,
            _ => return false,
        };
        flag.store(on, Ordering::SeqCst);
        if !on {
            self.opened.notify_waiters();
        }
        true
    }

    fn unavailable(&self) -> Result<(), EventStoreError> {
        if self.reads.load(Ordering::SeqCst) {
            return Err(EventStoreError::Unavailable(
                "reads are failing (the test's fault)".into(),
            ));
        }
        Ok(())
    }
}

/// `POST /test/{fault}/{on|off}`; and `POST /test/corrupt/{tenant}/{id}`, which appends a
/// stream with an event the account cannot read (its next command quarantines it).
pub(crate) fn routes(faults: Arc<Faults>, events: Arc<dyn EventStore>) -> Router {
    Router::new()
        .route(
            "/test/{fault}/{state}",
            post(
                |State(faults): State<Arc<Faults>>,
                 Path((fault, state)): Path<(String, String)>| async move {
                    if faults.set(&fault, state == "on") {
                        StatusCode::NO_CONTENT
                    } else {
                        StatusCode::NOT_FOUND
                    }
                },
            ),
        )
        .with_state(faults)
        .route(
            "/test/corrupt/{tenant}/{id}",
            post(move |Path((tenant, id)): Path<(String, String)>| {
                let events = events.clone();
                async move {
                    let stream = DomainEventStream {
                        id: wow_core::id::new_id(),
                        request_id: format!("corrupt-{id}"),
                        command_id: wow_core::id::new_id(),
                        aggregate_id: AggregateId::new("bank", "account", id, tenant),
                        version: 1,
                        create_time: wow_core::id::now_millis(),
                        fingerprint: String::new(),
                        header: Default::default(),
                        body: vec![DomainEvent {
                            id: wow_core::id::new_id(),
                            name: "NoSuchEvent".to_owned(),
                            revision: "0.0.1".to_owned(),
                            body: serde_json::json!({}),
                        }],
                    };
                    match events.append(&stream).await {
                        Ok(()) => StatusCode::NO_CONTENT,
                        Err(_) => StatusCode::CONFLICT,
                    }
                }
            }),
        )
}

/// The consumer `ledger`: fails while the fault is on, else does nothing.
#[derive(Debug)]
pub(crate) struct Ledger(pub(crate) Arc<Faults>);

#[async_trait]
impl EventConsumer for Ledger {
    fn name(&self) -> &str {
        "ledger"
    }

    async fn handle(&self, _stream: &DomainEventStream) -> Result<(), ConsumerError> {
        if self.0.consumer.load(Ordering::SeqCst) {
            return Err(ConsumerError::new(
                ErrorCode::ServiceUnavailable,
                "the ledger is down (the test's fault)",
            ));
        }
        Ok(())
    }
}

/// The store the service runs on: `inner`, with the faults: appends wait at the gate, and the
/// reads of history (`load`, `load_by_time`, `last`, `find_decision`) fail while `reads` is
/// on. Everything else, the queries included, reaches `inner` as it is.
#[derive(Debug)]
pub(crate) struct Controlled {
    pub(crate) inner: Arc<dyn EventStore>,
    pub(crate) faults: Arc<Faults>,
}

#[async_trait]
impl EventStoreDecorator for Controlled {
    fn inner(&self) -> &dyn EventStore {
        &*self.inner
    }

    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        while self.faults.gate.load(Ordering::SeqCst) {
            let opened = self.faults.opened.notified();
            if !self.faults.gate.load(Ordering::SeqCst) {
                break;
            }
            opened.await;
        }
        self.inner.append(stream).await
    }

    async fn load(
        &self,
        id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.faults.unavailable()?;
        self.inner.load(id, head, tail).await
    }

    async fn load_by_time(
        &self,
        id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.faults.unavailable()?;
        self.inner.load_by_time(id, start, end).await
    }

    async fn last(&self, id: &AggregateId) -> Result<Option<DomainEventStream>, EventStoreError> {
        self.faults.unavailable()?;
        self.inner.last(id).await
    }

    async fn find_decision(
        &self,
        id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        self.faults.unavailable()?;
        self.inner.find_decision(id, request_id).await
    }
}

#[tokio::test]
async fn controlled_passes_every_method_to_the_inner_store_but_the_reads_it_fails() {
    use wow_core::eventsourcing::{EventStoreMethod, RecordingEventStore};
    let inner = Arc::new(RecordingEventStore::new());
    let store = Controlled {
        inner: inner.clone(),
        faults: Arc::new(Faults::default()),
    };
    assert_eq!(
        inner.trace(&store).await,
        EventStoreMethod::forwarded_trace()
    );
    store.faults.set("reads", true);
    let mut expected = EventStoreMethod::forwarded_trace();
    for read in [
        EventStoreMethod::Load,
        EventStoreMethod::LoadByTime,
        EventStoreMethod::Last,
        EventStoreMethod::FindDecision,
        EventStoreMethod::FindRequest,
    ] {
        expected.insert(read, Vec::new());
    }
    assert_eq!(inner.trace(&store).await, expected);
}
