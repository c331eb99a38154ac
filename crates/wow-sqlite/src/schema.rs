//! The schema, its version, and the migrations applied on open.
//!
//! One file holds every table of a service: event streams, snapshots, and (added by later
//! migrations) processed-message and compensation records, so a consumer's check, effect and
//! record can share one transaction.

use rusqlite::{Connection, OpenFlags};

use crate::{OpenError, SqliteOptions};

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = 3;

/// Migration `n` (1-based) takes the schema from version `n - 1` to `n`.
const MIGRATIONS: [&str; 3] = [
    r#"
    -- One row per DomainEventStream. `position` is the store-wide order in which streams
    -- were committed (one writer, so it has no gaps that later fill in).
    CREATE TABLE event_stream (
        position       INTEGER PRIMARY KEY,
        aggregate_name TEXT    NOT NULL,
        aggregate_id   TEXT    NOT NULL,
        version        INTEGER NOT NULL,
        context_name   TEXT    NOT NULL,
        tenant_id      TEXT    NOT NULL,
        stream_id      TEXT    NOT NULL,
        request_id     TEXT    NOT NULL,
        command_id     TEXT    NOT NULL,
        fingerprint    TEXT    NOT NULL,
        create_time    INTEGER NOT NULL,
        header         TEXT    NOT NULL,
        body           TEXT    NOT NULL,
        CONSTRAINT event_stream_version UNIQUE (aggregate_name, aggregate_id, version),
        CONSTRAINT event_stream_request UNIQUE (aggregate_name, aggregate_id, request_id)
    );
    CREATE TABLE snapshot (
        aggregate_name TEXT    NOT NULL,
        aggregate_id   TEXT    NOT NULL,
        context_name   TEXT    NOT NULL,
        tenant_id      TEXT    NOT NULL,
        version        INTEGER NOT NULL,
        state          TEXT    NOT NULL,
        snapshot_time  INTEGER NOT NULL,
        PRIMARY KEY (aggregate_name, aggregate_id)
    ) WITHOUT ROWID;
"#,
    r#"
    -- A consumer's record that it processed a message, written in the transaction of the
    -- consumer's own writes (SPEC DS-2).
    CREATE TABLE processed_message (
        consumer       TEXT    NOT NULL,
        message_id     TEXT    NOT NULL,
        processed_time INTEGER NOT NULL,
        PRIMARY KEY (consumer, message_id)
    ) WITHOUT ROWID;
"#,
    r#"
    -- How far each consumer has read each aggregate (a resume point for catch-up).
    CREATE TABLE consumer_position (
        consumer       TEXT    NOT NULL,
        aggregate_name TEXT    NOT NULL,
        aggregate_id   TEXT    NOT NULL,
        version        INTEGER NOT NULL,
        PRIMARY KEY (consumer, aggregate_name, aggregate_id)
    ) WITHOUT ROWID;
    -- External effects: started / done under an idempotency key (SPEC DS-2).
    CREATE TABLE external_effect (
        consumer       TEXT    NOT NULL,
        effect_key     TEXT    NOT NULL,
        status         TEXT    NOT NULL,
        attempts       INTEGER NOT NULL,
        first_started  INTEGER NOT NULL,
        done_time      INTEGER,
        PRIMARY KEY (consumer, effect_key)
    ) WITHOUT ROWID;
    -- Event compensation: failed consumer executions (SPEC DS-4).
    CREATE TABLE execution_failed (
        id             TEXT    PRIMARY KEY,
        consumer       TEXT    NOT NULL,
        stage          TEXT    NOT NULL,
        context_name   TEXT    NOT NULL,
        aggregate_name TEXT    NOT NULL,
        aggregate_id   TEXT    NOT NULL,
        tenant_id      TEXT    NOT NULL,
        version        INTEGER NOT NULL,
        stream_id      TEXT    NOT NULL,
        event_ids      TEXT    NOT NULL,
        error_code     TEXT    NOT NULL,
        error_message  TEXT    NOT NULL,
        attempts       INTEGER NOT NULL,
        status         TEXT    NOT NULL,
        next_retry_at  INTEGER,
        created_at     INTEGER NOT NULL,
        updated_at     INTEGER NOT NULL,
        CONSTRAINT execution_failed_stream UNIQUE (consumer, stream_id)
    ) WITHOUT ROWID;
    CREATE INDEX execution_failed_due ON execution_failed (status, next_retry_at);
"#,
];

/// Opens a connection with the store's settings.
pub(crate) fn connect(options: &SqliteOptions, read_only: bool) -> Result<Connection, OpenError> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI
    };
    let connection = Connection::open_with_flags(&options.path, flags)?;
    connection.busy_timeout(std::time::Duration::from_secs(5))?;
    if !read_only {
        connection.pragma_update(None, "journal_mode", "WAL")?;
    }
    connection.pragma_update(None, "synchronous", options.synchronous.pragma())?;
    Ok(connection)
}

/// Brings the file's schema up to [`SCHEMA_VERSION`], in one transaction; refuses a newer one.
pub(crate) fn migrate(connection: &mut Connection) -> Result<(), OpenError> {
    let transaction =
        connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    transaction
        .execute_batch("CREATE TABLE IF NOT EXISTS wow_schema (version INTEGER NOT NULL)")?;
    let found: i64 = transaction.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM wow_schema",
        [],
        |row| row.get(0),
    )?;
    if found > SCHEMA_VERSION {
        return Err(OpenError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (index, migration) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(found).unwrap_or(0))
    {
        transaction.execute_batch(migration)?;
        let version = i64::try_from(index + 1).unwrap_or(i64::MAX);
        transaction.execute("DELETE FROM wow_schema", [])?;
        transaction.execute("INSERT INTO wow_schema (version) VALUES (?1)", [version])?;
        tracing::info!(version, "applied schema migration");
    }
    transaction.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_the_schema_version_and_refuses_a_newer_one() {
        let mut connection = Connection::open_in_memory().unwrap();
        migrate(&mut connection).unwrap();
        migrate(&mut connection).unwrap();
        let version: i64 = connection
            .query_row("SELECT version FROM wow_schema", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        connection
            .execute("UPDATE wow_schema SET version = 99", [])
            .unwrap();
        match migrate(&mut connection) {
            Err(OpenError::SchemaTooNew {
                found: 99,
                supported,
            }) => assert_eq!(supported, SCHEMA_VERSION),
            other => panic!("expected SchemaTooNew, got {other:?}"),
        }
    }
}
