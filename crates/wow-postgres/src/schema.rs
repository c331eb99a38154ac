//! The schema, its version, and the migrations applied on open.

use crate::OpenError;
use wow_core::eventsourcing::SchemaStatus;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i32 = 21;

/// Migration `n` (1-based) takes the schema from version `n - 1` to `n`; migrations are
/// forward only. The request-id index is created before the primary key on purpose:
/// PostgreSQL checks unique indexes in creation order, so a stream that repeats a request id
/// at a taken version reports the request id (SPEC ES-4). The store also confirms it after a
/// version conflict.
///
/// The tenant leads every key (from version 5; SPEC TN-1).
///
/// Rejections (SPEC ID-6, from version 4) are rows of `event_stream` too, so that one unique
/// index, `event_stream_request_uq`, holds the one decision per (tenant, aggregate name,
/// aggregate id, request id): PostgreSQL itself decides which of an append and a rejection of one
/// request id came first (the second insert of a key waits for the first one's transaction,
/// then fails), whichever node, build or connection wrote them. A rejection row has a
/// negative version (minus its own `position`, so it never takes a version of history and
/// never collides with another rejection), an empty stream id, no events, and the three
/// columns added by migration 4 (`error_code`, `error_msg`, `decided_on_version`), which are
/// NULL on every appended stream. Every read of history asks for versions from 1 up, so it
/// never sees a rejection.
///
/// Why not a table of decisions beside `event_stream`, whose key every append claims through
/// a `BEFORE INSERT` trigger (or a CTE)? It is as race-free, but measured against
/// PostgreSQL 15 it made every append 22-32 % slower (1 to 40 concurrent writers, rounds
/// interleaved with the old schema; about 10 µs more server time per `INSERT`, and a CTE
/// cost more still), against a budget of 5 %. Rows in `event_stream` leave the append's
/// statement, indexes and cost as they were (measured the same way: 0.99-1.01 of the old).
///
/// The global feed (from version 7; docs/distributed.md) orders appended streams by
/// `(txid, position)`: `txid` is the appending transaction's id, `position` the sequence value
/// its row took. Why not `position` alone: a sequence value is taken when a row is inserted,
/// not when it commits, so position 11 can commit before position 10; a reader that moved
/// past 11 would skip 10 forever. See `store/feed.rs` for the read that keeps the order
/// gap-free. Rows written before migration 7 take the migration's own transaction id as
/// their `txid` (one value stored in the catalog, no table rewrite: `pg_current_xact_id()` is
/// stable); their transactions had all ended, so they come first, in position order. The
/// index holds appended streams only (`version > 0`), as the feed reads: rejections are not
/// in it.
/// Migration 7 blocks appends while the index builds (measured here: 2 ms for the column and
/// 0.35 s for the index over a million rows of 300-byte bodies, PostgreSQL 15).
///
/// Unique keys (SPEC DM-1, from version 13) are rows of `unique_key`, one per key a tenant's
/// aggregate holds, written in the transaction of the stream that claims or releases it. Its
/// primary key (tenant, key space, value) is what decides between two claimants of one key
/// (see `store/unique_key.rs`); the tenant leads it, as every key (SPEC TN-1). The table is
/// new and empty, so the migration takes no lock on the tables appends write.
///
/// Deadlines (SPEC DM-2, from version 14) are rows of `deadline`, one per owner aggregate and
/// name (its primary key), written in the transaction of the stream that schedules them (see
/// `store/deadline.rs`). The index `deadline_due` leads with the due time, so the scheduler's
/// read of what is due is a range scan of it; the key columns after it give rows due at one
/// time in key order, as the in-memory table does, without a sort. A new, empty table too.
///
/// Key reservations (SPEC DM-1, from version 16) are the column `reserved_until` of
/// `unique_key`: NULL for every key held before (claimed for good). Adding a nullable column
/// with no default rewrites nothing.
///
/// Saga deadlines held to an owner (SPEC TN-2, from version 17) are the column `held_to` of
/// `deadline`: the owner and space a saga's deadline acts for, NULL for every other row.
/// Nullable, no default: nothing is rewritten.
///
/// Parked streams (SPEC DS-5, from version 18) are rows of `parked_lane`, one per consumer
/// and aggregate held back behind a failed stream (see `downstream/parked_lane.rs`); a new,
/// empty table. The operator who skipped a compensation record is the nullable column
/// `skipped_by` of `execution_failed`: nothing is rewritten.
///
/// An operator's lookup of one aggregate's compensation records (from version 19) reads the
/// index `execution_failed_aggregate` (aggregate id, then type), as their count does. The
/// table is small (failures only); the build blocks its writes for that long.
///
/// An operator's edits of a compensation record (from version 20) are the nullable columns
/// `retry_spec` (its own retry spec) and `updated_by` of `execution_failed`: nothing is
/// rewritten.
///
/// Whether a compensation record can recover (from version 21) is the column `recoverable`
/// of `execution_failed`, `UNKNOWN` on every row there: a constant default, stored in the
/// catalog, rewrites nothing.
const MIGRATIONS: [&str; 21] = [
    r#"
    CREATE TABLE event_stream (
        position       BIGSERIAL NOT NULL,
        aggregate_name TEXT      NOT NULL,
        aggregate_id   TEXT      NOT NULL,
        version        BIGINT    NOT NULL,
        context_name   TEXT      NOT NULL,
        tenant_id      TEXT      NOT NULL,
        stream_id      TEXT      NOT NULL,
        request_id     TEXT      NOT NULL,
        command_id     TEXT      NOT NULL,
        fingerprint    TEXT      NOT NULL,
        create_time    BIGINT    NOT NULL,
        header         JSONB     NOT NULL,
        body           JSONB     NOT NULL
    );
    ALTER TABLE event_stream ADD CONSTRAINT event_stream_request_uq UNIQUE (aggregate_name, aggregate_id, request_id);
    ALTER TABLE event_stream ADD CONSTRAINT event_stream_pk PRIMARY KEY (aggregate_name, aggregate_id, version);
    CREATE TABLE snapshot (
        aggregate_name TEXT   NOT NULL,
        aggregate_id   TEXT   NOT NULL,
        context_name   TEXT   NOT NULL,
        tenant_id      TEXT   NOT NULL,
        version        BIGINT NOT NULL,
        state          JSONB  NOT NULL,
        snapshot_time  BIGINT NOT NULL,
        CONSTRAINT snapshot_pk PRIMARY KEY (aggregate_name, aggregate_id)
    );
"#,
    r#"
    CREATE TABLE processed_message (
        consumer       TEXT   NOT NULL,
        message_id     TEXT   NOT NULL,
        processed_time BIGINT NOT NULL,
        CONSTRAINT processed_message_pk PRIMARY KEY (consumer, message_id)
    );
"#,
    r#"
    CREATE TABLE consumer_position (
        consumer       TEXT   NOT NULL,
        aggregate_name TEXT   NOT NULL,
        aggregate_id   TEXT   NOT NULL,
        version        BIGINT NOT NULL,
        CONSTRAINT consumer_position_pk PRIMARY KEY (consumer, aggregate_name, aggregate_id)
    );
    CREATE TABLE external_effect (
        consumer       TEXT   NOT NULL,
        effect_key     TEXT   NOT NULL,
        status         TEXT   NOT NULL,
        attempts       INT    NOT NULL,
        first_started  BIGINT NOT NULL,
        done_time      BIGINT,
        CONSTRAINT external_effect_pk PRIMARY KEY (consumer, effect_key)
    );
    CREATE TABLE execution_failed (
        id             TEXT   NOT NULL,
        consumer       TEXT   NOT NULL,
        stage          TEXT   NOT NULL,
        context_name   TEXT   NOT NULL,
        aggregate_name TEXT   NOT NULL,
        aggregate_id   TEXT   NOT NULL,
        tenant_id      TEXT   NOT NULL,
        version        BIGINT NOT NULL,
        stream_id      TEXT   NOT NULL,
        event_ids      JSONB  NOT NULL,
        error_code     TEXT   NOT NULL,
        error_message  TEXT   NOT NULL,
        attempts       INT    NOT NULL,
        status         TEXT   NOT NULL,
        next_retry_at  BIGINT,
        created_at     BIGINT NOT NULL,
        updated_at     BIGINT NOT NULL,
        CONSTRAINT execution_failed_pk PRIMARY KEY (id),
        CONSTRAINT execution_failed_stream_uq UNIQUE (consumer, stream_id)
    );
    CREATE INDEX execution_failed_due ON execution_failed (status, next_retry_at);
"#,
    r#"
    -- A rejection's own columns (SPEC ID-6); NULL on every appended stream. Adding nullable
    -- columns rewrites nothing.
    ALTER TABLE event_stream
        ADD COLUMN error_code         TEXT,
        ADD COLUMN error_msg          TEXT,
        ADD COLUMN decided_on_version BIGINT;
"#,
    r#"
    -- The tenant leads every key (SPEC TN-1): two tenants may both hold `alice`, each with its
    -- own versions, request ids, rejections, snapshot and consumer positions. Before a
    -- position had a tenant, one (name, id) was one aggregate: its first stream's tenant owns
    -- the position. The request-id index is made before the primary key again (ES-4).
    ALTER TABLE consumer_position ADD COLUMN tenant_id TEXT;
    UPDATE consumer_position p SET tenant_id = COALESCE(
        (SELECT e.tenant_id FROM event_stream e
          WHERE e.aggregate_name = p.aggregate_name AND e.aggregate_id = p.aggregate_id AND e.version = 1),
        '(0)');
    ALTER TABLE consumer_position ALTER COLUMN tenant_id SET NOT NULL;
    ALTER TABLE consumer_position DROP CONSTRAINT consumer_position_pk;
    ALTER TABLE consumer_position ADD CONSTRAINT consumer_position_pk PRIMARY KEY (consumer, tenant_id, aggregate_name, aggregate_id);
    ALTER TABLE event_stream DROP CONSTRAINT event_stream_pk;
    ALTER TABLE event_stream DROP CONSTRAINT event_stream_request_uq;
    ALTER TABLE event_stream ADD CONSTRAINT event_stream_request_uq UNIQUE (tenant_id, aggregate_name, aggregate_id, request_id);
    ALTER TABLE event_stream ADD CONSTRAINT event_stream_pk PRIMARY KEY (tenant_id, aggregate_name, aggregate_id, version);
    ALTER TABLE snapshot DROP CONSTRAINT snapshot_pk;
    ALTER TABLE snapshot ADD CONSTRAINT snapshot_pk PRIMARY KEY (tenant_id, aggregate_name, aggregate_id);
"#,
    r#"
    -- Portable views (wow_core::view): one row per (view, tenant, aggregate id), the state as
    -- JSONB, written in the transaction of its processed-message record (SPEC DS-2). The
    -- tenant comes before the aggregate id (SPEC TN-1). The key columns compare by bytes
    -- (COLLATE "C"), whatever the database's collation, so lists order and page by aggregate
    -- id exactly as the other stores do, along this key.
    CREATE TABLE view_row (
        view           TEXT COLLATE "C" NOT NULL,
        tenant_id      TEXT COLLATE "C" NOT NULL,
        aggregate_id   TEXT COLLATE "C" NOT NULL,
        version        BIGINT NOT NULL,
        state          JSONB  NOT NULL,
        updated_at     BIGINT NOT NULL,
        CONSTRAINT view_row_pk PRIMARY KEY (view, tenant_id, aggregate_id)
    );
"#,
    r#"
    -- The global feed (docs/distributed.md): the appending transaction's id beside each row's position.
    -- Rows already here take this migration's id, once, from the catalog (no rewrite).
    ALTER TABLE event_stream ADD COLUMN txid XID8 NOT NULL DEFAULT pg_current_xact_id();
    CREATE INDEX event_stream_feed ON event_stream (txid, position) WHERE version > 0;
"#,
    r#"
    -- Where each reader of the global feed got to: (transaction id, position), as the feed
    -- orders them.
    CREATE TABLE feed_cursor (
        reader         TEXT   NOT NULL,
        txn            BIGINT NOT NULL,
        sequence       BIGINT NOT NULL,
        CONSTRAINT feed_cursor_pk PRIMARY KEY (reader)
    );
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
        from_name      TEXT   NOT NULL,
        to_name        TEXT   NOT NULL,
        renamed_at     BIGINT NOT NULL,
        CONSTRAINT aggregate_rename_pk PRIMARY KEY (from_name)
    );
