//! The schema, its version, and the migrations applied on open.
//!
//! One file holds every table of a service: event streams, snapshots, and (added by later
//! migrations) processed-message and compensation records, so a consumer's check, effect and
//! record can share one transaction.

use rusqlite::{Connection, OpenFlags};
use wow_core::eventsourcing::SchemaStatus;

use crate::{OpenError, SqliteOptions};

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = 20;

/// Migration `n` (1-based) takes the schema from version `n - 1` to `n`; migrations are
/// forward only.
///
/// The tenant leads every key (from version 5; SPEC TN-1).
///
/// Rejections (SPEC ID-6, from version 4) are rows of `event_stream` too, so that one unique
/// constraint, `event_stream_request`, holds the one decision per (tenant, aggregate name,
/// aggregate id, request id): SQLite itself refuses the second of an append and a rejection of one
/// request id, in whichever order and from whichever process they come. A rejection row has
/// a negative version (minus its own `position`, so it never takes a version of history and
/// never collides with another rejection), an empty stream id, no events, and the three
/// columns added by migration 4 (`error_code`, `error_msg`, `decided_on_version`), which are
/// NULL on every appended stream. Every read of history asks for versions from 1 up, so it
/// never sees a rejection.
///
/// Why not a table of rejections with triggers that refuse the other kind? It is as
/// race-free (SQLite has one writer at a time), but the trigger on `event_stream` probes the
/// rejection table on every append: measured at 20-23 % more time per inserted stream in
/// batched transactions, against a budget of 5 % (this design: 1.00-1.01 of the old). Rows in `event_stream` leave the append's statement, indexes and
/// cost exactly as they were.
const MIGRATIONS: [&str; 20] = [
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
    r#"
    -- A rejection's own columns (SPEC ID-6); NULL on every appended stream. Adding nullable
    -- columns rewrites nothing.
    ALTER TABLE event_stream ADD COLUMN error_code TEXT;
    ALTER TABLE event_stream ADD COLUMN error_msg TEXT;
    ALTER TABLE event_stream ADD COLUMN decided_on_version INTEGER;
"#,
    r#"
    -- The tenant leads every key (SPEC TN-1): two tenants may both hold `alice`, each with its
    -- own versions, request ids, rejections, snapshot and consumer positions. SQLite cannot
    -- change a table's constraints in place, so each table is copied into its new shape (rows,
    -- positions and rejection rows unchanged) and takes the old one's name.
    CREATE TABLE event_stream_v5 (
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
        error_code     TEXT,
        error_msg      TEXT,
        decided_on_version INTEGER,
        CONSTRAINT event_stream_version UNIQUE (tenant_id, aggregate_name, aggregate_id, version),
        CONSTRAINT event_stream_request UNIQUE (tenant_id, aggregate_name, aggregate_id, request_id)
    );
    INSERT INTO event_stream_v5 (position, aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body, error_code, error_msg, decided_on_version)
        SELECT position, aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body, error_code, error_msg, decided_on_version FROM event_stream;
    -- Before a position had a tenant, one (name, id) was one aggregate: its first stream's
    -- tenant owns the position.
    CREATE TABLE consumer_position_v5 (
        consumer       TEXT    NOT NULL,
        tenant_id      TEXT    NOT NULL,
        aggregate_name TEXT    NOT NULL,
        aggregate_id   TEXT    NOT NULL,
        version        INTEGER NOT NULL,
        PRIMARY KEY (consumer, tenant_id, aggregate_name, aggregate_id)
    ) WITHOUT ROWID;
    INSERT INTO consumer_position_v5 (consumer, tenant_id, aggregate_name, aggregate_id, version)
        SELECT p.consumer,
               COALESCE((SELECT e.tenant_id FROM event_stream e WHERE e.aggregate_name = p.aggregate_name AND e.aggregate_id = p.aggregate_id AND e.version = 1), '(0)'),
               p.aggregate_name, p.aggregate_id, p.version
        FROM consumer_position p;
    DROP TABLE consumer_position;
    ALTER TABLE consumer_position_v5 RENAME TO consumer_position;
    DROP TABLE event_stream;
    ALTER TABLE event_stream_v5 RENAME TO event_stream;
    CREATE TABLE snapshot_v5 (
        tenant_id      TEXT    NOT NULL,
        aggregate_name TEXT    NOT NULL,
        aggregate_id   TEXT    NOT NULL,
        context_name   TEXT    NOT NULL,
        version        INTEGER NOT NULL,
        state          TEXT    NOT NULL,
        snapshot_time  INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, aggregate_name, aggregate_id)
    ) WITHOUT ROWID;
    INSERT INTO snapshot_v5 (tenant_id, aggregate_name, aggregate_id, context_name, version, state, snapshot_time)
        SELECT tenant_id, aggregate_name, aggregate_id, context_name, version, state, snapshot_time FROM snapshot;
    DROP TABLE snapshot;
    ALTER TABLE snapshot_v5 RENAME TO snapshot;
