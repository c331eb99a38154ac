//! The writer's work: what the store's modules send to the writer thread, and where each
//! job's outcome goes. Apart from the writer, so that the tables' modules and the writer both
//! depend on it and not on each other.

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};
use wow_core::deadline::ScheduledCommand;
use wow_core::event::{ProcessError, Processed};
use wow_core::eventsourcing::{
    AppendChanges, BoxError, EventStoreError, RejectedStream, RejectionRecord, Snapshot,
    SnapshotStoreError,
};
use wow_core::AggregateId;

use crate::store::stream_row::StreamRow;

/// Work for the writer, with where to send its outcome.
#[derive(Debug)]
pub(crate) enum WriteJob {
    Append {
        row: Box<StreamRow>,
        rejected: Box<RejectedStream>,
        /// The aggregate's key changes (SPEC DM-1) and deadline changes (SPEC DM-2), made
        /// with the stream or not at all; `None` for a plain append, which then takes the
        /// path without a savepoint.
        changes: Option<Box<AppendChanges>>,
        reply: oneshot::Sender<Result<(), EventStoreError>>,
    },
    /// A rejection of `request_id` to record (SPEC ID-6).
    Reject {
        rejection: Box<Rejection>,
        reply: oneshot::Sender<Result<(), EventStoreError>>,
    },
    /// A deadline row written, changed or deleted outside an append (SPEC DM-2): what
    /// `deadline::write` answers.
    Deadline {
        write: DeadlineWrite,
        reply: oneshot::Sender<Result<u64, EventStoreError>>,
    },
    SaveSnapshot {
        snapshot: Snapshot,
        state: String,
        reply: oneshot::Sender<Result<bool, SnapshotStoreError>>,
    },
    /// A consumer's work, with its processed-message record when it has one.
    Work {
        record: Option<(String, String, i64)>,
        /// Whether the work runs in a savepoint of its own (one with a record, or more than
        /// one statement, does); one statement without a record is atomic by itself.
        savepoint: bool,
        work: Option<WorkFn>,
        reply: oneshot::Sender<Result<Processed, ProcessError>>,
    },
}

/// A rejection of a request id on an aggregate.
#[derive(Debug)]
pub(crate) struct Rejection {
    pub(crate) aggregate_id: AggregateId,
    pub(crate) request_id: String,
    pub(crate) record: RejectionRecord,
}

/// A consumer's writes, run on the writer's connection inside its transaction.
pub(crate) type Work = Box<dyn FnOnce(&Connection) -> Result<(), BoxError> + Send>;

/// A [`Work`] that can be printed (as a placeholder).
pub(crate) struct WorkFn(pub(crate) Work);

impl std::fmt::Debug for WorkFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkFn(..)")
    }
}

/// Sends jobs to the writer thread.
pub(crate) type WriterHandle = mpsc::Sender<WriteJob>;

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
    /// One failed firing more of the owner's row `name` carrying `request_id`, due again at
    /// `fire_at`.
    Retry {
        owner: AggregateId,
        name: String,
        request_id: String,
        fire_at: i64,
    },
    /// Makes the owner's row `name` due at `fire_at`.
    FireAt {
        owner: AggregateId,
        name: String,
        fire_at: i64,
    },
    /// Deletes every row named `name` in `tenant`.
    DeleteNamed { tenant: String, name: String },
}
