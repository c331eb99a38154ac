//! Table `deadline`: the pending scheduled commands (SPEC DM-2), one row per owner aggregate
//! and name, and the `DeadlineStore` implementation.
//!
//! Rows are written in the transaction of the stream that schedules or cancels them (see
//! [`change`], called by `append_with` after the key changes, so a refused append leaves no
//! row), or on their own, one autocommit statement each, for a saga and for the scheduler.
//!
//! Concurrency: a schedule is one `INSERT ... ON CONFLICT DO UPDATE`, so two writers of one
//! row never fail on the primary key; the later commit wins, as in the in-memory table. A
//! `fired` delete that meets a row an append is rescheduling waits for that transaction and
//! then checks the request id again against the row as committed (PostgreSQL re-evaluates the
//! `WHERE` of a `DELETE` on the newest version of a row it waited for): a deadline scheduled
//! again meanwhile stays. An append's changes are made in name order (a stable sort, so one
//! name's changes keep their order): two appends of one aggregate that change the same
//! deadlines in different orders wait for each other instead of deadlocking.
//!
//! The target's tenant is the owner's (checked before anything is written), so a row keeps the
//! target's context, name and id only. The key columns compare by bytes (`COLLATE "C"`), so
//! rows come in the order the in-memory table gives: by name for an owner, by (due time, key)
//! for what is due.

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::Row;
use wow_core::deadline::{
    check_deadline_name, share_across_tenants, DeadlineBacklog, DeadlineChange, DeadlineStore,
    DueQuery, FailedFiring, PartitionFilter, PendingDeadline, ScheduledCommand, HELD,
};
use wow_core::eventsourcing::EventStoreError;
use wow_core::{AggregateId, DomainEventStream};

use super::stream_row::corrupt;
use super::PostgresStore;
use crate::error::store_error;

/// The columns of `deadline` in the order [`decode`] reads and [`SCHEDULE`] binds them: the
/// key (tenant, owner name, owner id, deadline name), the owner's context, the due time, the
/// target (context, name, id), the command, its body and its request id.
macro_rules! deadline_columns {
    () => {
        "tenant_id, aggregate_name, aggregate_id, name, context_name, due_at, target_context, target_name, target_id, command, body, request_id"
    };
}

/// What [`decode`] reads after the schedule's columns: when it may be fired next, how many
/// firings failed, and the owner and space a saga's deadline is held to.
macro_rules! firing_columns {
    () => {
        ", fire_at, attempts, held_to"
    };
}

/// Writes the row of owner (`$1` tenant, `$2` name, `$3` id) named `$4`, `$5` to `$12` in the
/// order of [`deadline_columns`], replacing the owner's row of that name.
const SCHEDULE: &str = concat!(
    "INSERT INTO deadline (",
    deadline_columns!(),
    ", fire_at, attempts, owner_hash, held_to) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $6, 0, $13, $14)
    ON CONFLICT (tenant_id, aggregate_name, aggregate_id, name) DO UPDATE SET
        context_name = EXCLUDED.context_name, due_at = EXCLUDED.due_at,
        target_context = EXCLUDED.target_context, target_name = EXCLUDED.target_name,
        target_id = EXCLUDED.target_id, command = EXCLUDED.command, body = EXCLUDED.body,
        request_id = EXCLUDED.request_id, fire_at = EXCLUDED.fire_at, attempts = 0,
        owner_hash = EXCLUDED.owner_hash, held_to = EXCLUDED.held_to"
);

/// The database server's clock, in milliseconds since the Unix epoch: the one clock every
/// process judges "due" by.
const NOW: &str = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT";

