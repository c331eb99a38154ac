//! Consumer positions: how far each consumer has read each aggregate's history, so that a
//! consumer added later, or restarted, catches up from there instead of from the start.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::event::{ConsumerStoreError, HandledVersions};
use crate::eventsourcing::GlobalPosition;
use wow_model::aggregate_id::AggregateId;

/// How far each consumer has handled each aggregate's history, kept durably: the position is
/// the highest version such that the consumer handled every version up to it.
///
/// A stream handled past a gap (an earlier stream failed and waits for its retry, or was never
/// delivered) leaves the position before the gap, so catch-up delivers the missing stream;
/// the versions handled past the gap are kept too, durably, and the position takes them in
/// once the gap is filled (a retry that succeeds, a redelivery). Writes are order-free: the
/// same runs written in any order, by any number of writers, any number of times, give the
/// same position ([`HandledVersions`]). Positions never go back.
///
/// A position is a resume point, not the guard against double effects: it is advanced after
/// the consumer's own transaction, so a crash between the two replays a stream the consumer
/// has already handled, which its processed-message record then ignores (SPEC DS-1, DS-2).
#[async_trait]
pub trait ConsumerPositions: Send + Sync + std::fmt::Debug {
    /// The positions of `consumer` on `aggregates`, keyed by aggregate (its tenant is part of
    /// the key: two tenants' `alice` have a position each); an aggregate on which the
    /// consumer has not handled version 1 yet is absent.
    async fn positions(
        &self,
        consumer: &str,
        aggregates: &[AggregateId],
    ) -> Result<HashMap<AggregateId, u64>, ConsumerStoreError>;

    /// Records that `consumer` handled `version` of `aggregate`: a run of one version
    /// ([`advance_runs`](Self::advance_runs)).
    async fn advance(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
        version: u64,
    ) -> Result<(), ConsumerStoreError> {
        self.advance_runs(&[PositionRun {
            consumer,
            aggregate,
            from: version,
            to: version,
        }])
        .await
    }

    /// [`advance`](Self::advance) for each of `advances` (consumer, aggregate, version), in
    /// one write.
    async fn advance_many(
        &self,
        advances: &[(String, AggregateId, u64)],
    ) -> Result<(), ConsumerStoreError> {
        let runs: Vec<PositionRun<'_>> = advances
            .iter()
            .map(|(consumer, aggregate, version)| PositionRun {
                consumer,
                aggregate,
                from: *version,
                to: *version,
            })
            .collect();
        self.advance_runs(&runs).await
    }