"#,
    r#"
    -- Portable views (wow_core::view): one row per (view, tenant, aggregate id), the state as
    -- JSON text, written in the transaction of its processed-message record (SPEC DS-2). The
    -- tenant comes before the aggregate id (SPEC TN-1); lists page by aggregate id within
    -- (view, tenant), along this key.
    CREATE TABLE view_row (
        view           TEXT    NOT NULL,
        tenant_id      TEXT    NOT NULL,
        aggregate_id   TEXT    NOT NULL,
        version        INTEGER NOT NULL,
        state          TEXT    NOT NULL,
        updated_at     INTEGER NOT NULL,
        PRIMARY KEY (view, tenant_id, aggregate_id)
    ) WITHOUT ROWID;
"#,
    r#"
    -- Where each reader of the global feed got to (docs/distributed.md): a position in the order of
    -- `event_stream.position`; `txn` is always 0 here (one writer commits in order).
    CREATE TABLE feed_cursor (
        reader         TEXT    NOT NULL PRIMARY KEY,
        txn            INTEGER NOT NULL,
        sequence       INTEGER NOT NULL
    ) WITHOUT ROWID;
"#,
    r#"
    -- The version of the state's shape each snapshot was taken with: a snapshot of another
    -- shape is ignored and the state rebuilt from history. Those already here are version 1.
    ALTER TABLE snapshot ADD COLUMN state_version INTEGER NOT NULL DEFAULT 1;
"#,
    r#"
    -- Aggregates renamed in the store (Aggregate::ALIASES): each former name's rows were
    -- re-keyed to `to_name` once, so a later start need not look for them again.
    CREATE TABLE aggregate_rename (
        from_name      TEXT    NOT NULL PRIMARY KEY,
        to_name        TEXT    NOT NULL,
        renamed_at     INTEGER NOT NULL
    ) WITHOUT ROWID;
"#,
    r#"
    -- The runs of versions a consumer handled past a gap (`from-to,from-to`; empty for none),
    -- kept until the gap is filled, when the position takes them in. A row may hold version 0
    -- (nothing from version 1 on handled yet) and runs ahead.
    ALTER TABLE consumer_position ADD COLUMN ahead TEXT NOT NULL DEFAULT '';
"#,
    r#"
    -- An expected-version conflict is not a decision (SPEC ES-3): builds before this one
    -- recorded it as a rejection, which then answered every retry of its request id with the
    -- stale conflict. Those records go; the retries they blocked are decided afresh.
    DELETE FROM event_stream WHERE version < 0 AND error_code = 'CommandExpectVersionConflict';
