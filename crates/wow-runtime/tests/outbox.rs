//! The outbox: rows written once per event, delivered at most once each (SPEC DS-2).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{add, counter, stream};

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use wow_core::event::{
    effect_key, EffectJournal, EventConsumer, InMemoryEffectJournal, ProcessError, Processed,
};
use wow_core::eventsourcing::BoxError;
use wow_core::outbox::OutboxSender;
use wow_core::outbox::*;
use wow_core::testing_example::{Counter, CounterEvent};
use wow_core::view::{
    InMemoryViewStore, RecordingViewStore, ViewKey, ViewStore, ViewStoreDecorator, ViewStoreMethod,
    ViewUpdate,
};
use wow_core::{AggregateId, ErrorCode};
use wow_runtime::outbox::*;

/// One row per unit added: `Added { by: 2 }` owes two rows.
#[derive(Debug)]
struct Units;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Unit {
    counter: String,
    tenant: String,
    event: String,
}

impl Outbox for Units {
    type Aggregate = Counter;
    type Row = Unit;
    const NAME: &'static str = "units";

    fn rows(event: &CounterEvent, meta: &EventMeta<'_>) -> Vec<Unit> {
        let CounterEvent::Added(added) = event else {
            return Vec::new();
        };
        (0..added.by)
            .map(|_| Unit {
                counter: meta.aggregate_id.to_owned(),
                tenant: meta.tenant_id.to_owned(),
                event: meta.event_id.to_owned(),
            })
            .collect()
    }
}

/// A view store whose `fail_at`th update (from 1) fails once, as a crash between two rows.
#[derive(Debug)]
struct Cut {
    inner: Arc<dyn ViewStore>,
    updates: AtomicUsize,
    fail_at: usize,
}

impl Cut {
    /// An in-memory view store whose `fail_at`th update fails (0: none does).
    fn new(fail_at: usize) -> Self {
        Self::over(Arc::new(InMemoryViewStore::new()), fail_at)
    }

    fn over(inner: Arc<dyn ViewStore>, fail_at: usize) -> Self {
        Self {
            inner,
            updates: AtomicUsize::new(0),
            fail_at,
        }
    }
}

#[async_trait]
impl ViewStoreDecorator for Cut {
    fn inner(&self) -> &dyn ViewStore {
        &*self.inner
    }

    async fn update(
        &self,
        key: &ViewKey,
        message_id: &str,
        work: ViewUpdate,
    ) -> Result<Processed, ProcessError> {
        if self.updates.fetch_add(1, Ordering::SeqCst) + 1 == self.fail_at {
            return Err(ProcessError::Store("the process died".into()));
        }
        self.inner.update(key, message_id, work).await
    }
}

#[tokio::test]
async fn cut_passes_every_method_to_the_inner_store_but_the_update_it_cuts() {
    let inner = Arc::new(RecordingViewStore::new());
    let cut = Cut::over(inner.clone(), 1);
    let mut expected = ViewStoreMethod::forwarded_trace();
    expected.insert(ViewStoreMethod::Update, Vec::new());
    assert_eq!(inner.trace(&cut).await, expected);
    assert_eq!(
        inner.trace(&cut).await,
        ViewStoreMethod::forwarded_trace(),
        "the cut happens once"
    );
}

#[tokio::test]
async fn a_redelivered_stream_writes_nothing_twice() {
    let store: Arc<dyn ViewStore> = Arc::new(InMemoryViewStore::new());
    let processor = OutboxProcessor::<Units>::new(store.clone());
    assert_eq!(processor.name(), "units");
    let first = stream(&counter("c-1", "t"), 1, &[CounterEvent::Started, add(2)]);
    processor.handle(&first).await.unwrap();
    processor.handle(&first).await.unwrap();
    let rows = processor.rows().await.unwrap();
    let event = &first.body[1].id;
    let ids: Vec<&str> = rows.iter().map(|row| row.id.as_str()).collect();
    assert_eq!(ids, [event.clone(), format!("{event}#1")]);
    assert!(rows
        .iter()
        .all(|row| row.version == 1 && row.row.event == *event));
}

#[tokio::test]
async fn a_stream_cut_off_between_rows_stores_the_missing_ones_once() {
    let cut = Arc::new(Cut::new(2));
    let processor = OutboxProcessor::<Units>::new(cut.clone());
    let s = stream(&counter("c-1", "t"), 1, &[add(3)]);
    let error = processor.handle(&s).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::ServiceUnavailable);
    assert_eq!(
        processor.rows().await.unwrap().len(),
        1,
        "the first row is in"
    );
    processor.handle(&s).await.unwrap();
    processor.handle(&s).await.unwrap();
    assert_eq!(processor.rows().await.unwrap().len(), 3);
}