    /// For each of `runs`: `consumer` handled every version of `aggregate` in `from..=to`.
    /// The position moves to the end of the handled versions with no gap below them
    /// ([`HandledVersions::add`]): to `to` when it is anywhere in `from - 1..to`, and further
    /// over the runs kept ahead that `to` joins up with; a run past a gap is kept ahead until
    /// the gap is filled. A backend writes each run with one statement, all in one
    /// transaction.
    async fn advance_runs(&self, runs: &[PositionRun<'_>]) -> Result<(), ConsumerStoreError>;

    /// Forgets every position of `consumer`, so that its next catch-up reads all history
    /// (a rebuild; the consumer's own tables and records are its own to clear).
    async fn reset(&self, consumer: &str) -> Result<(), ConsumerStoreError>;

    /// The position in the event store's global feed
    /// ([`EventFeed::read_feed`](crate::eventsourcing::EventFeed::read_feed))
    /// that the feed reader `reader` saved; [`GlobalPosition::START`] when it saved none.
    async fn feed_cursor(&self, reader: &str) -> Result<GlobalPosition, ConsumerStoreError>;

    /// Saves `position` as `reader`'s feed position, durably; a position at or before the
    /// one saved changes nothing (a cursor never moves back, so two instances of a reader
    /// saving out of order lose nothing).
    async fn save_feed_cursor(
        &self,
        reader: &str,
        position: GlobalPosition,
    ) -> Result<(), ConsumerStoreError>;
}

/// A run of versions one consumer handled on one aggregate, with no gap: `from..=to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PositionRun<'a> {
    /// The consumer.
    pub consumer: &'a str,
    /// The aggregate.
    pub aggregate: &'a AggregateId,
    /// The first version of the run.
    pub from: u64,
    /// The last version of the run (at least `from`).
    pub to: u64,
}

/// Consumer positions in memory: the reference for the durable versions.
#[derive(Debug, Default)]
pub struct InMemoryConsumerPositions {
    /// By consumer, then aggregate.
    positions: Mutex<HashMap<String, HashMap<AggregateId, HandledVersions>>>,
    /// By feed reader.
    feed_cursors: Mutex<HashMap<String, GlobalPosition>>,
}

impl InMemoryConsumerPositions {
    /// No positions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the run `from..=to` to what `consumer` handled of `aggregate`.
    fn advance_run(&self, consumer: &str, aggregate: &AggregateId, from: u64, to: u64) {
        let mut positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
        let of_consumer = match positions.get_mut(consumer) {
            Some(of_consumer) => of_consumer,
            None => positions.entry(consumer.to_owned()).or_default(),
        };
        match of_consumer.get_mut(aggregate) {
            Some(handled) => {
                handled.add(from, to);
            }
            None => {
                let mut handled = HandledVersions::new();
                handled.add(from, to);
                of_consumer.insert(aggregate.clone(), handled);
            }
        }
    }
}

impl InMemoryConsumerPositions {
    /// A (tenant, id) with a position of one consumer under both `from` and `to`.
    pub(crate) fn rename_conflict(&self, from: &str, to: &str) -> Option<(String, String)> {
        let positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
        positions.values().find_map(|of_consumer| {
            of_consumer
                .keys()
                .filter(|a| a.aggregate_name == from)
                .find(|a| {
                    let mut renamed = (*a).clone();
                    renamed.aggregate_name = to.to_owned();
                    of_consumer.contains_key(&renamed)
                })
                .map(|a| (a.tenant_id.clone(), a.id.clone()))
        })
    }

    /// Re-keys every consumer's positions on the aggregate named `from` to `to`; how many.
    pub(crate) fn rename(&self, from: &str, to: &str, dry_run: bool) -> u64 {
        let mut positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
        let mut rows = 0;
        for of_consumer in positions.values_mut() {
            let keys: Vec<AggregateId> = of_consumer
                .keys()
                .filter(|a| a.aggregate_name == from)
                .cloned()
                .collect();
            rows += keys.len() as u64;
            if dry_run {
                continue;
            }
            for key in keys {
                if let Some(version) = of_consumer.remove(&key) {
                    let mut renamed = key;
                    renamed.aggregate_name = to.to_owned();
                    of_consumer.insert(renamed, version);
                }
            }
        }
        rows
    }
}

#[async_trait]
impl ConsumerPositions for InMemoryConsumerPositions {
    async fn positions(
        &self,
        consumer: &str,
        aggregates: &[AggregateId],
    ) -> Result<HashMap<AggregateId, u64>, ConsumerStoreError> {
        let positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
        let Some(of_consumer) = positions.get(consumer) else {
            return Ok(HashMap::new());
        };
        Ok(aggregates
            .iter()
            .filter_map(|aggregate| {
                of_consumer
                    .get(aggregate)
                    .map(HandledVersions::position)
                    .filter(|position| *position > 0)
                    .map(|position| (aggregate.clone(), position))
            })
            .collect())
    }

    async fn advance_runs(&self, runs: &[PositionRun<'_>]) -> Result<(), ConsumerStoreError> {
        for run in runs {
            self.advance_run(run.consumer, run.aggregate, run.from, run.to);
        }
        Ok(())
    }

    async fn reset(&self, consumer: &str) -> Result<(), ConsumerStoreError> {
        self.positions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(consumer);
        Ok(())
    }

    async fn feed_cursor(&self, reader: &str) -> Result<GlobalPosition, ConsumerStoreError> {
        Ok(self
            .feed_cursors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(reader)
            .copied()
            .unwrap_or(GlobalPosition::START))
    }

    async fn save_feed_cursor(
        &self,
        reader: &str,
        position: GlobalPosition,
    ) -> Result<(), ConsumerStoreError> {
        let mut cursors = self.feed_cursors.lock().unwrap_or_else(|p| p.into_inner());
        let saved = cursors
            .entry(reader.to_owned())
            .or_insert(GlobalPosition::START);
        *saved = (*saved).max(position);
        Ok(())
    }
}