"#,
    r#"
    -- Unique keys across aggregates (SPEC DM-1): who holds each value of each key space of a
    -- tenant. Written in the transaction of the append that claims or releases it; the
    -- primary key decides between two claimants.
    CREATE TABLE unique_key (
        tenant_id      TEXT NOT NULL,
        key_space      TEXT NOT NULL,
        key_value      TEXT NOT NULL,
        context_name   TEXT NOT NULL,
        aggregate_name TEXT NOT NULL,
        aggregate_id   TEXT NOT NULL,
        version        INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, key_space, key_value)
    ) WITHOUT ROWID;
"#,
    r#"
    -- Deadlines (SPEC DM-2): the commands aggregates and sagas scheduled, one row per owner
    -- aggregate and name, written in the transaction of the stream that schedules it. The
    -- target's tenant is the owner's. WITHOUT ROWID: every write and the owner's read go by
    -- the key, and `deadline_due` then carries the key itself, so `due` reads in (due time,
    -- key) order with no sort.
    CREATE TABLE deadline (
        tenant_id      TEXT    NOT NULL,
        aggregate_name TEXT    NOT NULL,
        aggregate_id   TEXT    NOT NULL,
        name           TEXT    NOT NULL,
        context_name   TEXT    NOT NULL,
        due_at         INTEGER NOT NULL,
        target_context TEXT    NOT NULL,
        target_name    TEXT    NOT NULL,
        target_id      TEXT    NOT NULL,
        command        TEXT    NOT NULL,
        body           TEXT    NOT NULL,
        request_id     TEXT    NOT NULL,
        PRIMARY KEY (tenant_id, aggregate_name, aggregate_id, name)
    ) WITHOUT ROWID;
    CREATE INDEX deadline_due ON deadline (due_at);
"#,
    r#"
    -- Deadlines at volume (SPEC DM-6): when each row may be fired next (`fire_at`: its due
    -- time, later after a failed firing, i64::MAX while held for an operator), how many
    -- firings failed, and its owner's partition hash (`owner_hash`, the signed view of the
    -- unsigned 64-bit hash, filled in by the migration's Rust step for rows already there),
    -- so that a scheduler reads only its own partitions' rows. `deadline_fire` serves each
    -- tenant's due read, so one tenant's backlog never stands before another's rows.
    ALTER TABLE deadline ADD COLUMN fire_at INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE deadline ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE deadline ADD COLUMN owner_hash INTEGER NOT NULL DEFAULT 0;
    UPDATE deadline SET fire_at = due_at;
    CREATE INDEX deadline_fire ON deadline (tenant_id, fire_at);
"#,
    r#"
    -- Key reservations (SPEC DM-1): a claim may hold its key until a time only
    -- (`reserved_until`, milliseconds since the Unix epoch, judged by the process's clock) and
    -- frees it after. Every key held already was claimed for good: NULL.
    ALTER TABLE unique_key ADD COLUMN reserved_until INTEGER;
"#,
    r#"
    -- Saga deadlines held to an owner (SPEC TN-2): the owner and space a saga's deadline acts
    -- for when it fires (JSON `{"ownerId", "spaceId"}`), those of the event the saga reacted
    -- to. NULL for an aggregate's own deadline, a saga acting across owners, and every row
    -- already there.
    ALTER TABLE deadline ADD COLUMN held_to TEXT;
"#,
    r#"
    -- Parked streams (SPEC DS-5): once a consumer's delivery of an aggregate's stream fails,
    -- its later streams of that aggregate wait behind it. One row per open lane: the failed
    -- version (its head) and the highest version parked behind it; history holds the streams
    -- themselves. A skipped compensation record names its operator (`skipped_by`).
    CREATE TABLE parked_lane (
        consumer       TEXT    NOT NULL,
        tenant_id      TEXT    NOT NULL,
        context_name   TEXT    NOT NULL,
        aggregate_name TEXT    NOT NULL,
        aggregate_id   TEXT    NOT NULL,
        head_version   INTEGER NOT NULL,
        parked_through INTEGER NOT NULL,
        since          INTEGER NOT NULL,
        PRIMARY KEY (consumer, tenant_id, context_name, aggregate_name, aggregate_id)
    ) WITHOUT ROWID;
    ALTER TABLE execution_failed ADD COLUMN skipped_by TEXT;
"#,
    r#"
    -- An operator finds the compensation records of one aggregate (`aggregateId`, with or
    -- without its type) and counts them: the lookup and the count read this index.
    CREATE INDEX execution_failed_aggregate ON execution_failed (aggregate_id, aggregate_name);
"#,
    r#"
    -- An operator's edits of a compensation record: its own retry spec (JSON
    -- {"max_attempts", "initial_backoff_ms", "max_backoff_ms"}; NULL: the service's) and who
    -- last edited it. NULL on every record there.
    ALTER TABLE execution_failed ADD COLUMN retry_spec TEXT;
    ALTER TABLE execution_failed ADD COLUMN updated_by TEXT;
"#,
    r#"
    -- Whether a compensation record's retry can succeed, as an operator judged it (Wow's
    -- RecoverableType): the scheduler leaves an UNRECOVERABLE one alone. Every record there
    -- is UNKNOWN (not judged).
    ALTER TABLE execution_failed ADD COLUMN recoverable TEXT NOT NULL DEFAULT 'UNKNOWN';