/// One failed firing more of the row of owner (`$1`, `$2`, `$3`) named `$4` while it carries
/// request id `$5`: due again `$6` ms from `$7` (the server's now when NULL), or held when
/// `$6` is NULL.
const RETRY: &str = "UPDATE deadline SET attempts = attempts + 1,
        fire_at = COALESCE(COALESCE($7::BIGINT, (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT) + $6::BIGINT, 9223372036854775807)
    WHERE tenant_id = $1 AND aggregate_name = $2 AND aggregate_id = $3 AND name = $4 AND request_id = $5
    RETURNING attempts";

/// Makes the row of owner (`$1`, `$2`, `$3`) named `$4` due at the server's now.
const FIRE_NOW: &str =
    "UPDATE deadline SET fire_at = (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT
    WHERE tenant_id = $1 AND aggregate_name = $2 AND aggregate_id = $3 AND name = $4";

/// Deletes every row of tenant `$1` named `$2`.
const CANCEL_NAMED: &str = "DELETE FROM deadline WHERE tenant_id = $1 AND name = $2";

/// Deletes the row of owner (`$1` tenant, `$2` name, `$3` id) named `$4`: one look-up of
/// `deadline_pk`.
const CANCEL: &str = "DELETE FROM deadline WHERE tenant_id = $1 AND aggregate_name = $2 AND aggregate_id = $3 AND name = $4";

/// Deletes the row of owner (`$1`, `$2`, `$3`) named `$4` while it carries request id `$5`.
const FIRED: &str = "DELETE FROM deadline WHERE tenant_id = $1 AND aggregate_name = $2 AND aggregate_id = $3 AND name = $4 AND request_id = $5";

/// A recursive skip scan of the tenants with rows (one seek of `deadline_pk` each), as the
/// CTE `tenants(tenant)`, ending with a NULL tenant.
macro_rules! tenants_with_rows {
    () => {
        "WITH RECURSIVE tenants(tenant) AS (
        (SELECT tenant_id FROM deadline ORDER BY tenant_id LIMIT 1)
        UNION ALL
        SELECT (SELECT tenant_id FROM deadline WHERE tenant_id > tenants.tenant ORDER BY tenant_id LIMIT 1)
        FROM tenants WHERE tenants.tenant IS NOT NULL
    )"
    };
}

/// Whether a row's owner is in one of the partitions `$owned` (a `BIGINT[]`) of `$count`,
/// with `$wrap` = 2^64 mod `$count`, which turns the stored signed hash back into its
/// unsigned value's remainder.
macro_rules! in_partitions {
    ($count:literal, $wrap:literal, $owned:literal) => {
        concat!(
            "((owner_hash % ",
            $count,
            "::BIGINT + ",
            $count,
            "::BIGINT) % ",
            $count,
            "::BIGINT + CASE WHEN owner_hash < 0 THEN ",
            $wrap,
            "::BIGINT ELSE 0 END) % ",
            $count,
            "::BIGINT = ANY(",
            $owned,
            "::BIGINT[])"
        )
    };
}

/// The earliest `fire_at` below `$1` (the held mark) over each tenant's rows along
/// `deadline_fire` whose owner is in the partitions `$4` of `$2` (`$3` their wrap): one seek
/// per tenant.
pub(crate) const NEXT_FIRE: &str = concat!(
    tenants_with_rows!(),
    " SELECT MIN(d.fire_at) FROM tenants CROSS JOIN LATERAL (
        SELECT fire_at FROM deadline WHERE tenant_id = tenants.tenant AND fire_at < $1 AND ",
    in_partitions!("$2", "$3", "$4"),
    " ORDER BY fire_at LIMIT 1
    ) d WHERE tenants.tenant IS NOT NULL"
);

/// The rows to fire at `$1` (the server's clock when NULL): a skip scan of the tenants (one
/// seek of `deadline_pk` each, so it costs the number of tenants, not of rows), then for each
/// tenant its earliest `$2` rows along `deadline_fire` whose owner's partition among `$3` is
/// in `$5` (`$4` is 2^64 mod `$3`, which turns the stored signed hash back into its unsigned
/// value's remainder). The rounds across tenants and `limit` are applied by the caller.
pub(crate) const DUE: &str = concat!(
    tenants_with_rows!(),
    ", at AS (SELECT COALESCE($1::BIGINT, (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT) AS now)
    SELECT d.* FROM tenants CROSS JOIN at CROSS JOIN LATERAL (
        SELECT ",
    deadline_columns!(),
    firing_columns!(),
    " FROM deadline
        WHERE tenant_id = tenants.tenant AND fire_at <= at.now AND ",
    in_partitions!("$3", "$4", "$5"),
    "
        ORDER BY fire_at, aggregate_name, aggregate_id, name LIMIT $2::BIGINT
    ) d WHERE tenants.tenant IS NOT NULL
    ORDER BY d.tenant_id, d.fire_at, d.aggregate_name, d.aggregate_id, d.name"
);

/// The rows of owner (`$1` tenant, `$2` name, `$3` id), by name: a prefix of `deadline_pk`.
const OF_OWNER: &str = concat!(
    "SELECT ",
    deadline_columns!(),
    firing_columns!(),
    " FROM deadline WHERE tenant_id = $1 AND aggregate_name = $2 AND aggregate_id = $3 ORDER BY name"
);

/// How many rows are pending, and the earliest due time (one seek of `deadline_due`).
const BACKLOG: &str = "SELECT (SELECT COUNT(*) FROM deadline), (SELECT MIN(due_at) FROM deadline)";

