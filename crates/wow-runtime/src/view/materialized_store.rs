//! The materialized snapshots as the aggregates' snapshots: with snapshot queries on, the
//! document the projection `snapshot` keeps per aggregate holds all a load needs (the state,
//! its version and schema), so loads read it and no second copy of the state is written.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use wow_core::eventsourcing::{Snapshot, SnapshotStore, SnapshotStoreError};
use wow_core::view::{ViewKey, ViewStore};
use wow_core::AggregateId;

use super::materialized::snapshot_view;

/// A [`SnapshotStore`] over the materialized snapshots in `views` (see
/// [`MaterializedSnapshots`](super::MaterializedSnapshots)): `load` answers an aggregate's
/// document as its snapshot (none for a deleted aggregate: a load then replays the deletion
/// from history, as it does with any snapshot store); `save` stores nothing and answers
/// `false`, since the projection keeps the documents. A document lags the appends as any
/// snapshot does: a load reads the streams after it.
#[derive(Debug, Clone)]
pub struct MaterializedSnapshotStore {
    views: Arc<dyn ViewStore>,
}

impl MaterializedSnapshotStore {
    /// The snapshots the materialized snapshots in `views` give.
    pub fn new(views: Arc<dyn ViewStore>) -> Self {
        Self { views }
    }

    fn key(aggregate_id: &AggregateId) -> ViewKey {
        ViewKey::new(
            snapshot_view(&aggregate_id.aggregate_name),
            &aggregate_id.tenant_id,
            &aggregate_id.id,
        )
    }
}

fn failed(error: impl std::fmt::Display) -> SnapshotStoreError {
    SnapshotStoreError::Unavailable(error.to_string().into())
}

#[async_trait]
impl SnapshotStore for MaterializedSnapshotStore {
    async fn load(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<Snapshot>, SnapshotStoreError> {
        let Some(row) = self
            .views
            .load(&Self::key(aggregate_id))
            .await
            .map_err(failed)?
        else {
            return Ok(None);
        };
        let mut document = row.state;
        if document.get("deleted") == Some(&Value::Bool(true)) {
            return Ok(None);
        }
        let number = |field: &str| document.get(field).and_then(Value::as_i64);
        let snapshot_time = number("snapshotTime").unwrap_or(row.updated_at);
        let state_version = number("stateVersion")
            .and_then(|version| u32::try_from(version).ok())
            .unwrap_or(0);
        let state = document
            .as_object_mut()
            .and_then(|fields| fields.remove("state"))
            .unwrap_or(Value::Null);
        Ok(Some(Snapshot {
            aggregate_id: aggregate_id.clone(),
            version: row.version,
            state,
            snapshot_time,
            state_version,
        }))
    }

    async fn version(&self, aggregate_id: &AggregateId) -> Result<Option<u64>, SnapshotStoreError> {
        Ok(self
            .load(aggregate_id)
            .await?
            .map(|snapshot| snapshot.version))
    }

    async fn save(&self, _snapshot: &Snapshot) -> Result<bool, SnapshotStoreError> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wow_core::view::{InMemoryViewStore, ViewRow};

    use super::*;

    fn account(id: &str) -> AggregateId {
        AggregateId::new("bank", "account", id, "t1")
    }

    async fn stored(views: &Arc<dyn ViewStore>, id: &str, deleted: bool) {
        let row = ViewRow {
            key: MaterializedSnapshotStore::key(&account(id)),
            version: 4,
            state: json!({"aggregateId": id, "version": 4, "state": {"balance": 9},
                "stateVersion": 2, "snapshotTime": 77, "deleted": deleted}),
            updated_at: 78,
        };
        assert!(views.put_newer(row).await.unwrap());
    }

    #[tokio::test]
    async fn a_document_loads_as_the_aggregates_snapshot_and_a_deleted_one_as_none() {
        let views: Arc<dyn ViewStore> = Arc::new(InMemoryViewStore::new());
        let store = MaterializedSnapshotStore::new(views.clone());
        assert!(store.load(&account("a1")).await.unwrap().is_none());
        stored(&views, "a1", false).await;
        stored(&views, "gone", true).await;
        let snapshot = store.load(&account("a1")).await.unwrap().unwrap();
        assert_eq!(
            (
                snapshot.version,
                snapshot.state,
                snapshot.state_version,
                snapshot.snapshot_time
            ),
            (4, json!({"balance": 9}), 2, 77)
        );
        assert_eq!(store.version(&account("a1")).await.unwrap(), Some(4));
        assert!(store.load(&account("gone")).await.unwrap().is_none());
        // Another tenant's a1 is not this one's.
        let elsewhere = AggregateId::new("bank", "account", "a1", "t2");
        assert!(store.load(&elsewhere).await.unwrap().is_none());
        assert!(!store.save(&snapshot_of(&account("a1"))).await.unwrap());
    }

    fn snapshot_of(aggregate_id: &AggregateId) -> Snapshot {
        Snapshot {
            aggregate_id: aggregate_id.clone(),
            version: 9,
            state: json!({}),
            snapshot_time: 0,
            state_version: 1,
        }
    }
}