"#,
    r#"
    -- The runs of versions a consumer handled past a gap, kept until the gap is filled, when
    -- the position takes them in. A row may hold version 0 (nothing from version 1 on handled
    -- yet) and runs ahead. A constant default rewrites nothing.
    ALTER TABLE consumer_position ADD COLUMN ahead INT8MULTIRANGE NOT NULL DEFAULT '{}';
"#,
    r#"
    -- An expected-version conflict is not a decision (SPEC ES-3): builds before this one
    -- recorded it as a rejection, which then answered every retry of its request id with the
    -- stale conflict. Those records go; the retries they blocked are decided afresh.
    DELETE FROM event_stream WHERE version < 0 AND error_code = 'CommandExpectVersionConflict';
"#,
    r#"
    -- Unique keys across aggregates (SPEC DM-1): who holds each key of a tenant, and the
    -- version of the stream that claimed it. The primary key decides between two claimants;
    -- the tenant leads it (SPEC TN-1). The key columns compare by bytes (COLLATE "C"),
    -- whatever the database's collation.
    CREATE TABLE unique_key (
        tenant_id      TEXT COLLATE "C" NOT NULL,
        key_space      TEXT COLLATE "C" NOT NULL,
        key_value      TEXT COLLATE "C" NOT NULL,
        context_name   TEXT   NOT NULL,
        aggregate_name TEXT   NOT NULL,
        aggregate_id   TEXT   NOT NULL,
        version        BIGINT NOT NULL,
        CONSTRAINT unique_key_pk PRIMARY KEY (tenant_id, key_space, key_value)
    );
