//! Snapshots: an aggregate's state at a version, so loading need not replay all history.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::eventsourcing::SnapshotStoreError;
use wow_model::aggregate_id::AggregateId;

/// An aggregate's state as of `version`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// The aggregate.
    pub aggregate_id: AggregateId,
    /// The version the state reflects.
    pub version: u64,
    /// The state as JSON.
    pub state: Value,
    /// When the snapshot was taken, in milliseconds since the Unix epoch.
    pub snapshot_time: i64,
    /// The version of the state's shape it was taken with
    /// ([`Aggregate::STATE_VERSION`](wow_model::aggregate::Aggregate::STATE_VERSION));
    /// 1 for snapshots from before it was recorded.
    #[serde(default = "first_state_version")]
    pub state_version: u32,
}

fn first_state_version() -> u32 {
    1
}

/// Keeps the newest snapshot of each aggregate.
///
/// # Cancel safety
///
/// All methods are cancel safe: a dropped `save` either stored its snapshot or did not, and
/// either leaves a valid snapshot behind.
#[async_trait]
pub trait SnapshotStore: Send + Sync + std::fmt::Debug {
    /// The snapshot of `aggregate_id`, if one was saved.
    async fn load(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<Snapshot>, SnapshotStoreError>;

    /// The version of the snapshot of `aggregate_id`, if one was saved.
    async fn version(&self, aggregate_id: &AggregateId) -> Result<Option<u64>, SnapshotStoreError>;

    /// Saves `snapshot` unless a newer one is stored: a higher version replaces, an equal
    /// version replaces, an older one is ignored, also under concurrent saves. Returns whether
    /// it was stored.
    async fn save(&self, snapshot: &Snapshot) -> Result<bool, SnapshotStoreError>;
}
