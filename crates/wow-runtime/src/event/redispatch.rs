//! Re-dispatch: an operator runs one consumer again on a range of an aggregate type's history
//! (one aggregate, or every one of the type), in version order, as catch-up delivers it.
//!
//! What it does to each kind of consumer (the run goes through the dispatcher exactly as a
//! catch-up's, [`EventDispatcher::run_consumer`]):
//!
//! - a projection or event processor that keeps processed-message records (SPEC DS-2) skips
//!   a stream whose record it holds: re-dispatching what it applied changes nothing, and a
//!   stream it never applied (its record lost, or its view emptied for a rebuild) is applied
//!   once. One that keeps no such records runs its `handle` again: its effects are its own to
//!   make idempotent (the effect journal, SPEC DS-2);
//! - a saga sends again the commands the events call for, with the same request ids derived
//!   from each event (`{event id}/{index}`): the aggregates answer them as duplicates, nothing
//!   is applied twice, a command that was never sent is sent once;
//! - a consumer never sees an aggregate's history out of order: where it has not handled the
//!   versions below the range, the dispatcher delivers those first, from history (SPEC
//!   DS-5), as for any stream past a gap;
//! - positions never move back (a position moves to the next version only): streams the
//!   consumer had not handled move it as catch-up would;
//! - a failure is recorded for compensation as a live one, and stops that aggregate's run
//!   (with parked streams, SPEC DS-5, the later streams park behind it, in order).

use serde::Serialize;

use crate::event::catch_up::IdPages;
use crate::event::{CatchUpError, EventDispatcher};
use wow_core::eventsourcing::EventStore;
use wow_core::{AggregateId, NamedAggregate};

/// Which streams a re-dispatch runs its consumer on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedispatchRange {
    /// The aggregate type.
    pub aggregate: NamedAggregate,
    /// Only this aggregate of the type; `None`: every aggregate of the type.
    pub aggregate_id: Option<String>,
    /// Only aggregates of this tenant; `None`: every tenant's (with an `aggregate_id`, the
    /// default tenant's).
    pub tenant_id: Option<String>,
    /// The first version (at least 1).
    pub from_version: u64,
    /// The last version; `None`: each aggregate's head.
    pub to_version: Option<u64>,
}

/// What a re-dispatch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RedispatchOutcome {
    /// Aggregates whose streams in the range were delivered.
    pub aggregates: u64,
    /// Streams the consumer ran on successfully (or found processed already).
    pub streams_handled: u64,
    /// Aggregates whose run stopped on a failure (recorded for compensation).
    pub aggregates_failed: u64,
}

/// Runs `consumer` again on the streams of `range` read from `store`, aggregate by aggregate,
/// each aggregate's in version order (see the module's documentation for what that does to
/// each kind of consumer). Returns once the positions it moved are written.
pub async fn redispatch(
    dispatcher: &EventDispatcher,
    consumer: &str,
    store: &dyn EventStore,
    range: &RedispatchRange,
) -> Result<RedispatchOutcome, CatchUpError> {
    let named_consumer = dispatcher
        .consumer(consumer)
        .ok_or_else(|| CatchUpError::UnknownConsumer(consumer.to_owned()))?;
    let mut outcome = RedispatchOutcome::default();
    let to = range.to_version.unwrap_or(u64::MAX);
    let run = |aggregates: Vec<AggregateId>| {
        let named_consumer = &named_consumer;
        async move {
            let mut done = RedispatchOutcome::default();
            for aggregate in &aggregates {
                done.aggregates += 1;
                for stream in store.load(aggregate, range.from_version, to).await? {
                    match dispatcher.run_consumer(named_consumer, &stream).await {
                        Ok(()) => done.streams_handled += 1,
                        Err(error) => {
                            tracing::warn!(consumer, %aggregate, version = stream.version, %error, "re-dispatch: the consumer failed on a stream");
                            if !dispatcher.holds_back(consumer, aggregate) {
                                done.aggregates_failed += 1;
                                break;
                            }
                        }
                    }
                }
            }
            Ok::<_, CatchUpError>(done)
        }
    };
    let mut add = |done: RedispatchOutcome| {
        outcome.aggregates += done.aggregates;
        outcome.streams_handled += done.streams_handled;
        outcome.aggregates_failed += done.aggregates_failed;
    };
    match &range.aggregate_id {
        Some(id) => {
            let tenant = range
                .tenant_id
                .clone()
                .unwrap_or_else(|| wow_core::DEFAULT_TENANT_ID.to_owned());
            add(run(vec![range.aggregate.aggregate_id(id.clone(), tenant)]).await?);
        }
        None => {
            let mut pages = IdPages::new(store, &range.aggregate);
            while let Some(page) = pages.next().await? {
                let page: Vec<_> = page
                    .into_iter()
                    .filter(|aggregate| {
                        range
                            .tenant_id
                            .as_deref()
                            .is_none_or(|tenant| aggregate.tenant_id == tenant)
                    })
                    .collect();
                add(run(page).await?);
            }
        }
    }
    dispatcher.flush_positions().await;
    Ok(outcome)
}
