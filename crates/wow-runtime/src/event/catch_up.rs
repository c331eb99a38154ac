//! Catch-up: a consumer added later, rebuilt, or restarted reads the history it has not
//! handled yet from the event store, aggregate by aggregate, from its position.

use futures::StreamExt;

use crate::event::EventDispatcher;
use wow_core::event::ConsumerError;
use wow_core::eventsourcing::{EventStore, EventStoreError};
use wow_core::{AggregateId, NamedAggregate};

/// How far a catch-up has come; passed to its progress callback after every aggregate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatchUpProgress {
    /// Aggregates of the types caught up, counted before it starts.
    pub aggregates_total: u64,
    /// Aggregates done so far.
    pub aggregates_done: u64,
    /// Streams the consumer handled.
    pub streams_handled: u64,
    /// Aggregates the consumer stopped on: it failed on a stream, which is recorded for
    /// compensation when the dispatcher records failures, and its later streams wait for
    /// the next catch-up.
    pub aggregates_failed: u64,
}

/// Why a catch-up stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatchUpError {
    /// The dispatcher runs no consumer of that name.
    #[error("no consumer is named `{0}`")]
    UnknownConsumer(String),
    /// The event store could not be read.
    #[error(transparent)]
    EventStore(#[from] EventStoreError),
    /// The positions could not be read.
    #[error(transparent)]
    Positions(#[from] wow_core::event::ConsumerStoreError),
}

const PAGE: usize = 500;

/// Aggregates caught up at the same time: their writes share the store's group commits.
const PARALLEL_AGGREGATES: usize = 16;

/// Runs `consumer` on every stream of the `aggregates` types it has not handled yet: for each
/// aggregate, the streams after its position (all of them without positions), in version
/// order; several aggregates at a time. A failure on a stream is recorded like a live one and stops that aggregate only,
/// so the consumer never sees an aggregate's history out of order. Calls `progress` after
/// every aggregate.
///
/// Returns once the positions it moved are written.
///
/// Catching up while live deliveries run is safe: a stream handled by both is applied once
/// by the consumer's processed-message record (SPEC DS-1).
pub async fn catch_up(
    dispatcher: &EventDispatcher,
    consumer: &str,
    store: &dyn EventStore,
    aggregates: &[NamedAggregate],
    progress: &mut (dyn FnMut(&CatchUpProgress) + Send),
) -> Result<CatchUpProgress, CatchUpError> {
    let named_consumer = dispatcher
        .consumer(consumer)
        .ok_or_else(|| CatchUpError::UnknownConsumer(consumer.to_owned()))?;
    let mut done = CatchUpProgress {
        aggregates_total: count(store, aggregates).await?,
        ..CatchUpProgress::default()
    };
    for named in aggregates {
        let mut pages = IdPages::new(store, named);
        while let Some(page) = pages.next().await? {
            let positions = match dispatcher.positions() {
                Some(positions) => positions.positions(consumer, &page).await?,
                None => Default::default(),
            };
            let mut caught_up = futures::stream::iter(page.iter().map(|aggregate| {
                let from = positions.get(aggregate).copied().unwrap_or(0) + 1;
                catch_up_aggregate(dispatcher, &named_consumer, store, aggregate, from)
            }))
            .buffer_unordered(PARALLEL_AGGREGATES);
            while let Some(outcome) = caught_up.next().await {
                let outcome = outcome?;
                done.streams_handled += outcome.handled;
                if let Some(error) = outcome.stopped_on {
                    done.aggregates_failed += 1;
                    tracing::warn!(consumer, aggregate = %outcome.aggregate, %error, "catch-up stopped on a failing stream");
                }
                done.aggregates_done += 1;
                progress(&done);
            }
        }
    }
    dispatcher.flush_positions().await;
    Ok(done)
}

/// The ids of one aggregate type, a page at a time, in id order.
pub(crate) struct IdPages<'a> {
    store: &'a dyn EventStore,
    named: &'a NamedAggregate,
    after: Option<AggregateId>,
}

impl<'a> IdPages<'a> {
    pub(crate) fn new(store: &'a dyn EventStore, named: &'a NamedAggregate) -> Self {
        Self {
            store,
            named,
            after: None,
        }
    }

    /// The next page; `None` after the last.
    pub(crate) async fn next(&mut self) -> Result<Option<Vec<AggregateId>>, EventStoreError> {
        let page = self
            .store
            .scan_aggregate_ids(self.named, self.after.as_ref(), PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(None);
        };
        self.after = Some(last.clone());
        Ok(Some(page))
    }
}

/// How many aggregates of the `aggregates` types the store holds.
async fn count(store: &dyn EventStore, aggregates: &[NamedAggregate]) -> Result<u64, CatchUpError> {
    let mut total = 0;
    for named in aggregates {
        let mut pages = IdPages::new(store, named);
        while let Some(page) = pages.next().await? {
            total += page.len() as u64;
        }
    }
    Ok(total)
}

/// What catching up one aggregate did.
struct AggregateCaughtUp<'a> {
    aggregate: &'a AggregateId,
    /// Streams the consumer handled.
    handled: u64,
    /// The failure it stopped on, if it did.
    stopped_on: Option<ConsumerError>,
}

/// Handles the streams of `aggregate` from version `from`, in order, stopping at the first
/// failure; with parked streams (SPEC DS-5), the streams after a failure are handed on too,
/// and park behind it in order, so its retry's success runs them.
async fn catch_up_aggregate<'a>(
    dispatcher: &EventDispatcher,
    consumer: &crate::event::NamedConsumer,
    store: &dyn EventStore,
    aggregate: &'a AggregateId,
    from: u64,
) -> Result<AggregateCaughtUp<'a>, CatchUpError> {
    let mut done = AggregateCaughtUp {
        aggregate,
        handled: 0,
        stopped_on: None,
    };
    for stream in store.load(aggregate, from, u64::MAX).await? {
        match dispatcher.run_consumer(consumer, &stream).await {
            Ok(()) => done.handled += 1,
            Err(error) => {
                let parks = dispatcher.holds_back(consumer.name(), aggregate);
                done.stopped_on.get_or_insert(error);
                if !parks {
                    break;
                }
            }
        }
    }
    Ok(done)
}