/// Decodes a row of [`DUE`] or [`OF_OWNER`]; the target is in the owner's tenant.
fn decode(row: &Row) -> Result<PendingDeadline, EventStoreError> {
    let text =
        |i: usize| -> Result<String, EventStoreError> { row.try_get(i).map_err(store_error) };
    let tenant_id = text(0)?;
    let name = text(3)?;
    if name.is_empty() {
        return Err(corrupt(format!(
            "a deadline of {tenant_id}/{} has no name",
            text(2)?
        )));
    }
    let schedule = ScheduledCommand {
        owner: AggregateId {
            context_name: text(4)?,
            aggregate_name: text(1)?,
            id: text(2)?,
            tenant_id: tenant_id.clone(),
        },
        name,
        due_at: row.try_get(5).map_err(store_error)?,
        target: AggregateId {
            context_name: text(6)?,
            aggregate_name: text(7)?,
            id: text(8)?,
            tenant_id,
        },
        command: text(9)?,
        body: row.try_get(10).map_err(store_error)?,
        request_id: text(11)?,
        held_to: row
            .try_get::<_, Option<serde_json::Value>>(14)
            .map_err(store_error)?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|error| corrupt(format!("a deadline's held_to does not read: {error}")))?,
    };
    let attempts: i32 = row.try_get(13).map_err(store_error)?;
    Ok(PendingDeadline {
        schedule,
        fire_at: row.try_get(12).map_err(store_error)?,
        attempts: u32::try_from(attempts).unwrap_or(0),
    })
}

/// Writes `row` ([`SCHEDULE`]) on `client`: a pooled connection, or an append's transaction.
async fn schedule(
    client: &impl GenericClient,
    row: &ScheduledCommand,
) -> Result<(), EventStoreError> {
    let statement = client.prepare_cached(SCHEDULE).await.map_err(store_error)?;
    let (owner, target) = (&row.owner, &row.target);
    let held_to = row
        .held_to
        .as_ref()
        .map(serde_json::to_value)
        .transpose()
        .map_err(|error| corrupt(format!("a deadline's held_to does not write: {error}")))?;
    client
        .execute(
            &statement,
            &[
                &owner.tenant_id,
                &owner.aggregate_name,
                &owner.id,
                &row.name,
                &owner.context_name,
                &row.due_at,
                &target.context_name,
                &target.aggregate_name,
                &target.id,
                &row.command,
                &row.body,
                &row.request_id,
                &(wow_core::deadline::owner_hash(owner) as i64),
                &held_to,
            ],
        )
        .await
        .map_err(store_error)?;
    Ok(())
}

/// Deletes `owner`'s row `name` on `client`: with `request_id`, only while the row carries it
/// ([`FIRED`]), else whatever it carries ([`CANCEL`]). Whether a row was deleted.
async fn delete(
    client: &impl GenericClient,
    owner: &AggregateId,
    name: &str,
    request_id: Option<&str>,
) -> Result<bool, EventStoreError> {
    let deleted = match request_id {
        Some(request_id) => {
            let statement = client.prepare_cached(FIRED).await.map_err(store_error)?;
            client
                .execute(
                    &statement,
                    &[
                        &owner.tenant_id,
                        &owner.aggregate_name,
                        &owner.id,
                        &name,
                        &request_id,
                    ],
                )
                .await
        }
        None => {
            let statement = client.prepare_cached(CANCEL).await.map_err(store_error)?;
            client
                .execute(
                    &statement,
                    &[&owner.tenant_id, &owner.aggregate_name, &owner.id, &name],
                )
                .await
        }
    };
    Ok(deleted.map_err(store_error)? > 0)
}

/// Makes `stream`'s deadline changes in `transaction`, the one its stream was inserted in and
/// its key changes made in, in name order (see the module's docs), one statement each: a
/// decision changes one or two deadlines, so a batched statement would save little, and one
/// `INSERT ... ON CONFLICT` cannot touch a row twice, as two changes of one name would.
///
/// The changes passed `check_deadline_changes`: each schedule is the stream's aggregate's. On
/// an error the caller must roll `transaction` back.
pub(super) async fn change(
    transaction: &Transaction<'_>,
    stream: &DomainEventStream,
    changes: &[DeadlineChange],
) -> Result<(), EventStoreError> {
    let mut ordered: Vec<&DeadlineChange> = changes.iter().collect();
    ordered.sort_by(|a, b| a.name().cmp(b.name()));
    for change in ordered {
        match change {
            DeadlineChange::Schedule(row) => schedule(transaction, row).await?,
            DeadlineChange::Cancel { name } => {
                delete(transaction, &stream.aggregate_id, name, None).await?;
            }
        }
    }
    Ok(())
}

