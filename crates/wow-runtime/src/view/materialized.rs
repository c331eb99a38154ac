//! Materialized snapshots: the latest state of every aggregate as a document Wow's snapshot
//! queries read (`MaterializedSnapshot`: ids, version, times, `state`, `deleted`), kept as a
//! view row per (aggregate type, tenant, aggregate id), so every store queries it with the
//! query DSL and keeps it with its processed-message record (SPEC DS-2).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use wow_core::aggregate::AggregateState;
use wow_core::aggregate::{AggregateRegistry, AggregateRuntime};
use wow_core::command::{OWNER_ID_HEADER, SPACE_ID_HEADER};
use wow_core::event::DomainEventStream;
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::eventsourcing::{EventStore, Snapshot};
use wow_core::id::{new_id, Clock, SystemClock};
use wow_core::view::{ViewKey, ViewRow};
use wow_core::view::{ViewStore, ViewStoreError};
use wow_core::{AggregateId, ErrorCode};

use crate::eventsourcing::{internal, replay, replay_failed, AggregateCache};

/// The consumer's name: one projection for every aggregate of the service.
pub const MATERIALIZED_SNAPSHOTS: &str = "snapshot";

/// The view whose rows are the materialized snapshots of the aggregate `aggregate_name`.
pub fn snapshot_view(aggregate_name: &str) -> String {
    format!("wow.snapshot.{aggregate_name}")
}

/// A projection (stage `PROJECTED`, named [`MATERIALIZED_SNAPSHOTS`]) that keeps, for every
/// aggregate of `registry`, its latest state as a `MaterializedSnapshot` document in the view
/// [`snapshot_view`]: each stream is folded into the stored document's state; a document that
/// is behind by more than one version (a missed stream, a start after history was written)
/// is rebuilt from history. A document never moves back, so redelivery changes nothing.
///
/// The documents it wrote last are kept in memory too (about 10,000 aggregates): a stream
/// that follows one is folded into it with no read of the store and no decoding, and written
/// with no processed-message record ([`ViewStore::put_newer`]: the version is the guard).
#[derive(Debug)]
pub struct MaterializedSnapshots {
    registry: AggregateRegistry,
    events: Arc<dyn EventStore>,
    views: Arc<dyn ViewStore>,
    clock: Arc<dyn Clock>,
    written: AggregateCache<Document>,
}

/// What a document holds beyond the state that a later stream keeps: its first event's time
/// and operator, and the owner and space its commands named last.
#[derive(Debug, Clone)]
struct Document {
    state: AggregateState,
    first_event_time: i64,
    first_operator: String,
    owner_id: String,
    space_id: String,
}

/// How many documents a [`MaterializedSnapshots`] keeps in memory.
const WRITTEN_CAPACITY: usize = 10_000;

impl MaterializedSnapshots {
    /// The materialized snapshots of `registry`'s aggregates, folded from `events` into
    /// `views`.
    pub fn new(
        registry: AggregateRegistry,
        events: Arc<dyn EventStore>,
        views: Arc<dyn ViewStore>,
    ) -> Self {
        Self {
            registry,
            events,
            views,
            clock: Arc::new(SystemClock),
            written: AggregateCache::new(WRITTEN_CAPACITY),
        }
    }

