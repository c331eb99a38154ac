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
use wow_core::event::{ConsumerError, EventConsumer, ProcessError};
use wow_core::eventsourcing::{EventStore, Snapshot};
use wow_core::id::{Clock, SystemClock};
use wow_core::view::ViewStore;
use wow_core::view::{ViewKey, ViewRow};
use wow_core::ErrorCode;

use crate::eventsourcing::{internal, replay, replay_failed};

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
#[derive(Debug)]
pub struct MaterializedSnapshots {
    registry: AggregateRegistry,
    events: Arc<dyn EventStore>,
    views: Arc<dyn ViewStore>,
    clock: Arc<dyn Clock>,
}

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
        let key = ViewKey::new(snapshot_view(&id.aggregate_name), &id.tenant_id, &id.id);
        let stored = self.views.load(&key).await.map_err(|error| {
            ConsumerError::new(ErrorCode::ServiceUnavailable, error.to_string())
        })?;
        if stored
            .as_ref()
            .is_some_and(|row| row.version >= stream.version)
        {
            return Ok(());
        }
        let (state, first_event_time) =
            self.fold(runtime.as_ref(), stored.as_ref(), stream).await?;
        let operator = stream
            .header
            .get("command_operator")
            .cloned()
            .unwrap_or_default();
        let first_operator = stored
            .as_ref()
            .and_then(|row| row.state.get("firstOperator").and_then(Value::as_str))
            .map_or_else(|| operator.clone(), str::to_owned);
        let document = json!({
            "contextName": id.context_name,
            "aggregateName": id.aggregate_name,
            "tenantId": id.tenant_id,
            "ownerId": kept(stream, stored.as_ref(), OWNER_ID_HEADER, "ownerId"),
            "spaceId": kept(stream, stored.as_ref(), SPACE_ID_HEADER, "spaceId"),
            "aggregateId": id.id,
            "version": stream.version,
            "eventId": stream.body.last().map(|event| event.id.clone()).unwrap_or_default(),
            "firstOperator": first_operator,
            "operator": operator,
            "firstEventTime": first_event_time,
            "eventTime": stream.create_time,
            "state": state.to_json().map_err(internal)?,
            "stateVersion": state.schema_version(),
            "snapshotTime": self.clock.now_millis(),
            "tags": {},
            "deleted": state.is_deleted(),
        });
        let row = ViewRow {
            key: key.clone(),
            version: stream.version,
            state: document,
            updated_at: self.clock.now_millis(),
        };
        let version = stream.version;
        let written = self
            .views
            .update(
                &key,
                &stream.id,
                Box::new(move |current| {
                    // Another delivery may have moved it on meanwhile: never back.
                    Ok(match current {
                        Some(current) if current.version >= version => None,
                        _ => Some(row),
                    })
                }),
            )
            .await;
        match written {
            Ok(_) => Ok(()),
            Err(ProcessError::Store(error)) => Err(ConsumerError::new(
                ErrorCode::ServiceUnavailable,
                error.to_string(),
            )),
            Err(other) => Err(internal(other)),
        }
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