"#,
    r#"
    -- Deadlines (SPEC DM-2): a command scheduled for a time, one row per owner aggregate and
    -- name, written in the transaction of the stream that schedules or cancels it (or on its
    -- own, for a saga). The target is in the owner's tenant (SPEC TN-1), so only its context,
    -- name and id are kept. The key columns compare by bytes (COLLATE "C").
    --
    -- deadline_due leads with the due time, so the scheduler's read of what is due is one
    -- range scan that costs what is due, not what is pending; the key follows it so that
    -- rows due at the same time come in key order with no sort step.
    CREATE TABLE deadline (
        tenant_id      TEXT COLLATE "C" NOT NULL,
        aggregate_name TEXT COLLATE "C" NOT NULL,
        aggregate_id   TEXT COLLATE "C" NOT NULL,
        name           TEXT COLLATE "C" NOT NULL,
        context_name   TEXT   NOT NULL,
        due_at         BIGINT NOT NULL,
        target_context TEXT   NOT NULL,
        target_name    TEXT   NOT NULL,
        target_id      TEXT   NOT NULL,
        command        TEXT   NOT NULL,
        body           JSONB  NOT NULL,
        request_id     TEXT   NOT NULL,
        CONSTRAINT deadline_pk PRIMARY KEY (tenant_id, aggregate_name, aggregate_id, name)
    );
    CREATE INDEX deadline_due ON deadline (due_at, tenant_id, aggregate_name, aggregate_id, name);
