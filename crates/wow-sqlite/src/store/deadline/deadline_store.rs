//! The [`DeadlineStore`] of [`SqliteStore`] (SPEC DM-2): reads on the read pool, writes through
//! the writer as a [`WriteJob::Deadline`] (the table and its statements are in
//! [`super`]).

use async_trait::async_trait;
use tokio::sync::oneshot;
use wow_core::deadline::{
    check_deadline_name, share_across_tenants, DeadlineBacklog, DeadlineStore, DueQuery,
    FailedFiring, PartitionFilter, PendingDeadline, ScheduledCommand, HELD,
};
use wow_core::eventsourcing::EventStoreError;
use wow_core::AggregateId;

use rusqlite::params;

use super::{decode, BACKLOG, DUE, NEXT_FIRE, OF_OWNER, TENANTS};
use crate::error::{gone, store_error};
use crate::write_job::DeadlineWrite;
use crate::write_job::WriteJob;
use crate::SqliteStore;

/// The partition parameters of [`DUE`] and [`NEXT_FIRE`]: the count, its wrap (2^64 mod the
/// count) and the owned partitions as a JSON array; every partition where `None`.
fn partition_params(partitions: Option<&PartitionFilter>) -> (i64, i64, String) {
    let (count, owned) = match partitions {
        Some(partitions) => (partitions.count.max(1), partitions.owned.clone()),
        None => (1, vec![0]),
    };
    let wrap = PartitionFilter::signed_hash_wrap(count);
    let owned = serde_json::to_string(&owned).unwrap_or_else(|_| "[]".to_owned());
    (i64::from(count), wrap, owned)
}

impl SqliteStore {
    /// Hands a deadline write to the writer and waits for its answer.
    async fn write_deadline(&self, write: DeadlineWrite) -> Result<u64, EventStoreError> {
        let (reply, answer) = oneshot::channel();
        self.writer
            .send(WriteJob::Deadline { write, reply })
            .await
            .map_err(|_| EventStoreError::Unavailable(gone()))?;
        answer
            .await
            .map_err(|_| EventStoreError::Unavailable(gone()))?
    }
}

/// Reads on the read pool; writes through the writer, each its own statement in a group
/// commit, acknowledged once durable.
///
/// # Cancel safety
///
/// Reads are cancel safe. A write (`schedule`, `cancel`, `fired`) dropped before it answers
/// may or may not have been made: `scheduled_for` tells which.
/// The tenants that have deadline rows: one skip scan ([`TENANTS`]).
fn tenants_with_rows(connection: &rusqlite::Connection) -> rusqlite::Result<Vec<String>> {
    connection
        .prepare_cached(TENANTS)?
        .query_map([], |row| row.get(0))?
        .collect()
}

#[async_trait]
impl DeadlineStore for SqliteStore {
    /// One skip scan of the tenants, then each tenant's rows along `deadline_fire`, in one
    /// read. "Due" by the machine's clock when the query names no time (every process on a
    /// file shares it). Fails with [`EventStoreError::Unavailable`] when the file cannot be
    /// read, and with [`EventStoreError::Internal`] when a stored row cannot be decoded.
    async fn due_rows(&self, query: &DueQuery) -> Result<Vec<PendingDeadline>, EventStoreError> {
        let at = query.at.unwrap_or_else(wow_core::id::now_millis);
        let per_tenant = query.per_tenant.max(1);
        let limit = i64::try_from(per_tenant).unwrap_or(i64::MAX);
        let (count, wrap, owned) = partition_params(query.partitions.as_ref());
        let total = query.limit;
        self.reads
            .read(move |connection| {
                let tenants = tenants_with_rows(connection)?;
                let mut statement = connection.prepare_cached(DUE)?;
                let mut candidates = Vec::with_capacity(tenants.len());
                for tenant in tenants {
                    let rows = statement
                        .query_map(params![tenant, at, limit, count, wrap, owned], decode)?
                        .collect::<rusqlite::Result<Vec<_>>>()?;
                    if !rows.is_empty() {
                        candidates.push(rows);
                    }
                }
                Ok(share_across_tenants(candidates, per_tenant, total))
            })
            .await
            .map_err(store_error)
    }

