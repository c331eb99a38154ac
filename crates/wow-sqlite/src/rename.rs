//! Renaming an aggregate: its rows re-keyed from a former name in one transaction.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use wow_core::eventsourcing::{AggregateRename, AggregateRenames, RenameError, RenamedRows};

use crate::store::deadline;
use crate::SqliteStore;

/// The name former name `?1` was renamed to, if it was.
const FIND_RENAME: &str = "SELECT to_name FROM aggregate_rename WHERE from_name = ?1";

/// Records that former name `?1` was renamed to `?2` at `?3`.
const RECORD_RENAME: &str =
    "INSERT INTO aggregate_rename (from_name, to_name, renamed_at) VALUES (?1, ?2, ?3)";

/// The first (tenant, id) with rows under both names, in any keyed table.
const CONFLICT: &str = "
    SELECT a.tenant_id, a.aggregate_id FROM event_stream a
     WHERE a.aggregate_name = ?1
       AND EXISTS (SELECT 1 FROM event_stream b
                    WHERE b.tenant_id = a.tenant_id AND b.aggregate_name = ?2 AND b.aggregate_id = a.aggregate_id)
    UNION ALL
    SELECT a.tenant_id, a.aggregate_id FROM snapshot a
     WHERE a.aggregate_name = ?1
       AND EXISTS (SELECT 1 FROM snapshot b
                    WHERE b.tenant_id = a.tenant_id AND b.aggregate_name = ?2 AND b.aggregate_id = a.aggregate_id)
    UNION ALL
    SELECT a.tenant_id, a.aggregate_id FROM consumer_position a
     WHERE a.aggregate_name = ?1
       AND EXISTS (SELECT 1 FROM consumer_position b
                    WHERE b.consumer = a.consumer AND b.tenant_id = a.tenant_id
                      AND b.aggregate_name = ?2 AND b.aggregate_id = a.aggregate_id)
    LIMIT 1";

/// Re-keys the holders of unique keys.
const RENAME_KEY_HOLDERS: &str =
    "UPDATE unique_key SET aggregate_name = ?2 WHERE aggregate_name = ?1";

/// Re-keys the lanes of parked streams (SPEC DS-5). A lane exists only for an aggregate with
/// history, and the conflict check refuses a rename with history under both names, so no key
/// collides.
const RENAME_PARKED_LANES: &str =
    "UPDATE parked_lane SET aggregate_name = ?2 WHERE aggregate_name = ?1";

/// A keyed table's two statements: how many rows name `?1`, and re-keying them to `?2`.
struct KeyedTable {
    /// Counts the rows of aggregate name `?1`.
    count: &'static str,
    /// Renames the rows of aggregate name `?1` to `?2`.
    rekey: &'static str,
}

/// The keyed tables, in the order their rows are counted in [`RenamedRows`].
const TABLES: [KeyedTable; 4] = [
    KeyedTable {
        count: "SELECT COUNT(*) FROM event_stream WHERE aggregate_name = ?1",
        rekey: "UPDATE event_stream SET aggregate_name = ?2 WHERE aggregate_name = ?1",
    },
    KeyedTable {
        count: "SELECT COUNT(*) FROM snapshot WHERE aggregate_name = ?1",
        rekey: "UPDATE snapshot SET aggregate_name = ?2 WHERE aggregate_name = ?1",
    },
    KeyedTable {
        count: "SELECT COUNT(*) FROM consumer_position WHERE aggregate_name = ?1",
        rekey: "UPDATE consumer_position SET aggregate_name = ?2 WHERE aggregate_name = ?1",
    },
    KeyedTable {
        count: "SELECT COUNT(*) FROM execution_failed WHERE aggregate_name = ?1",
        rekey: "UPDATE execution_failed SET aggregate_name = ?2 WHERE aggregate_name = ?1",
    },
];

/// The rename in the writer's transaction: `Ok(None)` when it was recorded as done before.
fn rename(
    connection: &Connection,
    rename: AggregateRename<'_>,
    now: i64,
) -> rusqlite::Result<Result<RenamedRows, RenameError>> {
    let AggregateRename { from, to, dry_run } = rename;
    let done: Option<String> = connection
        .query_row(FIND_RENAME, [from], |row| row.get(0))
        .optional()?;
    if done.is_some() {
        return Ok(Ok(RenamedRows::default()));
    }
    let conflict: Option<(String, String)> = connection
        .query_row(CONFLICT, params![from, to], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()?;
    if let Some((tenant, id)) = conflict {
        return Ok(Err(rename.conflict(tenant, id)));
    }
    let mut counts = [0u64; 4];
    for (count, table) in counts.iter_mut().zip(&TABLES) {
        let rows = if dry_run {
            connection.query_row(table.count, [from], |row| row.get::<_, i64>(0))?
        } else {
            let changed = connection.execute(table.rekey, params![from, to])?;
            i64::try_from(changed).unwrap_or(i64::MAX)
        };
        *count = u64::try_from(rows).unwrap_or(0);
    }
    if !dry_run {
        // The keys an aggregate holds (SPEC DM-1) follow it; they are not counted as rows of
        // its history.
        connection.execute(RENAME_KEY_HOLDERS, params![from, to])?;
        // So do the lanes of its parked streams (SPEC DS-5).
        connection.execute(RENAME_PARKED_LANES, params![from, to])?;
        // So do the deadlines it owns and those sent to it (SPEC DM-2), in this transaction.
        connection.execute(deadline::RENAME_OWNERS, params![from, to])?;
        connection.execute(deadline::RENAME_TARGETS, params![from, to])?;
        // A moved owner hashes to another partition (SPEC DM-6).
        deadline::fill_owner_hashes(connection, Some(to))?;
        connection.execute(RECORD_RENAME, params![from, to, now])?;
    }
    let [streams, snapshots, positions, failures] = counts;
    Ok(Ok(RenamedRows::new(
        streams, snapshots, positions, failures,
    )))
}

#[async_trait]
impl AggregateRenames for SqliteStore {
    /// Re-keys in the writer's transaction, and records the rename in `aggregate_rename` so
    /// that a later start answers from that record without scanning the tables again.
    async fn rename_aggregate(
        &self,
        rename: AggregateRename<'_>,
    ) -> Result<RenamedRows, RenameError> {
        let AggregateRename { from, to, dry_run } = rename.checked()?;
        let (from, to) = (from.to_owned(), to.to_owned());
        let now = self.clock.now_millis();
        let outcome = std::sync::Arc::new(std::sync::Mutex::new(None));
        let slot = outcome.clone();
        let written = self
            .transact(move |connection| {
                let rename = AggregateRename {
                    from: &from,
                    to: &to,
                    dry_run,
                };
                let made = self::rename(connection, rename, now)?;
                let refused = made.is_err();
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(made);
                if refused {
                    // Roll the savepoint back (nothing was written; the record says why).
                    return Err("the rename was refused".into());
                }
                Ok(())
            })
            .await;
        if let Err(error) = written {
            if !matches!(
                &*outcome.lock().unwrap_or_else(|p| p.into_inner()),
                Some(Err(_))
            ) {
                return Err(match error {
                    wow_core::event::ProcessError::Store(error) => {
                        RenameError::Unavailable(error.to_string())
                    }
                    other => RenameError::Internal(other.to_string()),
                });
            }
        }
        let made = outcome.lock().unwrap_or_else(|p| p.into_inner()).take();
        made.unwrap_or_else(|| Err(RenameError::Internal("the writer ran no work".into())))
    }
}