"#,
    r#"
    -- Deadlines at volume (SPEC DM-6): when each row may be fired next (fire_at: its due
    -- time, later after a failed firing, i64::MAX while held for an operator), how many
    -- firings failed, and its owner's partition hash (owner_hash, the signed view of the
    -- unsigned 64-bit hash; the migration's Rust step fills it in for rows already there), so
    -- a scheduler reads only its own partitions' rows. deadline_fire serves each tenant's due
    -- read, so one tenant's backlog never stands before another's rows.
    ALTER TABLE deadline ADD COLUMN fire_at BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE deadline ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE deadline ADD COLUMN owner_hash BIGINT NOT NULL DEFAULT 0;
    UPDATE deadline SET fire_at = due_at;
    CREATE INDEX deadline_fire ON deadline (tenant_id, fire_at, aggregate_name, aggregate_id, name);
"#,
    r#"
    -- Key reservations (SPEC DM-1): a claim may hold its key until a time only
    -- (reserved_until, milliseconds since the Unix epoch, judged by the database's
    -- clock_timestamp()) and frees it after. Every key held already was claimed for good: NULL.
    ALTER TABLE unique_key ADD COLUMN reserved_until BIGINT;
"#,
    r#"
    -- Saga deadlines held to an owner (SPEC TN-2): the owner and space a saga's deadline acts
    -- for when it fires ({"ownerId", "spaceId"}), those of the event the saga reacted to.
    -- NULL for an aggregate's own deadline, a saga acting across owners, and every row there.
    ALTER TABLE deadline ADD COLUMN held_to JSONB;
"#,
    r#"
    -- Parked streams (SPEC DS-5): once a consumer's delivery of an aggregate's stream fails,
    -- its later streams of that aggregate wait behind it. One row per open lane: the failed
    -- version (its head) and the highest version parked behind it; history holds the streams
    -- themselves. A skipped compensation record names its operator (skipped_by). The key
    -- columns compare by bytes (COLLATE "C").
    CREATE TABLE parked_lane (
        consumer       TEXT COLLATE "C" NOT NULL,
        tenant_id      TEXT COLLATE "C" NOT NULL,
        context_name   TEXT COLLATE "C" NOT NULL,
        aggregate_name TEXT COLLATE "C" NOT NULL,
        aggregate_id   TEXT COLLATE "C" NOT NULL,
        head_version   BIGINT NOT NULL,
        parked_through BIGINT NOT NULL,
        since          BIGINT NOT NULL,
        CONSTRAINT parked_lane_pk PRIMARY KEY (consumer, tenant_id, context_name, aggregate_name, aggregate_id)
    );
    ALTER TABLE execution_failed ADD COLUMN skipped_by TEXT;
"#,
    r#"
    -- An operator finds the compensation records of one aggregate (aggregateId, with or
    -- without its type) and counts them: the lookup and the count read this index.
    CREATE INDEX execution_failed_aggregate ON execution_failed (aggregate_id, aggregate_name);
"#,
    r#"
    -- An operator's edits of a compensation record: its own retry spec (JSON
    -- {"max_attempts", "initial_backoff_ms", "max_backoff_ms"}; NULL: the service's) and who
    -- last edited it. NULL on every record there.
    ALTER TABLE execution_failed ADD COLUMN retry_spec JSONB;
    ALTER TABLE execution_failed ADD COLUMN updated_by TEXT;
"#,
    r#"
    -- Whether a compensation record's retry can succeed, as an operator judged it (Wow's
    -- RecoverableType): the scheduler leaves an UNRECOVERABLE one alone. Every record there
    -- is UNKNOWN (not judged).
    ALTER TABLE execution_failed ADD COLUMN recoverable TEXT NOT NULL DEFAULT 'UNKNOWN';
"#,
];

/// Serialises migrations of one database (renames use the next key, 7770008).
const MIGRATION_LOCK: i64 = 7_770_007;