    /// Times `snapshotTime` by `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The state after `stream`, from the stored document when it is one version behind,
    /// else from history; and the time of the aggregate's first event.
    async fn fold(
        &self,
        runtime: &dyn AggregateRuntime,
        stored: Option<&ViewRow>,
        stream: &DomainEventStream,
    ) -> Result<(AggregateState, i64), ConsumerError> {
        if let Some(row) = stored.filter(|row| row.version + 1 == stream.version) {
            let snapshot = Snapshot {
                aggregate_id: stream.aggregate_id.clone(),
                version: row.version,
                state: row.state.get("state").cloned().unwrap_or(Value::Null),
                snapshot_time: 0,
                state_version: row
                    .state
                    .get("stateVersion")
                    .and_then(Value::as_u64)
                    .and_then(|v| u32::try_from(v).ok())
                    .unwrap_or(0),
            };
            if let Ok(mut state) = runtime.restore_state(&snapshot) {
                state.set_deleted(row.state.get("deleted") == Some(&Value::Bool(true)));
                if state.schema_version() == runtime.initial_state().schema_version() {
                    runtime.apply(&mut state, stream).map_err(internal)?;
                    let first = row
                        .state
                        .get("firstEventTime")
                        .and_then(Value::as_i64)
                        .unwrap_or(stream.create_time);
                    return Ok((state, first));
                }
            }
        }
        let mut state = runtime.initial_state();
        let history = replay(
            runtime,
            self.events.as_ref(),
            &stream.aggregate_id,
            &mut state,
            stream.version,
        )
        .await
        .map_err(replay_failed)?;
        if state.version() != stream.version {
            return Err(ConsumerError::new(
                ErrorCode::IllegalState,
                format!(
                    "history of {} ends at version {}, before the stream at {}",
                    stream.aggregate_id,
                    state.version(),
                    stream.version
                ),
            ));
        }
        let first = history
            .first()
            .map_or(stream.create_time, |s| s.create_time);
        Ok((state, first))
    }
}

#[async_trait]
impl EventConsumer for MaterializedSnapshots {
    fn name(&self) -> &str {
        MATERIALIZED_SNAPSHOTS
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        let id = &stream.aggregate_id;
        let Some(runtime) = self.registry.get(&id.aggregate_name) else {
            return Ok(());
        };
        let document = match self.written.take(id) {
            Some(mut written) if written.state.version() + 1 == stream.version => {
                runtime
                    .apply(&mut written.state, stream)
                    .map_err(internal)?;
                written.owner_id = named_or(stream, OWNER_ID_HEADER, written.owner_id);
                written.space_id = named_or(stream, SPACE_ID_HEADER, written.space_id);
                written
            }
            Some(written) if written.state.version() >= stream.version => {
                // A redelivery: the document is there already, at this version or later.
                self.written.put(id, written);
                return Ok(());
            }
            _ => match self.load_document(runtime.as_ref(), stream).await? {
                Some(document) => document,
                None => return Ok(()),
            },
        };
        let row = document_row(stream, &document, self.clock.now_millis())?;
        match self.views.put_newer(row).await {
            Ok(_) => {
                self.written.put(id, document);
                Ok(())
            }
            Err(error) => Err(write_failed(&error)),
        }
    }
}

/// A document's write that failed: `ServiceUnavailable` when the store could not be reached
/// (the stream is retried), `IllegalState` when the store refused the write.
fn write_failed(error: &ViewStoreError) -> ConsumerError {
    let code = match error {
        ViewStoreError::Unavailable(_) => ErrorCode::ServiceUnavailable,
        _ => ErrorCode::IllegalState,
    };
    ConsumerError::new(code, error.to_string())
}

impl MaterializedSnapshots {
    /// The document after `stream` from the stored one (or from history), or `None` when
    /// the stored one is at its version or later already.
    async fn load_document(
        &self,
        runtime: &dyn AggregateRuntime,
        stream: &DomainEventStream,
    ) -> Result<Option<Document>, ConsumerError> {
        let id = &stream.aggregate_id;
        let key = ViewKey::new(snapshot_view(&id.aggregate_name), &id.tenant_id, &id.id);
        let stored = self.views.load(&key).await.map_err(|error| {
            ConsumerError::new(ErrorCode::ServiceUnavailable, error.to_string())
        })?;
        if stored
            .as_ref()
            .is_some_and(|row| row.version >= stream.version)
        {
            return Ok(None);
        }
        let (state, first_event_time) = self.fold(runtime, stored.as_ref(), stream).await?;
        let first_operator = stored
            .as_ref()
            .and_then(|row| row.state.get("firstOperator").and_then(Value::as_str))
            .map_or_else(|| operator(stream), str::to_owned);
        Ok(Some(Document {
            state,
            first_event_time,
            first_operator,
            owner_id: kept(stream, stored.as_ref(), OWNER_ID_HEADER, "ownerId"),
            space_id: kept(stream, stored.as_ref(), SPACE_ID_HEADER, "spaceId"),
        }))
    }
}