#[tokio::test]
async fn two_tenants_have_their_own_rows_and_other_aggregates_are_ignored() {
    let store: Arc<dyn ViewStore> = Arc::new(InMemoryViewStore::new());
    let processor = OutboxProcessor::<Units>::new(store.clone());
    processor
        .handle(&stream(&counter("c-1", "b"), 1, &[add(1)]))
        .await
        .unwrap();
    processor
        .handle(&stream(&counter("c-1", "a"), 1, &[add(1)]))
        .await
        .unwrap();
    let elsewhere = AggregateId::new("demo", "other", "c-1", "a");
    processor
        .handle(&stream(&elsewhere, 1, &[add(5)]))
        .await
        .unwrap();
    let rows = processor.rows().await.unwrap();
    let tenants: Vec<(&str, &str)> = rows
        .iter()
        .map(|row| (row.tenant_id.as_str(), row.row.tenant.as_str()))
        .collect();
    assert_eq!(tenants, [("a", "a"), ("b", "b")]);
}

#[tokio::test]
async fn a_stream_that_does_not_decode_fails_and_writes_nothing() {
    let store: Arc<dyn ViewStore> = Arc::new(InMemoryViewStore::new());
    let processor = OutboxProcessor::<Units>::new(store);
    let mut bad = stream(&counter("c-1", "t"), 1, &[add(1)]);
    bad.body[0].name = "Renamed".to_owned();
    let error = processor.handle(&bad).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::IllegalState);
    assert!(processor.rows().await.unwrap().is_empty());
}

/// A sender that deduplicates by key, counting its sends.
#[derive(Debug, Default)]
struct Sender {
    sent: Mutex<HashMap<String, Unit>>,
    calls: AtomicUsize,
    down: Mutex<bool>,
}

#[async_trait]
impl OutboxSender<Unit> for Sender {
    async fn send(&self, key: &str, row: &Unit) -> Result<(), BoxError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if *self.down.lock().unwrap() {
            return Err("down".into());
        }
        self.sent
            .lock()
            .unwrap()
            .insert(key.to_owned(), row.clone());
        Ok(())
    }
    async fn sent(&self, key: &str) -> Result<bool, BoxError> {
        Ok(self.sent.lock().unwrap().contains_key(key))
    }
}

#[tokio::test]
async fn delivery_after_a_crash_between_started_and_done_confirms_by_key() {
    let store: Arc<dyn ViewStore> = Arc::new(InMemoryViewStore::new());
    let journal = Arc::new(InMemoryEffectJournal::new());
    let processor = OutboxProcessor::<Units>::new(store.clone());
    for (tenant, by) in [("a", 2), ("b", 1)] {
        processor
            .handle(&stream(&counter("c-1", tenant), 1, &[add(by)]))
            .await
            .unwrap();
    }
    let rows = processor.rows().await.unwrap();
    let sender = Sender::default();
    // The first row went out and the process died before "done".
    let cut = effect_key("units_sender", &rows[0].id);
    journal.start("units_sender", &cut, 1).await.unwrap();
    sender.sent.lock().unwrap().insert(cut, rows[0].row.clone());
    let delivery = OutboxDelivery::<Units>::new(store, journal, "units_sender").with_page(1);
    let first = delivery.deliver(&sender, 2).await.unwrap();
    assert_eq!(
        first,
        Delivery {
            sent: 2,
            confirmed: 1,
            ..Delivery::default()
        }
    );
    assert_eq!(
        sender.calls.load(Ordering::SeqCst),
        2,
        "the cut-off row is not sent again"
    );
    let again = delivery.deliver(&sender, 3).await.unwrap();
    assert_eq!(again.already_done, 3);
    assert_eq!(sender.calls.load(Ordering::SeqCst), 2);
    for row in &rows {
        assert!(sender
            .sent
            .lock()
            .unwrap()
            .contains_key(&effect_key("units_sender", &row.id)));
    }
}

#[tokio::test]
async fn a_failed_send_is_counted_and_sent_under_the_same_key_next_time() {
    let store: Arc<dyn ViewStore> = Arc::new(InMemoryViewStore::new());
    let journal = Arc::new(InMemoryEffectJournal::new());
    OutboxProcessor::<Units>::new(store.clone())
        .handle(&stream(&counter("c-1", "t"), 1, &[add(1)]))
        .await
        .unwrap();
    let delivery = OutboxDelivery::<Units>::new(store, journal, "units_sender");
    let sender = Sender::default();
    *sender.down.lock().unwrap() = true;
    assert_eq!(delivery.deliver(&sender, 1).await.unwrap().failed, 1);
    *sender.down.lock().unwrap() = false;
    assert_eq!(delivery.deliver(&sender, 2).await.unwrap().sent, 1);
    assert_eq!(sender.sent.lock().unwrap().len(), 1);
}

#[test]
fn the_spec_kit_gives_the_rows_of_the_events() {
    OutboxSpec::<Units>::new()
        .of("t", "c-9")
        .given([CounterEvent::Started, add(2)])
        .expect_ids(["event-2", "event-2#1"])
        .expect_rows(vec![
            Unit {
                counter: "c-9".into(),
                tenant: "t".into(),
                event: "event-2".into(),
            };
            2
        ]);
    OutboxSpec::<Units>::new()
        .given([CounterEvent::Started])
        .expect_no_rows();
}