/// Takes the migration lock for the transaction, then makes `schema` and its version table
/// when missing. The lock comes first: two processes making the same schema at once would
/// otherwise race on `CREATE SCHEMA IF NOT EXISTS`, which is not safe against a concurrent
/// create (one of them fails on pg_namespace's unique key). A batch of literals, not
/// parameters: a schema's name cannot be bound.
fn prepare_schema_sql(schema: &str) -> String {
    format!(
        "SELECT pg_advisory_xact_lock({MIGRATION_LOCK}); CREATE SCHEMA IF NOT EXISTS {schema}; CREATE TABLE IF NOT EXISTS wow_schema (version INT NOT NULL)"
    )
}

/// The version the schema on the search path is at: 0 before the first migration.
const FOUND_VERSION: &str = "SELECT COALESCE(MAX(version), 0) FROM wow_schema";

/// Empties the version table, before [`WRITE_VERSION`] writes the new one.
const CLEAR_VERSION: &str = "DELETE FROM wow_schema";

/// Writes version `$1` as the schema's version.
const WRITE_VERSION: &str = "INSERT INTO wow_schema (version) VALUES ($1)";

/// Whether the table `$1` (a schema-qualified name) exists.
const TABLE_EXISTS: &str = "SELECT to_regclass($1) IS NOT NULL";

/// The version of `schema`, named in the statement (the connection's search path need not
/// name it): `schema` must have passed [`check_schema_name`].
fn found_version_in_sql(schema: &str) -> String {
    format!("SELECT COALESCE(MAX(version), 0) FROM {schema}.wow_schema")
}

/// A schema at `found` against this build's migrations.
pub(crate) fn status(found: u32) -> SchemaStatus {
    SchemaStatus::of(found, &MIGRATIONS)
}

/// Refuses a schema name that is empty or holds anything but letters, digits and `_`: the
/// name is written into SQL, never bound.
pub(crate) fn check_schema_name(schema: &str) -> Result<(), OpenError> {
    if schema.is_empty()
        || !schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(OpenError::BadUrl(format!(
            "schema `{schema}` may hold only letters, digits and _"
        )));
    }
    Ok(())
}

/// The version `schema` is at, read without changing anything: 0 when it has no version
/// table (or does not exist). `schema` must have passed [`check_schema_name`].
pub(crate) async fn found_version(
    client: &tokio_postgres::Client,
    schema: &str,
) -> Result<i32, tokio_postgres::Error> {
    let table = format!("{schema}.wow_schema");
    let exists: bool = client.query_one(TABLE_EXISTS, &[&table]).await?.get(0);
    if !exists {
        return Ok(0);
    }
    Ok(client
        .query_one(&found_version_in_sql(schema), &[])
        .await?
        .get(0))
}

/// Creates `schema` if missing and brings it to [`SCHEMA_VERSION`], in one transaction,
/// serialised against other nodes migrating at the same time.
pub(crate) async fn migrate(
    client: &mut tokio_postgres::Client,
    schema: &str,
) -> Result<(), OpenError> {
    migrate_to(client, schema, SCHEMA_VERSION).await
}

