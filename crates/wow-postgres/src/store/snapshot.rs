//! Table `snapshot`: the latest state of each aggregate, the `SnapshotStore` implementation.
//!
//! Why a version-guarded upsert rather than a plain one: saves of one aggregate may land in
//! any order (concurrent nodes, a retried save), and an older snapshot must never replace a
//! newer one.

use async_trait::async_trait;
use tokio_postgres::Row;
use wow_core::eventsourcing::{Snapshot, SnapshotStore, SnapshotStoreError};
use wow_core::AggregateId;

use super::{clamp, PostgresStore};
use crate::error::{pool_snapshot_error, snapshot_error};

/// The snapshot of aggregate (`$3` tenant, `$1` name, `$2` id), if it has one.
const LOAD_SNAPSHOT: &str = "SELECT aggregate_name, aggregate_id, context_name, tenant_id, version, state, snapshot_time, state_version FROM snapshot WHERE tenant_id = $3 AND aggregate_name = $1 AND aggregate_id = $2";

/// The version of the snapshot of aggregate (`$3` tenant, `$1` name, `$2` id), if it has one.
const SNAPSHOT_VERSION: &str = "SELECT version FROM snapshot WHERE tenant_id = $3 AND aggregate_name = $1 AND aggregate_id = $2";

/// Saves a snapshot, `$1` to `$8` in column order, unless the one stored has a higher
/// version: one row changed when it was saved, none when it was older.
const SAVE_SNAPSHOT: &str = "INSERT INTO snapshot (aggregate_name, aggregate_id, context_name, tenant_id, version, state, snapshot_time, state_version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (tenant_id, aggregate_name, aggregate_id) DO UPDATE SET
                    context_name = EXCLUDED.context_name, version = EXCLUDED.version,
                    state = EXCLUDED.state, snapshot_time = EXCLUDED.snapshot_time,
                    state_version = EXCLUDED.state_version
                 WHERE EXCLUDED.version >= snapshot.version";

/// Decodes a row of [`LOAD_SNAPSHOT`].
fn decode_snapshot(row: &Row) -> Result<Snapshot, SnapshotStoreError> {
    Ok(Snapshot {
        aggregate_id: AggregateId {
            aggregate_name: row.try_get(0).map_err(snapshot_error)?,
            id: row.try_get(1).map_err(snapshot_error)?,
            context_name: row.try_get(2).map_err(snapshot_error)?,
            tenant_id: row.try_get(3).map_err(snapshot_error)?,
        },
        version: u64::try_from(row.try_get::<_, i64>(4).map_err(snapshot_error)?).unwrap_or(0),
        state: row.try_get(5).map_err(snapshot_error)?,
        snapshot_time: row.try_get(6).map_err(snapshot_error)?,
        state_version: u32::try_from(row.try_get::<_, i32>(7).map_err(snapshot_error)?)
            .unwrap_or(0),
    })
}

#[async_trait]
impl SnapshotStore for PostgresStore {
    async fn load(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<Snapshot>, SnapshotStoreError> {
        self.within(async {
            let client = self.pool.get().await.map_err(pool_snapshot_error)?;
            let row = client
                .query_opt(
                    LOAD_SNAPSHOT,
                    &[
                        &aggregate_id.aggregate_name,
                        &aggregate_id.id,
                        &aggregate_id.tenant_id,
                    ],
                )
                .await
                .map_err(snapshot_error)?;
            row.as_ref().map(decode_snapshot).transpose()
        })
        .await
    }

    async fn version(&self, aggregate_id: &AggregateId) -> Result<Option<u64>, SnapshotStoreError> {
        self.within(async {
            let client = self.pool.get().await.map_err(pool_snapshot_error)?;
            let row = client
                .query_opt(
                    SNAPSHOT_VERSION,
                    &[
                        &aggregate_id.aggregate_name,
                        &aggregate_id.id,
                        &aggregate_id.tenant_id,
                    ],
                )
                .await
                .map_err(snapshot_error)?;
            Ok(row
                .and_then(|row| row.try_get::<_, i64>(0).ok())
                .map(|v| u64::try_from(v).unwrap_or(0)))
        })
        .await
    }

    async fn save(&self, snapshot: &Snapshot) -> Result<bool, SnapshotStoreError> {
        self.within(async {
            let client = self.pool.get().await.map_err(pool_snapshot_error)?;
            let changed = client
                .execute(
                    SAVE_SNAPSHOT,
                    &[
                        &snapshot.aggregate_id.aggregate_name,
                        &snapshot.aggregate_id.id,
                        &snapshot.aggregate_id.context_name,
                        &snapshot.aggregate_id.tenant_id,
                        &clamp(snapshot.version),
                        &snapshot.state,
                        &snapshot.snapshot_time,
                        &i32::try_from(snapshot.state_version).unwrap_or(i32::MAX),
                    ],
                )
                .await
                .map_err(snapshot_error)?;
            Ok(changed > 0)
        })
        .await
    }
}
