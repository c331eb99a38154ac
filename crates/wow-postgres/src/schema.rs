//! The schema, its version, and the migrations applied on open.

use deadpool_postgres::Object;

use crate::OpenError;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i32 = 3;

/// Migration `n` (1-based) takes the schema from version `n - 1` to `n`. The request-id index
/// is created before the primary key on purpose: PostgreSQL checks unique indexes in creation
/// order, so a stream that repeats a request id at a taken version reports the request id
/// (SPEC ES-4). The store also confirms it after a version conflict.
const MIGRATIONS: [&str; 3] = [
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
];

/// Creates `schema` if missing and brings it to [`SCHEMA_VERSION`], in one transaction,
/// serialised against other nodes migrating at the same time.
pub(crate) async fn migrate(client: &mut Object, schema: &str) -> Result<(), OpenError> {
    if !schema
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        || schema.is_empty()
    {
        return Err(OpenError::BadUrl(format!(
            "schema `{schema}` may hold only letters, digits and _"
        )));
    }
    client
        .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .await?;
    let transaction = client.transaction().await?;
    transaction
        .batch_execute("SELECT pg_advisory_xact_lock(7770007); CREATE TABLE IF NOT EXISTS wow_schema (version INT NOT NULL)")
        .await?;
    let found: i32 = transaction
        .query_one("SELECT COALESCE(MAX(version), 0) FROM wow_schema", &[])
        .await?
        .get(0);
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
        transaction.batch_execute(migration).await?;
        let version = i32::try_from(index + 1).unwrap_or(i32::MAX);
        transaction.execute("DELETE FROM wow_schema", &[]).await?;
        transaction
            .execute("INSERT INTO wow_schema (version) VALUES ($1)", &[&version])
            .await?;
        tracing::info!(version, schema, "applied schema migration");
    }
    transaction.commit().await?;
    Ok(())
}