/// Computes the owner hash (SPEC DM-6) of every row, or of the rows owned by aggregates named
/// `aggregate_name`: for the rows a migration found, and the rows a rename moved.
pub(crate) async fn fill_owner_hashes(
    client: &tokio_postgres::Transaction<'_>,
    aggregate_name: Option<&str>,
) -> Result<(), tokio_postgres::Error> {
    let owners = client
        .query(
            "SELECT DISTINCT tenant_id, aggregate_name, aggregate_id FROM deadline WHERE $1::TEXT IS NULL OR aggregate_name = $1",
            &[&aggregate_name],
        )
        .await?;
    for owner in owners {
        let (tenant, name, id): (String, String, String) =
            (owner.get(0), owner.get(1), owner.get(2));
        let hash = wow_core::deadline::aggregate_hash(&tenant, &name, &id) as i64;
        client
            .execute(
                "UPDATE deadline SET owner_hash = $4 WHERE tenant_id = $1 AND aggregate_name = $2 AND aggregate_id = $3",
                &[&tenant, &name, &id, &hash],
            )
            .await?;
    }
    Ok(())
}

/// Every write is one autocommit statement, every read one query. Failures are
/// [`EventStoreError::Unavailable`] when the database cannot be reached (the write may or may
/// not have been made; each is idempotent, so retry it) and [`EventStoreError::Internal`]
/// otherwise, a stored row that cannot be read among them.
///
/// # Cancel safety
///
/// The reads are cancel safe. A write dropped before it completes may or may not have been
/// made; read the owner's rows with [`DeadlineStore::scheduled_for`] to tell.
/// The partition parameters of [`DUE`] and [`NEXT_FIRE`]: the count, its wrap (2^64 mod the
/// count) and the owned partitions; every partition where `None`.
fn partition_params(partitions: Option<&PartitionFilter>) -> (i64, i64, Vec<i64>) {
    let (count, owned) = match partitions {
        Some(partitions) => (
            partitions.count.max(1),
            partitions.owned.iter().map(|p| i64::from(*p)).collect(),
        ),
        None => (1, vec![0_i64]),
    };
    let wrap = PartitionFilter::signed_hash_wrap(count);
    (i64::from(count), wrap, owned)
}

#[async_trait]
impl DeadlineStore for PostgresStore {
    /// One statement; "due" by the server's clock when the query names no time.
    async fn due_rows(&self, query: &DueQuery) -> Result<Vec<PendingDeadline>, EventStoreError> {
        self.within(async {
            let client = self.client().await?;
            let statement = client.prepare_cached(DUE).await.map_err(store_error)?;
            let per_tenant = query.per_tenant.max(1);
            let (count, wrap, owned) = partition_params(query.partitions.as_ref());
            let rows = client
                .query(
                    &statement,
                    &[
                        &query.at,
                        &i64::try_from(per_tenant).unwrap_or(i64::MAX),
                        &count,
                        &wrap,
                        &owned,
                    ],
                )
                .await
                .map_err(store_error)?;
            let mut by_tenant: Vec<Vec<PendingDeadline>> = Vec::new();
            for row in rows.iter().map(decode) {
                let row = row?;
                match by_tenant.last_mut() {
                    Some(rows)
                        if rows.first().map(|first| &first.schedule.owner.tenant_id)
                            == Some(&row.schedule.owner.tenant_id) =>
                    {
                        rows.push(row)
                    }
                    _ => by_tenant.push(vec![row]),
                }
            }
            Ok(share_across_tenants(by_tenant, per_tenant, query.limit))
        })
        .await
    }

    /// One statement: a seek of `deadline_fire` per tenant with rows.
    async fn next_fire_at(
        &self,
        partitions: Option<&PartitionFilter>,
    ) -> Result<Option<i64>, EventStoreError> {
        let (count, wrap, owned) = partition_params(partitions);
        self.within(async {
            let client = self.client().await?;
            let statement = client
                .prepare_cached(NEXT_FIRE)
                .await
                .map_err(store_error)?;
            let row = client
                .query_one(&statement, &[&HELD, &count, &wrap, &owned])
                .await
                .map_err(store_error)?;
            row.try_get(0).map_err(store_error)
        })
        .await
    }

    /// The database server's clock.
    async fn now(&self) -> Result<i64, EventStoreError> {
        self.within(async {
            let client = self.client().await?;
            let statement = client.prepare_cached(NOW).await.map_err(store_error)?;
            let row = client
                .query_one(&statement, &[])
                .await
                .map_err(store_error)?;
            row.try_get(0).map_err(store_error)
        })
        .await
    }

