//! Table `deadline`: the pending scheduled commands (SPEC DM-2), one row per (owner
//! aggregate, name), and the writes the writer makes to it. The `DeadlineStore`
//! implementation is in [`deadline_store`].
//!
//! Rows are written on the writer's connection only: an append's changes inside the savepoint
//! of its stream's insert (so a refused append leaves no row), a saga's schedule, a cancel and
//! a fired row's delete each as one statement of a group commit. Reads run on the read pool.
//! The target's tenant is the owner's (an append that sends elsewhere is refused before it
//! reaches the writer), so the row keeps the target's context, name and id only.

mod deadline_store;

use rusqlite::{params, Connection, Row};
use wow_core::deadline::{DeadlineChange, PendingDeadline, ScheduledCommand};
use wow_core::AggregateId;

use crate::write_job::DeadlineWrite;

/// Writes a row, replacing the owner's row of its name: due at its due time, no attempt yet.
const SCHEDULE: &str = "INSERT INTO deadline (tenant_id, aggregate_name, aggregate_id, name, context_name, due_at, target_context, target_name, target_id, command, body, request_id, fire_at, attempts, owner_hash, held_to)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?6, 0, ?13, ?14)
    ON CONFLICT (tenant_id, aggregate_name, aggregate_id, name) DO UPDATE SET
        context_name = excluded.context_name, due_at = excluded.due_at,
        target_context = excluded.target_context, target_name = excluded.target_name,
        target_id = excluded.target_id, command = excluded.command, body = excluded.body,
        request_id = excluded.request_id, fire_at = excluded.fire_at, attempts = 0,
        owner_hash = excluded.owner_hash, held_to = excluded.held_to";

/// Deletes the owner's row of a name.
const CANCEL: &str =
    "DELETE FROM deadline WHERE tenant_id = ?1 AND aggregate_name = ?2 AND aggregate_id = ?3 AND name = ?4";

/// Deletes the owner's row of a name while it carries the request id that fired.
const FIRED: &str = "DELETE FROM deadline WHERE tenant_id = ?1 AND aggregate_name = ?2 AND aggregate_id = ?3 AND name = ?4 AND request_id = ?5";

/// One failed firing more of the owner's row of a name, while it carries the request id that
/// fired: due again at `?6`.
const RETRY: &str = "UPDATE deadline SET attempts = attempts + 1, fire_at = ?6
    WHERE tenant_id = ?1 AND aggregate_name = ?2 AND aggregate_id = ?3 AND name = ?4 AND request_id = ?5
    RETURNING attempts";

/// Makes the owner's row of a name due at `?5`, lifting a hold.
const FIRE_AT: &str = "UPDATE deadline SET fire_at = ?5
    WHERE tenant_id = ?1 AND aggregate_name = ?2 AND aggregate_id = ?3 AND name = ?4";

/// Deletes every row of a tenant with a name (a saga's cancel-all).
const CANCEL_NAMED: &str = "DELETE FROM deadline WHERE tenant_id = ?1 AND name = ?2";

/// The columns every read takes, in [`decode`]'s order.
macro_rules! columns {
    () => {
        "tenant_id, aggregate_name, aggregate_id, name, context_name, due_at, target_context, target_name, target_id, command, body, request_id, fire_at, attempts, held_to"
    };
}

/// The tenants with rows: a skip scan of the primary key (one seek per tenant), so a due
/// read costs the number of tenants, not of rows.
const TENANTS: &str = "WITH RECURSIVE tenants(tenant) AS (
        SELECT MIN(tenant_id) FROM deadline
        UNION ALL
        SELECT (SELECT MIN(tenant_id) FROM deadline WHERE tenant_id > tenants.tenant)
        FROM tenants WHERE tenants.tenant IS NOT NULL
    ) SELECT tenant FROM tenants WHERE tenant IS NOT NULL";

/// One tenant's (`?1`) rows to fire at `?2`, earliest first, at most `?3`, along
/// `deadline_fire`; only those whose owner's partition among `?4` (with `?5` = 2^64 mod `?4`,
/// which turns the stored signed hash back into its unsigned value's remainder) is one of the
/// JSON array `?6`.
const DUE: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM deadline WHERE tenant_id = ?1 AND fire_at <= ?2
      AND ((owner_hash % ?4 + ?4) % ?4 + CASE WHEN owner_hash < 0 THEN ?5 ELSE 0 END) % ?4
          IN (SELECT value FROM json_each(?6))
      ORDER BY fire_at, aggregate_name, aggregate_id, name LIMIT ?3"
);

