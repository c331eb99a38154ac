//! Table `snapshot`: the latest state of each aggregate, the `SnapshotStore` implementation.
//!
//! Reads run on the read pool; a save is a job for the writer, one version-guarded upsert in
//! its group commit. Why version-guarded rather than a plain upsert: saves of one aggregate
//! may land in any order (a retried save, several processes on one file), and an older
//! snapshot must never replace a newer one.

use async_trait::async_trait;
use rusqlite::{params, Connection, Row};
use tokio::sync::oneshot;
use wow_core::eventsourcing::{Snapshot, SnapshotStore, SnapshotStoreError};
use wow_core::AggregateId;

use super::stream_row::text_error;
use super::SqliteStore;
use crate::error::{gone, snapshot_error};
use crate::write_job::WriteJob;

/// The snapshot of aggregate (`?3` tenant, `?1` name, `?2` id), if it has one.
const LOAD_SNAPSHOT: &str = "SELECT aggregate_name, aggregate_id, context_name, tenant_id, version, state, snapshot_time, state_version FROM snapshot WHERE tenant_id = ?3 AND aggregate_name = ?1 AND aggregate_id = ?2";

/// The version of the snapshot of aggregate (`?3` tenant, `?1` name, `?2` id), if it has one.
const SNAPSHOT_VERSION: &str = "SELECT version FROM snapshot WHERE tenant_id = ?3 AND aggregate_name = ?1 AND aggregate_id = ?2";

/// Saves a snapshot, `?1` to `?8` in column order, unless the one stored has a higher
/// version: one row changed when it was saved, none when it was older.
const SAVE_SNAPSHOT: &str = "INSERT INTO snapshot (aggregate_name, aggregate_id, context_name, tenant_id, version, state, snapshot_time, state_version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
    ON CONFLICT (tenant_id, aggregate_name, aggregate_id) DO UPDATE SET
        context_name = excluded.context_name, version = excluded.version,
        state = excluded.state, snapshot_time = excluded.snapshot_time,
        state_version = excluded.state_version
    WHERE excluded.version >= snapshot.version";

/// Decodes a row of [`LOAD_SNAPSHOT`].
fn decode_snapshot(row: &Row<'_>) -> rusqlite::Result<Snapshot> {
    let state: String = row.get(5)?;
    Ok(Snapshot {
        aggregate_id: AggregateId {
            aggregate_name: row.get(0)?,
            id: row.get(1)?,
            context_name: row.get(2)?,
            tenant_id: row.get(3)?,
        },
        version: u64::try_from(row.get::<_, i64>(4)?).unwrap_or(0),
        state: serde_json::from_str(&state).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                5,
                rusqlite::types::Type::Text,
                Box::new(text_error(e.to_string())),
            )
        })?,
        snapshot_time: row.get(6)?,
        state_version: row.get(7)?,
    })
}

/// Saves `snapshot`, its state encoded as `state` ([`SAVE_SNAPSHOT`]), on the writer's
/// connection: whether it was stored (false when the stored one is newer).
pub(crate) fn save_snapshot(
    connection: &Connection,
    snapshot: &Snapshot,
    state: &str,
) -> rusqlite::Result<bool> {
    let changed = connection.prepare_cached(SAVE_SNAPSHOT)?.execute(params![
        snapshot.aggregate_id.aggregate_name,
        snapshot.aggregate_id.id,
        snapshot.aggregate_id.context_name,
        snapshot.aggregate_id.tenant_id,
        i64::try_from(snapshot.version).unwrap_or(i64::MAX),
        state,
        snapshot.snapshot_time,
        snapshot.state_version,
    ])?;
    Ok(changed > 0)
}

#[async_trait]
impl SnapshotStore for SqliteStore {
    async fn load(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<Snapshot>, SnapshotStoreError> {
        self.read_aggregate_row(LOAD_SNAPSHOT, aggregate_id, decode_snapshot)
            .await
            .map_err(snapshot_error)
    }

    async fn version(&self, aggregate_id: &AggregateId) -> Result<Option<u64>, SnapshotStoreError> {
        self.read_aggregate_row(SNAPSHOT_VERSION, aggregate_id, |row| row.get::<_, i64>(0))
            .await
            .map(|version| version.map(|v| u64::try_from(v).unwrap_or(0)))
            .map_err(snapshot_error)
    }

    async fn save(&self, snapshot: &Snapshot) -> Result<bool, SnapshotStoreError> {
        let state = serde_json::to_string(&snapshot.state)
            .map_err(|e| SnapshotStoreError::Internal(Box::new(e)))?;
        let (reply, answer) = oneshot::channel();
        let job = WriteJob::SaveSnapshot {
            snapshot: snapshot.clone(),
            state,
            reply,
        };
        self.writer
            .send(job)
            .await
            .map_err(|_| SnapshotStoreError::Unavailable(gone()))?;
        answer
            .await
            .map_err(|_| SnapshotStoreError::Unavailable(gone()))?
    }
}
