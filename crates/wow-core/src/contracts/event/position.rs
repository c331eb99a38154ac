//! Consumer positions: how far each consumer has read each aggregate's history, so that a
//! consumer added later, or restarted, catches up from there instead of from the start.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::contracts::event::ConsumerStoreError;
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
    async fn advance_runs(&self, runs: &[PositionRun]) -> Result<(), ConsumerStoreError> {
        let advances: Vec<(String, AggregateId, u64)> = runs
            .iter()
            .flat_map(|run| {
                (run.from..=run.to)
                    .map(|version| (run.consumer.clone(), run.aggregate.clone(), version))
            })
            .collect();
        self.advance_many(&advances).await
    }

    /// Forgets every position of `consumer`, so that its next catch-up reads all history
    /// (a rebuild; the consumer's own tables and records are its own to clear).
    async fn reset(&self, consumer: &str) -> Result<(), ConsumerStoreError>;
}

/// A run of versions one consumer handled on one aggregate, with no gap: `from..=to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionRun {
    /// The consumer.
    pub consumer: String,
    /// The aggregate.
    pub aggregate: AggregateId,
    /// The first version of the run.
    pub from: u64,
    /// The last version of the run (at least `from`).
    pub to: u64,
}

/// Consumer, tenant, aggregate name, aggregate id.
type PositionKey = (String, String, String, String);

/// Consumer positions in memory: the reference for the durable versions.
#[derive(Debug, Default)]
pub struct InMemoryConsumerPositions {
    positions: Mutex<HashMap<PositionKey, u64>>,
}

impl InMemoryConsumerPositions {
    /// No positions.
    pub fn new() -> Self {
        Self::default()
    }
}

fn key(consumer: &str, aggregate: &AggregateId) -> PositionKey {
    (
        consumer.to_owned(),
        aggregate.tenant_id.clone(),
        aggregate.aggregate_name.clone(),
        aggregate.id.clone(),
    )
}

#[async_trait]
impl ConsumerPositions for InMemoryConsumerPositions {
    async fn positions(
        &self,
        consumer: &str,
        aggregates: &[AggregateId],
    ) -> Result<HashMap<AggregateId, u64>, ConsumerStoreError> {
        let positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
        Ok(aggregates
            .iter()
            .filter_map(|aggregate| {
                positions
                    .get(&key(consumer, aggregate))
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
        let mut positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
        let key = key(consumer, aggregate);
        let at = positions.get(&key).copied().unwrap_or(0);
        if version == at + 1 {
            positions.insert(key, version);
        }
        Ok(())
    }

    async fn advance_runs(&self, runs: &[PositionRun]) -> Result<(), ConsumerStoreError> {
        let mut positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
        for run in runs {
            let key = key(&run.consumer, &run.aggregate);
            let at = positions.get(&key).copied().unwrap_or(0);
            if at + 1 >= run.from && at < run.to {
                positions.insert(key, run.to);
            }
        }
        Ok(())
    }

    async fn reset(&self, consumer: &str) -> Result<(), ConsumerStoreError> {
        self.positions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(name, _, _, _), _| name != consumer);
        Ok(())
    }
}
