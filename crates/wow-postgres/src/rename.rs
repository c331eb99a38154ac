//! Renaming an aggregate: its rows re-keyed from a former name in one transaction.
//!
//! Why in one transaction under an advisory lock: two processes starting at once rename
//! once, and a rename cut off halfway leaves every row under the former name, to be renamed
//! on the next start. Every keyed table is re-keyed, so that history, snapshots, positions,
//! compensation records, parked lanes, held unique keys and deadlines (those the aggregate
//! owns and those sent to it) stay one aggregate's.

use async_trait::async_trait;
use deadpool_postgres::Transaction;
use wow_core::eventsourcing::{AggregateRename, AggregateRenames, RenameError, RenamedRows};

use crate::error::is_unavailable;
use crate::PostgresStore;

/// Serialises renames of one database (beside the migrations' lock, 7770007).
const RENAME_LOCK: i64 = 7_770_008;

/// Waits for, then holds until the transaction ends, the lock `$1`.
const TAKE_LOCK: &str = "SELECT pg_advisory_xact_lock($1)";

/// The name former name `$1` was renamed to, if it was.
const FIND_RENAME: &str = "SELECT to_name FROM aggregate_rename WHERE from_name = $1";

/// Records that former name `$1` was renamed to `$2` at `$3`.
const RECORD_RENAME: &str =
    "INSERT INTO aggregate_rename (from_name, to_name, renamed_at) VALUES ($1, $2, $3)";

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

/// A keyed table's two statements: how many rows name `$1`, and re-keying them to `$2`.
struct KeyedTable {
    /// Counts the rows of aggregate name `$1`.
    count: &'static str,
    /// Renames the rows of aggregate name `$1` to `$2`.
    rekey: &'static str,
}

/// The keyed tables, in the order their rows are counted in [`RenamedRows`].
const TABLES: [KeyedTable; 4] = [
    KeyedTable {
        count: "SELECT COUNT(*) FROM event_stream WHERE aggregate_name = $1",
        rekey: "UPDATE event_stream SET aggregate_name = $2 WHERE aggregate_name = $1",
    },
    KeyedTable {
        count: "SELECT COUNT(*) FROM snapshot WHERE aggregate_name = $1",
        rekey: "UPDATE snapshot SET aggregate_name = $2 WHERE aggregate_name = $1",
    },
    KeyedTable {
        count: "SELECT COUNT(*) FROM consumer_position WHERE aggregate_name = $1",
        rekey: "UPDATE consumer_position SET aggregate_name = $2 WHERE aggregate_name = $1",
    },
    KeyedTable {
        count: "SELECT COUNT(*) FROM execution_failed WHERE aggregate_name = $1",
        rekey: "UPDATE execution_failed SET aggregate_name = $2 WHERE aggregate_name = $1",
    },
];

/// Re-keys the unique keys (SPEC DM-1) aggregates of name `$1` hold to name `$2`. Their key
/// is (tenant, space, value), so a rename never collides in this table; they are not counted
/// in [`RenamedRows`], which counts the streams that claimed them.
const REKEY_UNIQUE_KEYS: &str =
    "UPDATE unique_key SET aggregate_name = $2 WHERE aggregate_name = $1";

/// Re-keys the lanes of parked streams (SPEC DS-5) of aggregates of name `$1` to name `$2`.
/// The conflict check has refused the rename of an aggregate with history under both names,
/// and a lane exists only for an aggregate with history, so no key collides. Not counted in
/// [`RenamedRows`].
const REKEY_PARKED_LANES: &str =
    "UPDATE parked_lane SET aggregate_name = $2 WHERE aggregate_name = $1";

/// Re-keys the deadlines (SPEC DM-2) of aggregates of name `$1` to name `$2`, in order: a row
/// an aggregate of name `$2` holds under the key a moved row takes is replaced by the moved
/// one, as the in-memory table and SQLite do (rare: the conflict check has already refused
/// the rename of an aggregate with history under both names); then the rows such aggregates
/// own move; then the rows sent to them are re-addressed. A plain `UPDATE` of the owner would
/// fail on `deadline_pk` instead of replacing. Not counted in [`RenamedRows`] either, which
/// counts history.
const REKEY_DEADLINES: [&str; 3] = [
    "DELETE FROM deadline AS taken WHERE taken.aggregate_name = $2 AND EXISTS (
        SELECT 1 FROM deadline AS moved
         WHERE moved.aggregate_name = $1 AND moved.tenant_id = taken.tenant_id
           AND moved.aggregate_id = taken.aggregate_id AND moved.name = taken.name)",
    "UPDATE deadline SET aggregate_name = $2 WHERE aggregate_name = $1",
    "UPDATE deadline SET target_name = $2 WHERE target_name = $1",
];