/// [`migrate`], stopping at version `target` (at most [`SCHEMA_VERSION`]); the tests build
/// the schemas of older builds with it.
async fn migrate_to(
    client: &mut tokio_postgres::Client,
    schema: &str,
    target: i32,
) -> Result<(), OpenError> {
    check_schema_name(schema)?;
    let transaction = client.transaction().await?;
    transaction
        .batch_execute(&prepare_schema_sql(schema))
        .await?;
    let found: i32 = transaction.query_one(FOUND_VERSION, &[]).await?.get(0);
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
        transaction.batch_execute(migration).await?;
        let version = i32::try_from(index + 1).unwrap_or(i32::MAX);
        if version == 15 {
            // Each existing row's owner hash, which SQL cannot compute.
            crate::store::deadline::fill_owner_hashes(&transaction, None).await?;
        }
        transaction.execute(CLEAR_VERSION, &[]).await?;
        transaction.execute(WRITE_VERSION, &[&version]).await?;
        tracing::info!(version, schema, "applied schema migration");
    }
    transaction.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use wow_core::eventsourcing::{EventStoreError, History, KeyIndex, RequestLog};
    use wow_core::{AggregateId, DomainEvent, DomainEventStream};

    use super::*;
    use crate::{PostgresOptions, PostgresStore};

    fn url() -> String {
        std::env::var("WOW_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
    }

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

    /// Drops its schema when dropped, also when the test failed halfway.
    struct DropSchema(String);

    impl Drop for DropSchema {
        fn drop(&mut self) {
            let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.0);
            let _ = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .ok()?;
                runtime.block_on(async {
                    let (client, connection) =
                        tokio_postgres::connect(&url(), tokio_postgres::NoTls)
                            .await
                            .ok()?;
                    tokio::spawn(connection);
                    client.batch_execute(&sql).await.ok()
                })
            })
            .join();
        }
    }

    /// A client of the test database, its connection driven in the background; `None`
    /// (the test skips) when no PostgreSQL is reachable, unless `WOW_REQUIRE_BACKENDS=1`.
    async fn connect_or_skip() -> Option<tokio_postgres::Client> {
        let (client, connection) =
            match tokio_postgres::connect(&url(), tokio_postgres::NoTls).await {
                Ok(connected) => connected,
                Err(error) => {
                    wow_tck::skip::unavailable(
                        wow_tck::skip::Requirement::Backends,
                        &format!("no PostgreSQL at {} ({error})", url()),
                    );
                    return None;
                }
            };
        tokio::spawn(connection);
        Some(client)
    }

    /// Writes what a build of schema version 3 held for `order`: two streams (returned), a
    /// consumer position and a snapshot, straight into the tables.
    async fn write_version_3_rows(
        client: &tokio_postgres::Client,
        order: &AggregateId,
    ) -> Vec<DomainEventStream> {
        let old: Vec<_> = (1..=2)
            .map(|v| stream(order, v, &format!("r-{v}")))
            .collect();
        for s in &old {
            client
                .execute(
                    "INSERT INTO event_stream (aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                    &[
                        &s.aggregate_id.aggregate_name,
                        &s.aggregate_id.id,
                        &(s.version as i64),
                        &s.aggregate_id.context_name,
                        &s.aggregate_id.tenant_id,
                        &s.id,
                        &s.request_id,
                        &s.command_id,
                        &s.fingerprint,
                        &s.create_time,
                        &serde_json::to_value(&s.header).unwrap(),
                        &serde_json::to_value(&s.body).unwrap(),
                    ],
                )
                .await
                .unwrap();
        }

        client
            .execute(
                "INSERT INTO consumer_position (consumer, aggregate_name, aggregate_id, version) VALUES ('view', $1, $2, 2)",
                &[&order.aggregate_name, &order.id],
            )
            .await
            .unwrap();
        client
            .execute(
                "INSERT INTO snapshot (aggregate_name, aggregate_id, context_name, tenant_id, version, state, snapshot_time) VALUES ($1, $2, $3, $4, 2, '{}'::JSONB, 0)",
                &[&order.aggregate_name, &order.id, &order.context_name, &order.tenant_id],
            )
            .await
            .unwrap();
        old
    }

    /// A row that holds a key but makes no decision is an error, never "no decision".
    async fn a_keyed_row_without_a_decision_is_an_error(
        client: &tokio_postgres::Client,
        store: &PostgresStore,
        order: &AggregateId,
    ) {
        client
            .execute(
                "INSERT INTO event_stream (aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body) VALUES ($1, $2, -999, 'tck', 't', '', 'r-bad', 'c', 'f', 0, '{}', '[]')",
                &[&order.aggregate_name, &order.id],
            )
            .await
            .unwrap();
        assert!(matches!(
            store.find_decision(order, "r-bad").await,
            Err(EventStoreError::Internal(_))
        ));
    }

    /// A schema written by a build of schema version 3, with streams, opens under this
    /// build: it migrates to the current version and the request ids of its old streams still hold
    /// their keys (against appends and rejections alike).
    #[tokio::test]
    async fn a_version_3_schema_with_streams_migrates_and_keeps_its_request_ids() {
        let schema = format!("wow_test_{}", uuid::Uuid::now_v7().simple());
        let Some(mut client) = connect_or_skip().await else {
            return;
        };
        let _guard = DropSchema(schema.clone());
        client
            .batch_execute(&format!(
                "CREATE SCHEMA {schema}; SET search_path TO {schema}"
            ))
            .await
            .unwrap();
        migrate_to(&mut client, &schema, 3).await.unwrap();
        let order = AggregateId::new("tck", "order", wow_core::id::new_id(), "t");
        let old = write_version_3_rows(&client, &order).await;
        let store = PostgresStore::open(url().parse::<PostgresOptions>().unwrap().schema(&schema))
            .await
            .expect("a version 3 schema opens");
        let version: i32 = client
            .query_one("SELECT version FROM wow_schema", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(version, SCHEMA_VERSION);
        wow_tck::migration::a_migrated_store_keeps_what_it_held(&store, &order, &old).await;
        a_keyed_row_without_a_decision_is_an_error(&client, &store, &order).await;
    }

    /// SPEC ES-3: a conflict recorded as a rejection by an earlier build stops blocking its
    /// request id once the schema is migrated; every other recorded rejection stays.
    #[tokio::test]
    async fn migrating_drops_conflicts_an_earlier_build_recorded_as_decisions() {
        let schema = format!("wow_test_{}", uuid::Uuid::now_v7().simple());
        let Some(client) = connect_or_skip().await else {
            return;
        };
        let _guard = DropSchema(schema.clone());
        let options = || url().parse::<PostgresOptions>().unwrap().schema(&schema);
        let order = AggregateId::new("tck", "order", wow_core::id::new_id(), "t");
        {
            let store = PostgresStore::open(options()).await.unwrap();
            store.append(&stream(&order, 1, "r-open")).await.unwrap();
            wow_tck::migration::record_conflicts_as_an_earlier_build_did(&store, &order).await;
        }
        // Back to what a version 11 schema held: migration 12 made nothing (it deletes), 13
        // made `unique_key`, 14 `deadline`.
        client
            .batch_execute(&format!(
                "UPDATE {schema}.wow_schema SET version = 11; DROP TABLE {schema}.unique_key; DROP TABLE {schema}.deadline; DROP TABLE {schema}.parked_lane; ALTER TABLE {schema}.execution_failed DROP COLUMN skipped_by; DROP INDEX {schema}.execution_failed_aggregate; ALTER TABLE {schema}.execution_failed DROP COLUMN retry_spec, DROP COLUMN updated_by, DROP COLUMN recoverable"
            ))
            .await
            .unwrap();
        let store = PostgresStore::open(options()).await.unwrap();
        wow_tck::migration::a_migrated_store_holds_no_conflict_as_a_decision(&store, &order).await;
    }

    /// A schema of version 13 (unique keys, no deadlines) opens under this build: its keys
    /// are still held, and deadlines are written with streams from then on (SPEC DM-2).
    #[tokio::test]
    async fn a_version_13_schema_migrates_and_keeps_its_keys_and_takes_deadlines() {
        use wow_core::deadline::{DeadlineChange, DeadlineStore, ScheduledCommand};
        use wow_core::eventsourcing::AppendChanges;
        use wow_core::unique_key::UniqueKey;

        let schema = format!("wow_test_{}", uuid::Uuid::now_v7().simple());
        let Some(mut client) = connect_or_skip().await else {
            return;
        };
        let _guard = DropSchema(schema.clone());
        client
            .batch_execute(&format!(
                "CREATE SCHEMA {schema}; SET search_path TO {schema}"
            ))
            .await
            .unwrap();
        migrate_to(&mut client, &schema, 13).await.unwrap();
        let exists: bool = client
            .query_one(TABLE_EXISTS, &[&format!("{schema}.deadline")])
            .await
            .unwrap()
            .get(0);
        assert!(!exists, "version 13 has no deadline table");
        let order = AggregateId::new("tck", "order", wow_core::id::new_id(), "t");
        let sku = UniqueKey::new("sku", "sku-1");
        client
            .execute(
                "INSERT INTO unique_key (tenant_id, key_space, key_value, context_name, aggregate_name, aggregate_id, version) VALUES ($1, $2, $3, $4, $5, $6, 1)",
                &[&order.tenant_id, &sku.space, &sku.value, &order.context_name, &order.aggregate_name, &order.id],
            )
            .await
            .unwrap();

        let store = PostgresStore::open(url().parse::<PostgresOptions>().unwrap().schema(&schema))
            .await
            .expect("a version 13 schema opens");
        let version: i32 = client
            .query_one("SELECT version FROM wow_schema", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(version, SCHEMA_VERSION);
        let holder = store.find_key("t", &sku).await.unwrap().unwrap();
        assert_eq!(holder.aggregate_id, order);
        assert_eq!(
            holder.key, sku,
            "a key held before reservations is held for good"
        );
        let expiry = ScheduledCommand {
            owner: order.clone(),
            name: "expire".to_owned(),
            due_at: 42,
            target: order.clone(),
            command: "expire".to_owned(),
            body: serde_json::json!({}),
            request_id: "deadline/expire/1".to_owned(),
            held_to: None,
        };
        store
            .append_with(
                &stream(&order, 1, "r-1"),
                &AppendChanges::deadlines(vec![DeadlineChange::Schedule(expiry.clone())]),
            )
            .await
            .unwrap();
        assert_eq!(store.scheduled_for(&order).await.unwrap(), vec![expiry]);
    }

    /// The scheduler's read of what is due (`DeadlineStore::due_rows`) takes each tenant's
    /// earliest rows off `deadline_fire` in order, over a backlog of many due rows, never
    /// reading all of them: with the values bound (a custom plan) and without them (the
    /// generic plan a prepared statement may settle on).
    /// PostgreSQL's plan for `sql` with `params`, as the custom and as the generic plan:
    /// `(plan_cache_mode, the plan's lines)`.
    async fn plans(
        client: &tokio_postgres::Client,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Vec<(&'static str, String)> {
        let explain = format!("EXPLAIN {sql}");
        let mut plans = Vec::new();
        for mode in ["force_custom_plan", "force_generic_plan"] {
            client
                .batch_execute(&format!("SET plan_cache_mode = {mode}"))
                .await
                .unwrap();
            let lines: Vec<String> = client
                .query(&explain, params)
                .await
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect();
            plans.push((mode, lines.join("\n")));
        }
        plans
    }

    /// SPEC DM-4: a list filtering a declared field by equality reads that field's index in
    /// the list's order, never every row of the tenant.
    #[tokio::test]
    async fn a_list_on_an_indexed_field_reads_its_index() {
        use wow_core::view::{ViewFilter, ViewStore};

        let schema = format!("wow_test_{}", uuid::Uuid::now_v7().simple());
        if connect_or_skip().await.is_none() {
            return;
        }
        let _guard = DropSchema(schema.clone());
        let store = PostgresStore::open(url().parse::<PostgresOptions>().unwrap().schema(&schema))
            .await
            .unwrap();
        store
            .declare_field_index("room_schedule", "open")
            .await
            .unwrap();
        store
            .declare_field_index("room_schedule", "open")
            .await
            .unwrap();
        let client = store.pool().get().await.unwrap();
        client
            .batch_execute(
                "INSERT INTO view_row (view, tenant_id, aggregate_id, version, state, updated_at)
                 SELECT 'room_schedule', 't', 'r-' || n, 1, jsonb_build_object('open', n % 100 = 0), 0
                 FROM generate_series(1, 50000) AS n;
                 ANALYZE view_row;",
            )
            .await
            .unwrap();
        let mut params: Vec<crate::query::Param> = vec![
            Box::new("room_schedule".to_owned()),
            Box::new("t".to_owned()),
            Box::new(None::<String>),
            Box::new(100_i64),
        ];
        let filter = ViewFilter::new().equals("open", true);
        let conditions = crate::view::filter::conditions(&filter, &mut params).unwrap();
        let sql = crate::view::list_rows_sql(&conditions);
        let index = crate::view::field_index::field_index_name("open");
        for (mode, plan) in plans(&client, &sql, &crate::query::param_refs(&params)).await {
            assert!(
                plan.contains(&index),
                "{mode}: not read off {index}:\n{plan}"
            );
            assert!(
                !plan.contains("Seq Scan"),
                "{mode}: reads every row:\n{plan}"
            );
        }
        let listed = store
            .list("room_schedule", "t", &filter, None, 1000)
            .await
            .unwrap();
        assert_eq!(listed.len(), 500);
        assert!(listed
            .windows(2)
            .all(|w| w[0].key.aggregate_id < w[1].key.aggregate_id));
    }

    #[tokio::test]
    async fn due_reads_each_tenants_earliest_rows_off_the_fire_index() {
        use wow_core::deadline::DeadlineStore;

        let schema = format!("wow_test_{}", uuid::Uuid::now_v7().simple());
        if connect_or_skip().await.is_none() {
            return;
        }
        let _guard = DropSchema(schema.clone());
        let store = PostgresStore::open(url().parse::<PostgresOptions>().unwrap().schema(&schema))
            .await
            .unwrap();
        let client = store.pool().get().await.unwrap();
        client
            .batch_execute(
                "INSERT INTO deadline (tenant_id, aggregate_name, aggregate_id, name, context_name, due_at, target_context, target_name, target_id, command, body, request_id, fire_at, owner_hash)
                 SELECT CASE WHEN n % 100 = 0 THEN 'quiet' ELSE 'busy' END, 'order', 'o-' || n, 'expire', 'shop', n * 1000, 'shop', 'order', 'o-' || n, 'expire', '{}', 'deadline/expire/1', n * 1000, n * 7919
                 FROM generate_series(1, 200000) AS n;
                 ANALYZE deadline;",
            )
            .await
            .unwrap();
        // A backlog of 200,000 due rows: each tenant's rows are a range of deadline_fire, and
        // its earliest rows come off the index in order, never all of them sorted.
        let due = (Some(500_000_000_i64), 64_i64, 4_i64, 0_i64, vec![1_i64, 2]);
        let due_params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&due.0, &due.1, &due.2, &due.3, &due.4];
        for (mode, plan) in plans(&client, crate::store::deadline::DUE, &due_params).await {
            assert!(
                plan.contains("Index Scan using deadline_fire"),
                "{mode}: due is not a scan of deadline_fire:\n{plan}"
            );
            assert!(
                !plan.contains("Seq Scan") && !plan.contains("Bitmap Heap Scan"),
                "{mode}: due reads every due row:\n{plan}"
            );
        }
        // The scheduler's look at when its next row comes due (`next_fire_at`) over the same
        // backlog: one seek of deadline_fire per tenant, never a scan of every row.
        let next = (i64::MAX, 4_i64, 0_i64, vec![1_i64, 2]);
        let next_params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&next.0, &next.1, &next.2, &next.3];
        for (mode, plan) in plans(&client, crate::store::deadline::NEXT_FIRE, &next_params).await {
            assert!(
                plan.contains("Index Scan using deadline_fire"),
                "{mode}: next_fire_at is not a seek of deadline_fire:\n{plan}"
            );
            assert!(
                !plan.contains("Seq Scan")
                    && !plan.contains("Bitmap Heap Scan")
                    && !plan.contains("Sort"),
                "{mode}: next_fire_at reads every row:\n{plan}"
            );
        }
        let started = std::time::Instant::now();
        let next = store
            .next_fire_at(Some(&wow_core::deadline::PartitionFilter {
                count: 4,
                owned: vec![3],
            }))
            .await
            .unwrap();
        assert!(next.is_some_and(|at| at >= 1_000), "{next:?}");
        eprintln!("next_fire_at over 200,000 rows: {:?}", started.elapsed());
        client.batch_execute("RESET plan_cache_mode").await.unwrap();
    }
}
