//! Parked streams (SPEC DS-5): once a consumer's delivery of an aggregate's stream fails, the
//! consumer's later streams of that aggregate wait behind it, in version order, until it
//! succeeds or an operator skips it.
//!
//! History is already the queue: a lane keeps the failed version (its head) and the highest
//! version parked behind it, and releasing the lane delivers the versions in between from the
//! event store, one after another. Lanes live in the store's database, so a restart, a second
//! process or a partition move sees them.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::event::ConsumerStoreError;
use wow_model::aggregate_id::AggregateId;

/// One aggregate held back for one consumer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParkedLane {
    /// The consumer held back.
    pub consumer: String,
    /// The aggregate whose streams wait.
    pub aggregate_id: AggregateId,
    /// The version whose delivery failed: the only one retried while the lane is open.
    pub head_version: u64,
    /// The highest version parked behind the head; the head's own version when none is.
    pub parked_through: u64,
    /// When the lane opened (milliseconds since the Unix epoch).
    pub since: i64,
}

impl ParkedLane {
    /// How many streams wait behind the head (each stream is one version).
    pub fn parked(&self) -> u64 {
        self.parked_through.saturating_sub(self.head_version)
    }
}

/// The durable lanes of parked streams (SPEC DS-5). Every backend passes the `parking` suite
/// of `wow-tck`.
#[async_trait]
pub trait ParkedStreams: Send + Sync + std::fmt::Debug {
    /// Holds `aggregate` back for `consumer` at `version`, whose delivery just failed, and
    /// returns the lane: a new one opened at `now`, or the open one with its head moved to
    /// `version` (a stream released from it failed); what was parked behind stays parked.
    async fn hold(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
        version: u64,
        now: i64,
    ) -> Result<ParkedLane, ConsumerStoreError>;

    /// Parks `version` behind the open lane of (`consumer`, `aggregate`) and returns `true`;
    /// `false` when no lane is open, and the stream is the consumer's to handle.
    async fn park(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
        version: u64,
    ) -> Result<bool, ConsumerStoreError>;

    /// Closes the lane when nothing is parked past `through` and returns `true`; `false`, the
    /// lane kept, when more was parked meanwhile (deliver it first, then try again) or no lane
    /// is open.
    async fn release(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
        through: u64,
    ) -> Result<bool, ConsumerStoreError>;

    /// The open lane of (`consumer`, `aggregate`), if any.
    async fn lane(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
    ) -> Result<Option<ParkedLane>, ConsumerStoreError>;

    /// Every open lane, of `consumer` only when given, oldest first.
    async fn lanes(&self, consumer: Option<&str>) -> Result<Vec<ParkedLane>, ConsumerStoreError>;
}

/// Parked lanes in memory: the reference for the durable versions.
#[derive(Debug, Default)]
pub struct InMemoryParkedStreams {
    lanes: Mutex<BTreeMap<(String, AggregateId), ParkedLane>>,
}

impl InMemoryParkedStreams {
    /// No lanes.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<(String, AggregateId), ParkedLane>) -> T) -> T {
        f(&mut self.lanes.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[async_trait]
impl ParkedStreams for InMemoryParkedStreams {
    async fn hold(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
        version: u64,
        now: i64,
    ) -> Result<ParkedLane, ConsumerStoreError> {
        Ok(self.with(|lanes| {
            let lane = lanes
                .entry((consumer.to_owned(), aggregate.clone()))
                .or_insert_with(|| ParkedLane {
                    consumer: consumer.to_owned(),
                    aggregate_id: aggregate.clone(),
                    head_version: version,
                    parked_through: version,
                    since: now,
                });
            lane.head_version = version;
            lane.parked_through = lane.parked_through.max(version);
            lane.clone()
        }))
    }

    async fn park(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
        version: u64,
    ) -> Result<bool, ConsumerStoreError> {
        Ok(self.with(
            |lanes| match lanes.get_mut(&(consumer.to_owned(), aggregate.clone())) {
                Some(lane) => {
                    lane.parked_through = lane.parked_through.max(version);
                    true
                }
                None => false,
            },
        ))
    }

    async fn release(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
        through: u64,
    ) -> Result<bool, ConsumerStoreError> {
        let key = (consumer.to_owned(), aggregate.clone());
        Ok(self.with(|lanes| match lanes.get(&key) {
            Some(lane) if lane.parked_through <= through => lanes.remove(&key).is_some(),
            _ => false,
        }))
    }

    async fn lane(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
    ) -> Result<Option<ParkedLane>, ConsumerStoreError> {
        Ok(self.with(|lanes| {
            lanes
                .get(&(consumer.to_owned(), aggregate.clone()))
                .cloned()
        }))
    }

    async fn lanes(&self, consumer: Option<&str>) -> Result<Vec<ParkedLane>, ConsumerStoreError> {
        let mut found: Vec<ParkedLane> = self.with(|lanes| {
            lanes
                .values()
                .filter(|lane| consumer.is_none_or(|c| lane.consumer == c))
                .cloned()
                .collect()
        });
        found.sort_by_key(|lane| lane.since);
        Ok(found)
    }
}