    /// One read: the tenants, then each tenant's earliest row along `deadline_fire`. Fails as
    /// [`due_rows`](Self::due_rows) does.
    async fn next_fire_at(
        &self,
        partitions: Option<&PartitionFilter>,
    ) -> Result<Option<i64>, EventStoreError> {
        let (count, wrap, owned) = partition_params(partitions);
        self.reads
            .read(move |connection| {
                let tenants = tenants_with_rows(connection)?;
                let mut statement = connection.prepare_cached(NEXT_FIRE)?;
                let mut earliest: Option<i64> = None;
                for tenant in tenants {
                    let first: Option<i64> = statement
                        .query_map(params![tenant, HELD, count, wrap, owned], |row| row.get(0))?
                        .next()
                        .transpose()?;
                    earliest = earliest.into_iter().chain(first).min();
                }
                Ok(earliest)
            })
            .await
            .map_err(store_error)
    }

    /// The machine's clock, which every process on the file shares.
    async fn now(&self) -> Result<i64, EventStoreError> {
        Ok(wow_core::id::now_millis())
    }

    /// Fails as [`fired`](Self::fired) does.
    async fn retry_later(&self, failure: FailedFiring<'_>) -> Result<Option<u32>, EventStoreError> {
        let fire_at = failure.fire_at(wow_core::id::now_millis);
        let attempts = self
            .write_deadline(DeadlineWrite::Retry {
                owner: failure.owner.clone(),
                name: failure.name.to_owned(),
                request_id: failure.request_id.to_owned(),
                fire_at,
            })
            .await?;
        Ok((attempts > 0).then(|| u32::try_from(attempts).unwrap_or(u32::MAX)))
    }

    /// Fails as [`fired`](Self::fired) does.
    async fn fire_now(&self, owner: &AggregateId, name: &str) -> Result<bool, EventStoreError> {
        self.write_deadline(DeadlineWrite::FireAt {
            owner: owner.clone(),
            name: name.to_owned(),
            fire_at: wow_core::id::now_millis(),
        })
        .await
        .map(|changed| changed > 0)
    }

    /// Fails as [`fired`](Self::fired) does.
    async fn cancel_named(&self, tenant: &str, name: &str) -> Result<u64, EventStoreError> {
        self.write_deadline(DeadlineWrite::DeleteNamed {
            tenant: tenant.to_owned(),
            name: name.to_owned(),
        })
        .await
    }

    /// Fails with [`EventStoreError::Unavailable`] when the writer has stopped or the file
    /// cannot be written.
    async fn fired(&self, schedule: &ScheduledCommand) -> Result<bool, EventStoreError> {
        self.write_deadline(DeadlineWrite::Delete {
            owner: schedule.owner.clone(),
            name: schedule.name.clone(),
            request_id: Some(schedule.request_id.clone()),
        })
        .await
        .map(|changed| changed > 0)
    }

    /// Fails as [`due_rows`](Self::due_rows) does.
    async fn pending_for(
        &self,
        owner: &AggregateId,
    ) -> Result<Vec<PendingDeadline>, EventStoreError> {
        let owner = owner.clone();
        self.reads
            .read(move |connection| {
                let mut statement = connection.prepare_cached(OF_OWNER)?;
                let rows = statement.query_map(
                    params![owner.tenant_id, owner.aggregate_name, owner.id],
                    decode,
                )?;
                rows.collect()
            })
            .await
            .map_err(store_error)
    }

    /// A malformed name, or a target in another tenant than the owner's (a row keeps one
    /// tenant), is [`EventStoreError::IllegalArgument`]; otherwise fails as
    /// [`fired`](Self::fired) does.
    async fn schedule(&self, row: &ScheduledCommand) -> Result<(), EventStoreError> {
        check_deadline_name(&row.name).map_err(EventStoreError::IllegalArgument)?;
        if row.target.tenant_id != row.owner.tenant_id {
            return Err(EventStoreError::IllegalArgument(format!(
                "deadline `{}` sends to another tenant",
                row.name
            )));
        }
        self.write_deadline(DeadlineWrite::Schedule(Box::new(row.clone())))
            .await
            .map(|_| ())
    }

    /// Fails as [`fired`](Self::fired) does.
    async fn cancel(&self, owner: &AggregateId, name: &str) -> Result<bool, EventStoreError> {
        self.write_deadline(DeadlineWrite::Delete {
            owner: owner.clone(),
            name: name.to_owned(),
            request_id: None,
        })
        .await
        .map(|changed| changed > 0)
    }

    /// Fails as [`due_rows`](Self::due_rows) does.
    async fn backlog(&self) -> Result<DeadlineBacklog, EventStoreError> {
        self.reads
            .read(|connection| {
                connection.prepare_cached(BACKLOG)?.query_row([], |row| {
                    Ok(DeadlineBacklog {
                        pending: u64::try_from(row.get::<_, i64>(0)?).unwrap_or(0),
                        next_due_at: row.get(1)?,
                    })
                })
            })
            .await
            .map_err(store_error)
    }
}