/// One tenant's (`?1`) earliest `fire_at` below `?2` (the held mark), along
/// `deadline_fire`, of the rows whose owner's partition is one of `?5` (as in [`DUE`], with
/// `?3` the partition count and `?4` its wrap).
const NEXT_FIRE: &str = "SELECT fire_at FROM deadline WHERE tenant_id = ?1 AND fire_at < ?2
      AND ((owner_hash % ?3 + ?3) % ?3 + CASE WHEN owner_hash < 0 THEN ?4 ELSE 0 END) % ?3
          IN (SELECT value FROM json_each(?5))
      ORDER BY fire_at LIMIT 1";

/// One owner's rows, along the primary key.
const OF_OWNER: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM deadline WHERE tenant_id = ?1 AND aggregate_name = ?2 AND aggregate_id = ?3 ORDER BY name"
);

/// The count on its own (SQLite counts a b-tree without decoding rows), the earliest due
/// time by one seek of `deadline_due`.
const BACKLOG: &str = "SELECT (SELECT COUNT(*) FROM deadline), (SELECT MIN(due_at) FROM deadline)";

/// Moves the rows owned by an aggregate named `?1` to the name `?2`. A row the new name
/// already has under that key is replaced by the moved one, as the in-memory table does.
pub(crate) const RENAME_OWNERS: &str =
    "UPDATE OR REPLACE deadline SET aggregate_name = ?2 WHERE aggregate_name = ?1";

/// Re-addresses the rows sent to an aggregate named `?1` to the name `?2`.
pub(crate) const RENAME_TARGETS: &str =
    "UPDATE deadline SET target_name = ?2 WHERE target_name = ?1";

/// The owners (tenant, name, id) with rows, of every name when `?1` is NULL, else of name
/// `?1` only.
const OWNERS: &str = "SELECT DISTINCT tenant_id, aggregate_name, aggregate_id FROM deadline WHERE ?1 IS NULL OR aggregate_name = ?1";

/// Sets the owner hash (SPEC DM-6) of the rows of owner (`?1` tenant, `?2` name, `?3` id) to
/// `?4`.
const SET_OWNER_HASH: &str = "UPDATE deadline SET owner_hash = ?4 WHERE tenant_id = ?1 AND aggregate_name = ?2 AND aggregate_id = ?3";

/// Writes `row` on `connection` (the writer's).
fn schedule(connection: &Connection, row: &ScheduledCommand) -> rusqlite::Result<()> {
    let body = serde_json::to_string(&row.body)
        .map_err(|error| rusqlite::Error::ToSqlConversionFailure(Box::new(error)))?;
    let held_to = row
        .held_to
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|error| rusqlite::Error::ToSqlConversionFailure(Box::new(error)))?;
    connection.prepare_cached(SCHEDULE)?.execute(params![
        row.owner.tenant_id,
        row.owner.aggregate_name,
        row.owner.id,
        row.name,
        row.owner.context_name,
        row.due_at,
        row.target.context_name,
        row.target.aggregate_name,
        row.target.id,
        row.command,
        body,
        row.request_id,
        wow_core::deadline::owner_hash(&row.owner) as i64,
        held_to,
    ])?;
    Ok(())
}

/// Makes `owner`'s `changes` in order, on the writer's connection. The caller runs this in
/// the savepoint of the stream's insert, after the key changes, and rolls all back on a
/// failure.
pub(crate) fn change(
    connection: &Connection,
    owner: &AggregateId,
    changes: &[DeadlineChange],
) -> rusqlite::Result<()> {
    for change in changes {
        match change {
            DeadlineChange::Schedule(row) => schedule(connection, row)?,
            DeadlineChange::Cancel { name } => {
                delete(connection, owner, name, None)?;
            }
        }
    }
    Ok(())
}

/// Runs a write outside an append: 1 when a row was written or deleted (0 when not), the
/// row's attempts after a retry (0: no such row), how many rows a named delete took.
pub(crate) fn write(connection: &Connection, write: &DeadlineWrite) -> rusqlite::Result<u64> {
    match write {
        DeadlineWrite::Schedule(row) => schedule(connection, row).map(|()| 1),
        DeadlineWrite::Delete {
            owner,
            name,
            request_id,
        } => delete(connection, owner, name, request_id.as_deref()).map(u64::from),
        DeadlineWrite::Retry {
            owner,
            name,
            request_id,
            fire_at,
        } => {
            let mut statement = connection.prepare_cached(RETRY)?;
            let mut rows = statement.query(params![
                owner.tenant_id,
                owner.aggregate_name,
                owner.id,
                name,
                request_id,
                fire_at
            ])?;
            match rows.next()? {
                Some(row) => Ok(u64::try_from(row.get::<_, i64>(0)?).unwrap_or(0)),
                None => Ok(0),
            }
        }
        DeadlineWrite::FireAt {
            owner,
            name,
            fire_at,
        } => connection
            .prepare_cached(FIRE_AT)?
            .execute(params![
                owner.tenant_id,
                owner.aggregate_name,
                owner.id,
                name,
                fire_at
            ])
            .map(|n| n as u64),
        DeadlineWrite::DeleteNamed { tenant, name } => connection
            .prepare_cached(CANCEL_NAMED)?
            .execute(params![tenant, name])
            .map(|n| n as u64),
    }
}

