//! The [`DeadlineStore`] of [`SqliteStore`] (SPEC DM-2): reads on the read pool, writes through
//! the writer as a [`WriteJob::Deadline`] (the table and its statements are in `deadline.rs`).

use async_trait::async_trait;
use tokio::sync::oneshot;
use wow_core::deadline::{check_deadline_name, DeadlineBacklog, DeadlineStore, ScheduledCommand};
use wow_core::eventsourcing::EventStoreError;
use wow_core::AggregateId;

use rusqlite::params;

use crate::deadline::{decode, DeadlineWrite, BACKLOG, DUE, OF_OWNER};
use crate::error::{gone, store_error};
use crate::writer::WriteJob;
use crate::SqliteStore;

impl SqliteStore {
    /// Hands a deadline write to the writer and waits for its answer.
    async fn write_deadline(&self, write: DeadlineWrite) -> Result<bool, EventStoreError> {
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
#[async_trait]
impl DeadlineStore for SqliteStore {
    /// Fails with [`EventStoreError::Unavailable`] when the file cannot be read, and with
    /// [`EventStoreError::Internal`] when a stored row cannot be decoded.
    async fn due(&self, now: i64, limit: usize) -> Result<Vec<ScheduledCommand>, EventStoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.reads
            .read(move |connection| {
                let mut statement = connection.prepare_cached(DUE)?;
                let rows = statement.query_map(params![now, limit], decode)?;
                rows.collect()
            })
            .await
            .map_err(store_error)
    }

    /// Fails with [`EventStoreError::Unavailable`] when the writer has stopped or the file
    /// cannot be written.
    async fn fired(
        &self,
        owner: &AggregateId,
        name: &str,
        request_id: &str,
    ) -> Result<bool, EventStoreError> {
        self.write_deadline(DeadlineWrite::Delete {
            owner: owner.clone(),
            name: name.to_owned(),
            request_id: Some(request_id.to_owned()),
        })
        .await
    }

    /// Fails as [`due`](Self::due) does.
    async fn scheduled_for(
        &self,
        owner: &AggregateId,
    ) -> Result<Vec<ScheduledCommand>, EventStoreError> {
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
    }

    /// Fails as [`due`](Self::due) does.
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
