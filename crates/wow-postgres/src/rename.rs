//! Renaming an aggregate: its rows re-keyed from a former name in one transaction.

use async_trait::async_trait;
use wow_core::eventsourcing::{check_rename, AggregateRenames, RenameError, RenamedRows};

use crate::error::is_unavailable;
use crate::PostgresStore;

/// Serialises renames of one database (beside the migrations' lock, 7770007).
const RENAME_LOCK: i64 = 7_770_008;

/// The first (tenant, id) with rows under both names, in any keyed table.
const CONFLICT: &str = "
    (SELECT a.tenant_id, a.aggregate_id FROM event_stream a
      WHERE a.aggregate_name = $1
        AND EXISTS (SELECT 1 FROM event_stream b
                     WHERE b.tenant_id = a.tenant_id AND b.aggregate_name = $2 AND b.aggregate_id = a.aggregate_id)
      LIMIT 1)
    UNION ALL
    (SELECT a.tenant_id, a.aggregate_id FROM snapshot a
      WHERE a.aggregate_name = $1
        AND EXISTS (SELECT 1 FROM snapshot b
                     WHERE b.tenant_id = a.tenant_id AND b.aggregate_name = $2 AND b.aggregate_id = a.aggregate_id)
      LIMIT 1)
    UNION ALL
    (SELECT a.tenant_id, a.aggregate_id FROM consumer_position a
      WHERE a.aggregate_name = $1
        AND EXISTS (SELECT 1 FROM consumer_position b
                     WHERE b.consumer = a.consumer AND b.tenant_id = a.tenant_id
                       AND b.aggregate_name = $2 AND b.aggregate_id = a.aggregate_id)
      LIMIT 1)
    LIMIT 1";

/// The keyed tables, in the order their rows are counted in [`RenamedRows`].
const TABLES: [&str; 4] = [
    "event_stream",
    "snapshot",
    "consumer_position",
    "execution_failed",
];

fn failed(error: tokio_postgres::Error) -> RenameError {
    if is_unavailable(&error) {
        RenameError::Unavailable(error.to_string())
    } else {
        RenameError::Internal(error.to_string())
    }
}

#[async_trait]
impl AggregateRenames for PostgresStore {
    /// Re-keys in one transaction, under an advisory lock (two processes starting at once
    /// rename once), and records the rename in `aggregate_rename` so that a later start
    /// answers from that record without scanning the tables again.
    async fn rename_aggregate(
        &self,
        from: &str,
        to: &str,
        dry_run: bool,
    ) -> Result<RenamedRows, RenameError> {
        check_rename(from, to)?;
        let mut client = self
            .pool
            .get()
            .await
            .map_err(|error| RenameError::Unavailable(error.to_string()))?;
        let transaction = client.transaction().await.map_err(failed)?;
        transaction
            .execute("SELECT pg_advisory_xact_lock($1)", &[&RENAME_LOCK])
            .await
            .map_err(failed)?;
        let done = transaction
            .query_opt(
                "SELECT to_name FROM aggregate_rename WHERE from_name = $1",
                &[&from],
            )
            .await
            .map_err(failed)?;
        if done.is_some() {
            return Ok(RenamedRows::default());
        }
        if let Some(row) = transaction
            .query_opt(CONFLICT, &[&from, &to])
            .await
            .map_err(failed)?
        {
            return Err(RenameError::Conflict {
                from: from.to_owned(),
                to: to.to_owned(),
                tenant: row.get(0),
                id: row.get(1),
            });
        }
        let mut counts = [0u64; 4];
        for (count, table) in counts.iter_mut().zip(TABLES) {
            *count = if dry_run {
                let rows: i64 = transaction
                    .query_one(
                        &format!("SELECT COUNT(*) FROM {table} WHERE aggregate_name = $1"),
                        &[&from],
                    )
                    .await
                    .map_err(failed)?
                    .get(0);
                u64::try_from(rows).unwrap_or(0)
            } else {
                transaction
                    .execute(
                        &format!(
                            "UPDATE {table} SET aggregate_name = $2 WHERE aggregate_name = $1"
                        ),
                        &[&from, &to],
                    )
                    .await
                    .map_err(failed)?
            };
        }
        if dry_run {
            // Dropping the transaction rolls it back: nothing was written.
            return Ok(RenamedRows::new(counts[0], counts[1], counts[2], counts[3]));
        }
        transaction
            .execute(
                "INSERT INTO aggregate_rename (from_name, to_name, renamed_at) VALUES ($1, $2, $3)",
                &[&from, &to, &self.clock.now_millis()],
            )
            .await
            .map_err(failed)?;
        transaction.commit().await.map_err(failed)?;
        let [streams, snapshots, positions, failures] = counts;
        Ok(RenamedRows::new(streams, snapshots, positions, failures))
    }
}