"#,
];

/// Whether the file has the table of its schema version, `wow_schema`.
const HAS_VERSION_TABLE: &str =
    "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'wow_schema')";

/// Creates the table of the schema version, `wow_schema`, when the file has none.
const CREATE_VERSION_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS wow_schema (version INTEGER NOT NULL)";

/// The file's schema version: 0 when none is recorded.
const FOUND_VERSION: &str = "SELECT COALESCE(MAX(version), 0) FROM wow_schema";

/// Forgets the recorded schema version, before [`RECORD_VERSION`] records the next.
const CLEAR_VERSION: &str = "DELETE FROM wow_schema";

/// Records schema version `?1`.
const RECORD_VERSION: &str = "INSERT INTO wow_schema (version) VALUES (?1)";

/// Where the file at `options.path` stands against this build's migrations, read without
/// changing anything (a missing file is version 0, and is not made).
pub(crate) fn status(options: &SqliteOptions) -> Result<SchemaStatus, OpenError> {
    if !options.path.exists() {
        return Ok(SchemaStatus::of(0, &MIGRATIONS));
    }
    let connection = patiently(|| connect(options, true))?;
    let has_table: bool = connection.query_row(HAS_VERSION_TABLE, [], |row| row.get(0))?;
    let found: i64 = if has_table {
        connection.query_row(FOUND_VERSION, [], |row| row.get(0))?
    } else {
        0
    };
    Ok(SchemaStatus::of(
        u32::try_from(found).unwrap_or(0),
        &MIGRATIONS,
    ))
}

/// How long opening a file waits out another process's lock in all (SQLite's busy handler
/// is not consulted for every step of an open: turning a new file to WAL, or reading a
/// header another process is writing, can answer "locked" at once).
const OPEN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs `open` again while it fails because another connection holds the file, for at most
/// [`OPEN_PATIENCE`], backing off from 5 ms to 200 ms; any other failure returns at once.
pub(crate) fn patiently<T>(mut open: impl FnMut() -> Result<T, OpenError>) -> Result<T, OpenError> {
    let deadline = std::time::Instant::now() + OPEN_PATIENCE;
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match open() {
            Err(OpenError::Sqlite(error))
                if crate::error::is_locked(&error) && std::time::Instant::now() < deadline =>
            {
                tracing::debug!(%error, ?pause, "the SQLite file is held by another connection");
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(200));
            }
            outcome => return outcome,
        }
    }
}

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
    // The writer alone runs some thirty distinct statements (appends, records, views,
    // positions, deadlines, snapshots): room for all, so none is parsed again per job.
    connection.set_prepared_statement_cache_capacity(64);
    connection.busy_timeout(std::time::Duration::from_secs(5))?;
    if !read_only {
        connection.pragma_update(None, "journal_mode", "WAL")?;
    }
    connection.pragma_update(None, "synchronous", options.synchronous.pragma())?;
    if let Ok(extra) = std::env::var("WOW_EXPERIMENT_PRAGMAS") {
        for pair in extra.split(';').filter(|p| !p.is_empty()) {
            if let Some((k, v)) = pair.split_once('=') {
                connection.pragma_update(None, k, v)?;
            }
        }
    }
    Ok(connection)
}