fn delete(
    connection: &Connection,
    owner: &AggregateId,
    name: &str,
    request_id: Option<&str>,
) -> rusqlite::Result<bool> {
    let deleted = match request_id {
        None => connection.prepare_cached(CANCEL)?.execute(params![
            owner.tenant_id,
            owner.aggregate_name,
            owner.id,
            name
        ])?,
        Some(request_id) => connection.prepare_cached(FIRED)?.execute(params![
            owner.tenant_id,
            owner.aggregate_name,
            owner.id,
            name,
            request_id
        ])?,
    };
    Ok(deleted > 0)
}

/// Computes the owner hash (SPEC DM-6) of every row, or of the rows owned by aggregates named
/// `aggregate_name`: for the rows a migration found, and the rows a rename moved.
pub(crate) fn fill_owner_hashes(
    connection: &Connection,
    aggregate_name: Option<&str>,
) -> rusqlite::Result<()> {
    let owners: Vec<(String, String, String)> = connection
        .prepare(OWNERS)?
        .query_map(params![aggregate_name], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut update = connection.prepare(SET_OWNER_HASH)?;
    for (tenant, name, id) in owners {
        let hash = wow_core::deadline::aggregate_hash(&tenant, &name, &id) as i64;
        update.execute(params![tenant, name, id, hash])?;
    }
    Ok(())
}

/// A row read by [`DUE`] or [`OF_OWNER`] (the table's columns, in order) as the portable row.
fn decode(row: &Row<'_>) -> rusqlite::Result<PendingDeadline> {
    let tenant_id: String = row.get(0)?;
    let body: String = row.get(10)?;
    let body = serde_json::from_str(&body).map_err(|error| {
        rusqlite::Error::FromSqlConversionFailure(10, rusqlite::types::Type::Text, Box::new(error))
    })?;
    let schedule = ScheduledCommand {
        owner: AggregateId::new(
            row.get::<_, String>(4)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
            tenant_id.clone(),
        ),
        name: row.get(3)?,
        due_at: row.get(5)?,
        target: AggregateId::new(
            row.get::<_, String>(6)?,
            row.get::<_, String>(7)?,
            row.get::<_, String>(8)?,
            tenant_id,
        ),
        command: row.get(9)?,
        body,
        request_id: row.get(11)?,
        held_to: row
            .get::<_, Option<String>>(14)?
            .map(|held_to| serde_json::from_str(&held_to))
            .transpose()
            .map_err(|error| {
                rusqlite::Error::FromSqlConversionFailure(
                    14,
                    rusqlite::types::Type::Text,
                    Box::new(error),
                )
            })?,
    };
    Ok(PendingDeadline {
        schedule,
        fire_at: row.get(12)?,
        attempts: u32::try_from(row.get::<_, i64>(13)?).unwrap_or(u32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPEC DM-2, DM-6: each tenant's due read is a range of `deadline_fire`, in its order,
    /// so its cost follows what it returns, not what is pending; the tenants come from a skip
    /// scan, one seek each.
    #[test]
    fn due_is_served_by_the_fire_index_and_tenants_by_a_skip_scan() {
        let mut connection = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut connection).unwrap();
        let plan = |sql: &str, params: &[&dyn rusqlite::ToSql]| -> Vec<String> {
            let mut statement = connection
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap();
            statement
                .query_map(params, |row| row.get(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        let due = plan(DUE, &[&"t", &0, &10, &1, &0, &"[0]"]);
        assert!(
            due.iter()
                .any(|step| step.starts_with("SEARCH deadline USING INDEX deadline_fire")),
            "{due:?}"
        );
        assert!(
            !due.iter().any(|step| step.contains("TEMP B-TREE")),
            "{due:?}"
        );
        let tenants = plan(TENANTS, &[]);
        assert!(
            !tenants.iter().any(|step| step.starts_with("SCAN deadline")),
            "{tenants:?}"
        );
    }
}
