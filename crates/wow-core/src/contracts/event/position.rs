//! Consumer positions: how far each consumer has read each aggregate's history, so that a
//! consumer added later, or restarted, catches up from there instead of from the start.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::contracts::event::ConsumerStoreError;
use crate::contracts::eventsourcing::GlobalPosition;
use crate::model::aggregate_id::AggregateId;

/// How far each consumer has handled each aggregate's history, kept durably: the position is
/// the highest version such that the consumer handled every version up to it.
///
/// A position is a resume point, not the guard against double effects: it is advanced after
/// the consumer's own transaction, so a crash between the two replays a stream the consumer
/// has already handled, which its processed-message record then ignores (SPEC DS-1, DS-2).
#[async_trait]
pub trait ConsumerPositions: Send + Sync + std::fmt::Debug {
    /// The positions of `consumer` on `aggregates`, keyed by aggregate (its tenant is part of
    /// the key: two tenants' `alice` have a position each); an aggregate the consumer has not
    /// handled yet is absent.
    async fn positions(
        &self,
        consumer: &str,
        aggregates: &[AggregateId],
    ) -> Result<HashMap<AggregateId, u64>, ConsumerStoreError>;

    /// Records that `consumer` handled `version` of `aggregate`: the position moves to it
    /// when it is the next version (1 on a new aggregate), and stays otherwise. A stream
    /// handled past a gap (an earlier stream failed, or was never delivered) leaves the
    /// position before the gap, so catch-up delivers the missing stream; positions never go
    /// back.
    async fn advance(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
        version: u64,
    ) -> Result<(), ConsumerStoreError>;

    /// [`advance`](Self::advance) for each of `advances` (consumer, aggregate, version), in
    /// order; a backend may write them in one transaction.
    async fn advance_many(
        &self,
        advances: &[(String, AggregateId, u64)],
    ) -> Result<(), ConsumerStoreError> {
        for (consumer, aggregate, version) in advances {
            self.advance(consumer, aggregate, *version).await?;
        }
        Ok(())
    }

    /// For each of `runs`, in order: `consumer` handled every version of `aggregate` in
    /// `from..=to`. The same as [`advance`](Self::advance) for each of those versions in
    /// turn: the position moves to `to` when it is anywhere in `from - 1..to` (created when
    /// `from` is 1), and stays otherwise. A backend writes each run with one statement.
    async fn advance_runs(&self, runs: &[PositionRun<'_>]) -> Result<(), ConsumerStoreError> {
        let advances: Vec<(String, AggregateId, u64)> = runs
            .iter()
            .flat_map(|run| {
                (run.from..=run.to)
                    .map(|version| (run.consumer.to_owned(), run.aggregate.clone(), version))
            })
            .collect();
        self.advance_many(&advances).await
    }

    /// Forgets every position of `consumer`, so that its next catch-up reads all history
    /// (a rebuild; the consumer's own tables and records are its own to clear).
    async fn reset(&self, consumer: &str) -> Result<(), ConsumerStoreError>;

    /// The position in the event store's global feed
    /// ([`EventStore::read_feed`](crate::contracts::eventsourcing::EventStore::read_feed))
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
    positions: Mutex<HashMap<String, HashMap<AggregateId, u64>>>,
    /// By feed reader.
    feed_cursors: Mutex<HashMap<String, GlobalPosition>>,
}

impl InMemoryConsumerPositions {
    /// No positions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves `consumer`'s position on `aggregate` to `to` when it is in `from - 1..to`.
    fn advance_run(&self, consumer: &str, aggregate: &AggregateId, from: u64, to: u64) {
        let mut positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
        let of_consumer = match positions.get_mut(consumer) {
            Some(of_consumer) => of_consumer,
            None => positions.entry(consumer.to_owned()).or_default(),
        };
        match of_consumer.get_mut(aggregate) {
            Some(at) if *at + 1 >= from && *at < to => *at = to,
            Some(_) => {}
            None if from == 1 => {
                of_consumer.insert(aggregate.clone(), to);
            }
            None => {}
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
                    .map(|version| (aggregate.clone(), *version))
            })
            .collect())
    }

    async fn advance(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
        version: u64,
    ) -> Result<(), ConsumerStoreError> {
        self.advance_run(consumer, aggregate, version, version);
        Ok(())
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