/// Brings the file's schema up to [`SCHEMA_VERSION`], in one transaction; refuses a newer one.
pub(crate) fn migrate(connection: &mut Connection) -> Result<(), OpenError> {
    migrate_to(connection, SCHEMA_VERSION)
}

/// [`migrate`], stopping at version `target` (at most [`SCHEMA_VERSION`]); the tests build
/// the files of older builds with it.
fn migrate_to(connection: &mut Connection, target: i64) -> Result<(), OpenError> {
    let transaction =
        connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    transaction.execute_batch(CREATE_VERSION_TABLE)?;
    let found: i64 = transaction.query_row(FOUND_VERSION, [], |row| row.get(0))?;
    if found > SCHEMA_VERSION {
        return Err(OpenError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (index, migration) in MIGRATIONS
        .iter()
        .enumerate()
        .take(usize::try_from(target).unwrap_or(0))
        .skip(usize::try_from(found).unwrap_or(0))
    {
        transaction.execute_batch(migration)?;
        let version = i64::try_from(index + 1).unwrap_or(i64::MAX);
        if version == 14 {
            // Each existing row's owner hash, which SQL cannot compute.
            crate::store::deadline::fill_owner_hashes(&transaction, None)?;
        }
        transaction.execute(CLEAR_VERSION, [])?;
        transaction.execute(RECORD_VERSION, [version])?;
        tracing::info!(version, "applied schema migration");
    }
    transaction.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use wow_core::eventsourcing::{EventStoreError, History, KeyIndex, RequestLog};
    use wow_core::{AggregateId, DomainEvent, DomainEventStream};

    use super::*;
    use crate::SqliteStore;

    fn stream(aggregate: &AggregateId, version: u64, request_id: &str) -> DomainEventStream {
        DomainEventStream {
            id: wow_core::id::new_id(),
            request_id: request_id.to_owned(),
            command_id: wow_core::id::new_id(),
            aggregate_id: aggregate.clone(),
            version,
            create_time: 1_700_000_000_000 + version as i64,
            fingerprint: format!("fp-{request_id}"),
            header: Default::default(),
            body: vec![DomainEvent {
                id: wow_core::id::new_id(),
                name: "Happened".to_owned(),
                revision: "0.0.1".to_owned(),
                body: serde_json::json!({"version": version}),
            }],
        }
    }

    /// A file written by a build of schema version 3, with streams, opens under this build:
    /// it migrates to the current version and the request ids of its old streams still hold their keys
    /// (against appends and rejections alike).
    #[tokio::test]
    async fn a_version_3_file_with_streams_migrates_and_keeps_its_request_ids() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("v3.db");
        let order = AggregateId::new("tck", "order", wow_core::id::new_id(), "t");
        let old: Vec<_> = (1..=2)
            .map(|v| stream(&order, v, &format!("r-{v}")))
            .collect();
        {
            let mut connection = Connection::open(&path).unwrap();
            migrate_to(&mut connection, 3).unwrap();
            for s in &old {
                connection
                    .execute(
                        "INSERT INTO event_stream (aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                        rusqlite::params![
                            s.aggregate_id.aggregate_name,
                            s.aggregate_id.id,
                            s.version as i64,
                            s.aggregate_id.context_name,
                            s.aggregate_id.tenant_id,
                            s.id,
                            s.request_id,
                            s.command_id,
                            s.fingerprint,
                            s.create_time,
                            serde_json::to_string(&s.header).unwrap(),
                            serde_json::to_string(&s.body).unwrap(),
                        ],
                    )
                    .unwrap();
            }
        }

        {
            let connection = Connection::open(&path).unwrap();
            connection
                .execute(
                    "INSERT INTO consumer_position (consumer, aggregate_name, aggregate_id, version) VALUES ('view', ?1, ?2, 2)",
                    rusqlite::params![order.aggregate_name, order.id],
                )
                .unwrap();
            connection
                .execute(
                    "INSERT INTO snapshot (aggregate_name, aggregate_id, context_name, tenant_id, version, state, snapshot_time) VALUES (?1, ?2, ?3, ?4, 2, '{}', 0)",
                    rusqlite::params![order.aggregate_name, order.id, order.context_name, order.tenant_id],
                )
                .unwrap();
        }
        let store = SqliteStore::open(SqliteOptions::new(&path))
            .await
            .expect("a version 3 file opens");
        let version: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT version FROM wow_schema", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        wow_tck::migration::a_migrated_store_keeps_what_it_held(&store, &order, &old).await;

        // A row that holds a key but makes no decision is an error, never "no decision".
        Connection::open(&path)
            .unwrap()
            .execute(
                "INSERT INTO event_stream (aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body) VALUES (?1, ?2, -999, 'tck', 't', '', 'r-bad', 'c', 'f', 0, '{}', '[]')",
                rusqlite::params![order.aggregate_name, order.id],
            )
            .unwrap();
        assert!(matches!(
            store.find_decision(&order, "r-bad").await,
            Err(EventStoreError::Internal(_))
        ));
    }

    /// SPEC ES-3: a conflict recorded as a rejection by an earlier build stops blocking its
    /// request id once the file is migrated; every other recorded rejection stays.
    #[tokio::test]
    async fn migrating_drops_conflicts_an_earlier_build_recorded_as_decisions() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("v9.db");
        let order = AggregateId::new("tck", "order", wow_core::id::new_id(), "t");
        {
            let store = SqliteStore::open(SqliteOptions::new(&path)).await.unwrap();
            store.append(&stream(&order, 1, "r-open")).await.unwrap();
            wow_tck::migration::record_conflicts_as_an_earlier_build_did(&store, &order).await;
        }
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "UPDATE wow_schema SET version = 10; DROP TABLE unique_key; DROP TABLE deadline;
                 DROP TABLE parked_lane; ALTER TABLE execution_failed DROP COLUMN skipped_by;
                 DROP INDEX execution_failed_aggregate;
                 ALTER TABLE execution_failed DROP COLUMN retry_spec;
                 ALTER TABLE execution_failed DROP COLUMN updated_by;
                 ALTER TABLE execution_failed DROP COLUMN recoverable",
            )
            .unwrap();
        let store = SqliteStore::open(SqliteOptions::new(&path)).await.unwrap();
        wow_tck::migration::a_migrated_store_holds_no_conflict_as_a_decision(&store, &order).await;
    }

    /// A file of schema 12 (unique keys, no deadlines) opens under this build: its keys are
    /// still held, and deadlines are written with streams from then on (SPEC DM-2).
    #[tokio::test]
    async fn a_version_12_file_migrates_and_keeps_its_keys_and_takes_deadlines() {
        use wow_core::deadline::{DeadlineChange, DeadlineStore, ScheduledCommand};
        use wow_core::eventsourcing::AppendChanges;
        use wow_core::unique_key::{KeyChange, UniqueKey};

        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("v12.db");
        let order = AggregateId::new("tck", "order", wow_core::id::new_id(), "t");
        let sku = UniqueKey::new("sku", "sku-1");
        {
            let store = SqliteStore::open(SqliteOptions::new(&path)).await.unwrap();
            store
                .append_with(
                    &stream(&order, 1, "r-1"),
                    &AppendChanges::keys(vec![KeyChange::Claim(sku.clone())]),
                )
                .await
                .unwrap();
        }
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "UPDATE wow_schema SET version = 12; DROP TABLE deadline;
                 ALTER TABLE unique_key DROP COLUMN reserved_until;
                 DROP TABLE parked_lane; ALTER TABLE execution_failed DROP COLUMN skipped_by;
                 DROP INDEX execution_failed_aggregate;
                 ALTER TABLE execution_failed DROP COLUMN retry_spec;
                 ALTER TABLE execution_failed DROP COLUMN updated_by;
                 ALTER TABLE execution_failed DROP COLUMN recoverable",
            )
            .unwrap();

        let store = SqliteStore::open(SqliteOptions::new(&path)).await.unwrap();
        let version: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT version FROM wow_schema", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let holder = store.find_key("t", &sku).await.unwrap().unwrap();
        assert_eq!(holder.aggregate_id, order);
        let expiry = ScheduledCommand {
            owner: order.clone(),
            name: "expire".to_owned(),
            due_at: 42,
            target: order.clone(),
            command: "expire".to_owned(),
            body: serde_json::json!({}),
            request_id: "deadline/expire/2".to_owned(),
            held_to: None,
        };
        store
            .append_with(
                &stream(&order, 2, "r-2"),
                &AppendChanges::deadlines(vec![DeadlineChange::Schedule(expiry.clone())]),
            )
            .await
            .unwrap();
        assert_eq!(store.scheduled_for(&order).await.unwrap(), vec![expiry]);
    }

    /// A file of schema 14 (keys without reservations) opens under this build: each key it
    /// held is still held, for good, and a claim with a time reserves a key from then on
    /// (SPEC DM-1).
    #[tokio::test]
    async fn a_version_14_file_keeps_its_keys_for_good_and_takes_reservations() {
        use wow_core::eventsourcing::AppendChanges;
        use wow_core::unique_key::{KeyChange, UniqueKey};

        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("v14.db");
        let order = AggregateId::new("tck", "order", wow_core::id::new_id(), "t");
        let sku = UniqueKey::new("sku", "sku-1");
        {
            let store = SqliteStore::open(SqliteOptions::new(&path)).await.unwrap();
            store
                .append_with(
                    &stream(&order, 1, "r-1"),
                    &AppendChanges::keys(vec![KeyChange::Claim(sku.clone())]),
                )
                .await
                .unwrap();
        }
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "UPDATE wow_schema SET version = 14;
                 ALTER TABLE unique_key DROP COLUMN reserved_until;
                 ALTER TABLE deadline DROP COLUMN held_to;
                 DROP TABLE parked_lane; ALTER TABLE execution_failed DROP COLUMN skipped_by;
                 DROP INDEX execution_failed_aggregate;
                 ALTER TABLE execution_failed DROP COLUMN retry_spec;
                 ALTER TABLE execution_failed DROP COLUMN updated_by;
                 ALTER TABLE execution_failed DROP COLUMN recoverable",
            )
            .unwrap();

        let store = SqliteStore::open(SqliteOptions::new(&path)).await.unwrap();
        let holder = store.find_key("t", &sku).await.unwrap().unwrap();
        assert_eq!((holder.aggregate_id, holder.key), (order.clone(), sku));
        let reserved = UniqueKey::new("sku", "sku-2").reserved_until(i64::MAX);
        store
            .append_with(
                &stream(&order, 2, "r-2"),
                &AppendChanges::keys(vec![KeyChange::Claim(reserved.clone())]),
            )
            .await
            .unwrap();
        let holder = store.find_key("t", &reserved).await.unwrap().unwrap();
        assert_eq!(holder.key, reserved);
    }

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