/// `error` as a [`RenameError`]: unavailable when the database could not be reached.
fn failed(error: tokio_postgres::Error) -> RenameError {
    if is_unavailable(&error) {
        RenameError::Unavailable(error.to_string())
    } else {
        RenameError::Internal(error.to_string())
    }
}

/// Refuses the rename when an aggregate has rows under both its names.
async fn check_no_conflict(
    transaction: &Transaction<'_>,
    rename: AggregateRename<'_>,
) -> Result<(), RenameError> {
    let Some(row) = transaction
        .query_opt(CONFLICT, &[&rename.from, &rename.to])
        .await
        .map_err(failed)?
    else {
        return Ok(());
    };
    Err(rename.conflict(row.get(0), row.get(1)))
}

/// The rows of each of [`TABLES`] under `from`: counted on a dry run, re-keyed to `to`
/// otherwise.
async fn rekey_tables(
    transaction: &Transaction<'_>,
    from: &str,
    to: &str,
    dry_run: bool,
) -> Result<[u64; 4], RenameError> {
    let mut counts = [0u64; 4];
    for (count, table) in counts.iter_mut().zip(&TABLES) {
        *count = if dry_run {
            let rows: i64 = transaction
                .query_one(table.count, &[&from])
                .await
                .map_err(failed)?
                .get(0);
            u64::try_from(rows).unwrap_or(0)
        } else {
            transaction
                .execute(table.rekey, &[&from, &to])
                .await
                .map_err(failed)?
        };
    }
    Ok(counts)
}

#[async_trait]
impl AggregateRenames for PostgresStore {
    /// Re-keys in one transaction, under an advisory lock (two processes starting at once
    /// rename once), and records the rename in `aggregate_rename` so that a later start
    /// answers from that record without scanning the tables again.
    async fn rename_aggregate(
        &self,
        rename: AggregateRename<'_>,
    ) -> Result<RenamedRows, RenameError> {
        let AggregateRename { from, to, dry_run } = rename.checked()?;
        let mut client = self
            .pool
            .get()
            .await
            .map_err(|error| RenameError::Unavailable(error.to_string()))?;
        let transaction = client.transaction().await.map_err(failed)?;
        transaction
            .execute(TAKE_LOCK, &[&RENAME_LOCK])
            .await
            .map_err(failed)?;
        let done = transaction
            .query_opt(FIND_RENAME, &[&from])
            .await
            .map_err(failed)?;
        if done.is_some() {
            return Ok(RenamedRows::default());
        }
        check_no_conflict(&transaction, rename).await?;
        let [streams, snapshots, positions, failures] =
            rekey_tables(&transaction, from, to, dry_run).await?;
        if dry_run {
            // Dropping the transaction rolls it back: nothing was written.
            return Ok(RenamedRows::new(streams, snapshots, positions, failures));
        }
        for rekey in [REKEY_UNIQUE_KEYS, REKEY_PARKED_LANES] {
            transaction
                .execute(rekey, &[&from, &to])
                .await
                .map_err(failed)?;
        }
        for rekey in REKEY_DEADLINES {
            transaction
                .execute(rekey, &[&from, &to])
                .await
                .map_err(failed)?;
        }
        // A moved owner hashes to another partition (SPEC DM-6).
        crate::store::deadline::fill_owner_hashes(&transaction, Some(to))
            .await
            .map_err(failed)?;
        transaction
            .execute(RECORD_RENAME, &[&from, &to, &self.clock.now_millis()])
            .await
            .map_err(failed)?;
        transaction.commit().await.map_err(failed)?;
        Ok(RenamedRows::new(streams, snapshots, positions, failures))
    }
}