/// The view row of `document`, the aggregate's state after `stream`, written at `now`.
fn document_row(
    stream: &DomainEventStream,
    document: &Document,
    now: i64,
) -> Result<ViewRow, ConsumerError> {
    let id = &stream.aggregate_id;
    let state = &document.state;
    let json = json!({
        "contextName": id.context_name,
        "aggregateName": id.aggregate_name,
        "tenantId": id.tenant_id,
        "ownerId": document.owner_id,
        "spaceId": document.space_id,
        "aggregateId": id.id,
        "version": stream.version,
        "eventId": stream.body.last().map(|event| event.id.clone()).unwrap_or_default(),
        "firstOperator": document.first_operator,
        "operator": operator(stream),
        "firstEventTime": document.first_event_time,
        "eventTime": stream.create_time,
        "state": state.to_json().map_err(internal)?,
        "stateVersion": state.schema_version(),
        "snapshotTime": now,
        "tags": {},
        "deleted": state.is_deleted(),
    });
    Ok(ViewRow {
        key: ViewKey::new(snapshot_view(&id.aggregate_name), &id.tenant_id, &id.id),
        version: stream.version,
        state: json,
        updated_at: now,
    })
}

/// Folds the whole history of `aggregate_id` into its materialized snapshot and writes it
/// into `views`, in place of a stored one at the same version or before (Wow's snapshot
/// regeneration: after a change of the state's shape, say); a stored one that is already
/// later stays. Answers the document as stored, or `None` when the aggregate has no history.
///
/// # Errors
///
/// The event store's or the view store's failure (nothing was written), or
/// `InternalServerError` when the history does not fold.
pub async fn regenerate_snapshot(
    runtime: &dyn AggregateRuntime,
    events: &dyn EventStore,
    views: &dyn ViewStore,
    aggregate_id: &AggregateId,
    now: i64,
) -> Result<Option<ViewRow>, ConsumerError> {
    let mut state = runtime.initial_state();
    let history = replay(runtime, events, aggregate_id, &mut state, u64::MAX)
        .await
        .map_err(replay_failed)?;
    let (Some(first), Some(last)) = (history.first(), history.last()) else {
        return Ok(None);
    };
    let named = |header: &str| {
        history
            .iter()
            .rev()
            .find_map(|stream| stream.header.get(header).filter(|value| !value.is_empty()))
            .cloned()
            .unwrap_or_default()
    };
    let document = Document {
        first_event_time: first.create_time,
        first_operator: operator(first),
        owner_id: named(OWNER_ID_HEADER),
        space_id: named(SPACE_ID_HEADER),
        state,
    };
    let row = document_row(last, &document, now)?;
    let version = row.version;
    let stored = row.clone();
    let written = views
        .update(
            &row.key.clone(),
            &new_id(),
            Box::new(move |current| {
                Ok(match current {
                    Some(current) if current.version > version => None,
                    _ => Some(row),
                })
            }),
        )
        .await;
    match written {
        Ok(_) => Ok(Some(stored)),
        Err(error) => Err(ConsumerError::new(
            ErrorCode::ServiceUnavailable,
            error.to_string(),
        )),
    }
}

/// The operator of `stream`'s command (empty when it named none).
fn operator(stream: &DomainEventStream) -> String {
    stream
        .header
        .get("command_operator")
        .cloned()
        .unwrap_or_default()
}

/// The value of `header` on `stream` when it names one, else `before`.
fn named_or(stream: &DomainEventStream, header: &str, before: String) -> String {
    match stream.header.get(header) {
        Some(value) if !value.is_empty() => value.clone(),
        _ => before,
    }
}

/// The owner (or space) of the aggregate after `stream`: the one its command named, else the
/// one before it, as Wow's state keeps them.
fn kept(stream: &DomainEventStream, stored: Option<&ViewRow>, header: &str, field: &str) -> String {
    stream
        .header
        .get(header)
        .filter(|value| !value.is_empty())
        .cloned()
        .or_else(|| {
            stored
                .and_then(|row| row.state.get(field))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default()
}