    /// One `UPDATE` by the primary key and the request id, timed by the server's clock.
    async fn retry_later(&self, failure: FailedFiring<'_>) -> Result<Option<u32>, EventStoreError> {
        let FailedFiring {
            owner,
            name,
            request_id,
            after,
            from,
        } = failure;
        self.within(async {
            let client = self.client().await?;
            let statement = client.prepare_cached(RETRY).await.map_err(store_error)?;
            let after: Option<i64> =
                after.map(|after| i64::try_from(after.as_millis()).unwrap_or(i64::MAX / 2));
            let row = client
                .query_opt(
                    &statement,
                    &[
                        &owner.tenant_id,
                        &owner.aggregate_name,
                        &owner.id,
                        &name,
                        &request_id,
                        &after,
                        &from,
                    ],
                )
                .await
                .map_err(store_error)?;
            match row {
                Some(row) => {
                    let attempts: i32 = row.try_get(0).map_err(store_error)?;
                    Ok(Some(u32::try_from(attempts).unwrap_or(0)))
                }
                None => Ok(None),
            }
        })
        .await
    }

    /// One `UPDATE` by the primary key, timed by the server's clock.
    async fn fire_now(&self, owner: &AggregateId, name: &str) -> Result<bool, EventStoreError> {
        self.within(async {
            let client = self.client().await?;
            let statement = client.prepare_cached(FIRE_NOW).await.map_err(store_error)?;
            let changed = client
                .execute(
                    &statement,
                    &[&owner.tenant_id, &owner.aggregate_name, &owner.id, &name],
                )
                .await
                .map_err(store_error)?;
            Ok(changed > 0)
        })
        .await
    }

    /// One `DELETE` over the tenant's prefix of `deadline_pk`.
    async fn cancel_named(&self, tenant: &str, name: &str) -> Result<u64, EventStoreError> {
        self.within(async {
            let client = self.client().await?;
            let statement = client
                .prepare_cached(CANCEL_NAMED)
                .await
                .map_err(store_error)?;
            client
                .execute(&statement, &[&tenant, &name])
                .await
                .map_err(store_error)
        })
        .await
    }

    /// One `DELETE` by the primary key and the request id.
    async fn fired(&self, schedule: &ScheduledCommand) -> Result<bool, EventStoreError> {
        self.within(async {
            let client = self.client().await?;
            let request_id = Some(schedule.request_id.as_str());
            delete(&client, &schedule.owner, &schedule.name, request_id).await
        })
        .await
    }

    /// One read of a prefix of `deadline_pk`.
    async fn pending_for(
        &self,
        owner: &AggregateId,
    ) -> Result<Vec<PendingDeadline>, EventStoreError> {
        self.within(async {
            let client = self.client().await?;
            let statement = client.prepare_cached(OF_OWNER).await.map_err(store_error)?;
            let rows = client
                .query(
                    &statement,
                    &[&owner.tenant_id, &owner.aggregate_name, &owner.id],
                )
                .await
                .map_err(store_error)?;
            rows.iter().map(decode).collect()
        })
        .await
    }

    /// One `INSERT ... ON CONFLICT DO UPDATE`. A malformed name, or a target in another
    /// tenant, is [`EventStoreError::IllegalArgument`] and writes nothing.
    async fn schedule(&self, row: &ScheduledCommand) -> Result<(), EventStoreError> {
        self.within(async {
            check_deadline_name(&row.name).map_err(EventStoreError::IllegalArgument)?;
            if row.target.tenant_id != row.owner.tenant_id {
                return Err(EventStoreError::IllegalArgument(format!(
                    "deadline `{}` sends to another tenant",
                    row.name
                )));
            }
            let client = self.client().await?;
            schedule(&client, row).await
        })
        .await
    }

    /// One `DELETE` by the primary key.
    async fn cancel(&self, owner: &AggregateId, name: &str) -> Result<bool, EventStoreError> {
        self.within(async {
            let client = self.client().await?;
            delete(&client, owner, name, None).await
        })
        .await
    }

    /// One query: a count of the table and a seek of `deadline_due`.
    async fn backlog(&self) -> Result<DeadlineBacklog, EventStoreError> {
        self.within(async {
            let client = self.client().await?;
            let statement = client.prepare_cached(BACKLOG).await.map_err(store_error)?;
            let row = client
                .query_one(&statement, &[])
                .await
                .map_err(store_error)?;
            let pending: i64 = row.try_get(0).map_err(store_error)?;
            Ok(DeadlineBacklog {
                pending: u64::try_from(pending).unwrap_or(0),
                next_due_at: row.try_get(1).map_err(store_error)?,
            })
        })
        .await
    }
}
