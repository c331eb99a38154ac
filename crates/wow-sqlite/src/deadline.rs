//! Deadlines (SPEC DM-2): the table `deadline`, one row per (owner aggregate, name).
//!
//! Rows are written on the writer's connection only: an append's changes inside the savepoint
//! of its stream's insert (so a refused append leaves no row), a saga's schedule, a cancel and
//! a fired row's delete each as one statement of a group commit. Reads run on the read pool.
//! The target's tenant is the owner's (an append that sends elsewhere is refused before it
//! reaches the writer), so the row keeps the target's context, name and id only.

use rusqlite::{params, Connection, Row};
use wow_core::deadline::{DeadlineChange, ScheduledCommand};
use wow_core::AggregateId;

/// Writes a row, replacing the owner's row of its name.
const SCHEDULE: &str = "INSERT INTO deadline (tenant_id, aggregate_name, aggregate_id, name, context_name, due_at, target_context, target_name, target_id, command, body, request_id)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
    ON CONFLICT (tenant_id, aggregate_name, aggregate_id, name) DO UPDATE SET
        context_name = excluded.context_name, due_at = excluded.due_at,
        target_context = excluded.target_context, target_name = excluded.target_name,
        target_id = excluded.target_id, command = excluded.command, body = excluded.body,
        request_id = excluded.request_id";

/// Deletes the owner's row of a name.
const CANCEL: &str =
    "DELETE FROM deadline WHERE tenant_id = ?1 AND aggregate_name = ?2 AND aggregate_id = ?3 AND name = ?4";

/// Deletes the owner's row of a name while it carries the request id that fired.
const FIRED: &str = "DELETE FROM deadline WHERE tenant_id = ?1 AND aggregate_name = ?2 AND aggregate_id = ?3 AND name = ?4 AND request_id = ?5";

/// What is due, along the index `deadline_due`. The index of a `WITHOUT ROWID` table ends in
/// the primary key, so ties come in key order, as in the in-memory table, with no sort step
/// (`due_is_served_by_the_due_index` checks the plan).
pub(crate) const DUE: &str = "SELECT tenant_id, aggregate_name, aggregate_id, name, context_name, due_at, target_context, target_name, target_id, command, body, request_id FROM deadline
    WHERE due_at <= ?1 ORDER BY due_at, tenant_id, aggregate_name, aggregate_id, name LIMIT ?2";

/// One owner's rows, along the primary key.
pub(crate) const OF_OWNER: &str = "SELECT tenant_id, aggregate_name, aggregate_id, name, context_name, due_at, target_context, target_name, target_id, command, body, request_id FROM deadline
    WHERE tenant_id = ?1 AND aggregate_name = ?2 AND aggregate_id = ?3 ORDER BY name";

/// The count on its own (SQLite counts a b-tree without decoding rows), the earliest due
/// time by one seek of `deadline_due`.
pub(crate) const BACKLOG: &str =
    "SELECT (SELECT COUNT(*) FROM deadline), (SELECT MIN(due_at) FROM deadline)";

/// Moves the rows owned by an aggregate named `?1` to the name `?2`. A row the new name
/// already has under that key is replaced by the moved one, as the in-memory table does.
pub(crate) const RENAME_OWNERS: &str =
    "UPDATE OR REPLACE deadline SET aggregate_name = ?2 WHERE aggregate_name = ?1";

/// Re-addresses the rows sent to an aggregate named `?1` to the name `?2`.
pub(crate) const RENAME_TARGETS: &str =
    "UPDATE deadline SET target_name = ?2 WHERE target_name = ?1";

/// A deadline write outside an append, for the writer.
#[derive(Debug)]
pub(crate) enum DeadlineWrite {
    /// A saga's row, replacing the owner's row of its name.
    Schedule(Box<ScheduledCommand>),
    /// Deletes the owner's row `name`, only while it carries `request_id` when one is given.
    Delete {
        owner: AggregateId,
        name: String,
        request_id: Option<String>,
    },
}

/// Writes `row` on `connection` (the writer's).
pub(crate) fn schedule(connection: &Connection, row: &ScheduledCommand) -> rusqlite::Result<()> {
    let body = serde_json::to_string(&row.body)
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

/// Runs a write outside an append: whether a row was written or deleted.
pub(crate) fn write(connection: &Connection, write: &DeadlineWrite) -> rusqlite::Result<bool> {
    match write {
        DeadlineWrite::Schedule(row) => schedule(connection, row).map(|()| true),
        DeadlineWrite::Delete {
            owner,
            name,
            request_id,
        } => delete(connection, owner, name, request_id.as_deref()),
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

/// A row read by [`DUE`] or [`OF_OWNER`] (the table's columns, in order) as the portable row.
pub(crate) fn decode(row: &Row<'_>) -> rusqlite::Result<ScheduledCommand> {
    let tenant_id: String = row.get(0)?;
    let body: String = row.get(10)?;
    let body = serde_json::from_str(&body).map_err(|error| {
        rusqlite::Error::FromSqlConversionFailure(10, rusqlite::types::Type::Text, Box::new(error))
    })?;
    Ok(ScheduledCommand {
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPEC DM-2: `due` reads the index on the due time, in its order, so its cost follows
    /// what is due, not what is pending.
    #[test]
    fn due_is_served_by_the_due_index() {
        let mut connection = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut connection).unwrap();
        let mut statement = connection
            .prepare(&format!("EXPLAIN QUERY PLAN {DUE}"))
            .unwrap();
        let plan: Vec<String> = statement
            .query_map(params![0, 10], |row| row.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(plan.len(), 1, "{plan:?}");
        assert!(
            plan[0].starts_with("SEARCH deadline USING") && plan[0].contains("deadline_due"),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.contains("TEMP B-TREE")),
            "{plan:?}"
        );
    }
}
