//! The one writer: a thread that owns the write connection and commits queued writes
//! together (group commit).
//!
//! Each append is one `INSERT` of one row, so it is atomic by itself: on a constraint
//! violation SQLite backs out that statement alone and the transaction stays open (its
//! default `ABORT` resolution works as a savepoint around each statement). So one conflicting
//! stream fails alone and the rest of its batch commits, at no extra statement per append.
//! A recorded rejection (SPEC ID-6) is one `INSERT` of one row into the same table, sharing
//! the request-id constraint with the streams, and commits in the same batches.
//! An append that changes more than its history (unique keys, SPEC DM-1; deadlines, SPEC
//! DM-2) runs its insert and those changes in a savepoint of their own, so a refusal of any
//! part backs out all of them; a plain append takes no savepoint. A deadline written or
//! deleted outside an append (a saga's schedule, a cancel, a fired row) is one statement.
//! Replies are sent only after `COMMIT` returned, that is once the batch is durable under
//! `synchronous=FULL`.
//!
//! The thread ends when every [`WriterHandle`] is dropped and the queue is drained.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::mpsc;
use wow_core::event::{ProcessError, Processed};
use wow_core::eventsourcing::AppendChanges;
use wow_core::eventsourcing::{
    BoxError, ConditionFailed, EventStoreError, RejectedStream, SnapshotStoreError,
};

use crate::error::{snapshot_error, store_error};
use crate::store::deadline;
use crate::store::event_stream::{failed_condition, insert_stream};
use crate::store::processed_message;
use crate::store::request_decision::{holds_request, insert_rejection};
use crate::store::snapshot::save_snapshot;
use crate::store::stream_row::StreamRow;
use crate::store::unique_key::{change_keys, KeysRefused};
use crate::write_job::{Work, WriteJob, WriterHandle};

/// Counts of the writer's work, for monitoring and benchmarks.
#[derive(Debug, Default)]
pub(crate) struct WriterStats {
    pub(crate) transactions: AtomicU64,
    pub(crate) writes: AtomicU64,
}

/// Opens a batch's transaction, taking the write lock at once.
const BEGIN: &str = "BEGIN IMMEDIATE";

/// Commits a batch's transaction.
const COMMIT: &str = "COMMIT";

/// Rolls back a batch's transaction whose commit failed.
const ROLLBACK: &str = "ROLLBACK";

/// Opens the savepoint of an append with changes.
const SAVEPOINT_CHANGES: &str = "SAVEPOINT wow_changes";

/// Backs an append with changes out to its savepoint.
const UNDO_CHANGES: &str = "ROLLBACK TO wow_changes";

/// Ends the savepoint of an append with changes, keeping what it wrote.
const RELEASE_CHANGES: &str = "RELEASE wow_changes";

/// Opens the savepoint of a consumer's work.
const SAVEPOINT_WORK: &str = "SAVEPOINT wow_work";

/// Backs a consumer's work and its record out, and ends its savepoint.
const UNDO_WORK: &str = "ROLLBACK TO wow_work; RELEASE wow_work";

/// Ends the savepoint of a consumer's work, keeping its writes and its record.
const RELEASE_WORK: &str = "RELEASE wow_work";

/// Starts the writer thread on `connection`; it commits up to `max_batch` jobs at a time.
pub(crate) fn spawn(
    connection: Connection,
    max_batch: usize,
    commit_delay: Duration,
    stats: Arc<WriterStats>,
) -> std::io::Result<WriterHandle> {
    let (sender, receiver) = mpsc::channel(max_batch.saturating_mul(4).max(64));
    std::thread::Builder::new()
        .name("wow-sqlite-writer".to_owned())
        .spawn(move || run(connection, receiver, max_batch, commit_delay, &stats))?;
    Ok(sender)
}

/// How often the writer looks for stragglers while it waits out its commit delay.
const COMMIT_DELAY_STEP: Duration = Duration::from_micros(30);

fn run(
    connection: Connection,
    mut receiver: mpsc::Receiver<WriteJob>,
    max_batch: usize,
    commit_delay: Duration,
    stats: &WriterStats,
) {
    let mut batch = Vec::with_capacity(max_batch);
    // The sizes of recent batches: about how many writers are appending at once.
    let mut recent = [0usize; 8];
    let mut turn = 0;
    while let Some(first) = receiver.blocking_recv() {
        batch.push(first);
        drain(&mut receiver, &mut batch, max_batch);
        // Like PostgreSQL's commit_delay: when fewer writes are queued than recent batches
        // held, the other writers are most likely between two appends. Waiting a fraction of
        // one fsync for them fills the batch, and one fsync then serves them all. A lone
        // writer never waits.
        let expected = recent.iter().copied().max().unwrap_or(0).min(max_batch);
        let deadline = Instant::now() + commit_delay;
        while batch.len() < expected && Instant::now() < deadline {
            std::thread::sleep(COMMIT_DELAY_STEP);
            drain(&mut receiver, &mut batch, max_batch);
        }
        recent[turn % recent.len()] = batch.len();
        turn += 1;
        stats.transactions.fetch_add(1, Ordering::Relaxed);
        stats
            .writes
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        commit(&connection, &mut batch);
    }
    tracing::debug!("SQLite writer stopped");
}

fn drain(receiver: &mut mpsc::Receiver<WriteJob>, batch: &mut Vec<WriteJob>, max_batch: usize) {
    while batch.len() < max_batch {
        match receiver.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
}

/// What one job came to inside the transaction, before the commit decides.
enum Outcome {
    Appended,
    Rejected,
    Conflict(EventStoreError),
    Saved(bool),
    /// A deadline write outside an append: what [`deadline::write`] answered.
    Deadline(u64),
    Worked(Processed),
    /// The work failed: its error as it came, so that the consumer can tell what it was.
    WorkFailed(BoxError),
    Failed(rusqlite::Error),
}

fn commit(connection: &Connection, batch: &mut Vec<WriteJob>) {
    if let Err(error) = connection.execute_batch(BEGIN) {
        let message = error.to_string();
        for job in batch.drain(..) {
            reply_failed(job, &message, &error);
        }
        return;
    }
    let mut outcomes = Vec::with_capacity(batch.len());
    for job in batch.iter_mut() {
        let outcome = apply(connection, job);
        // Some errors (a full disk, I/O) make SQLite roll the whole transaction back; then
        // nothing of the batch is written, and nothing may be reported as written.
        if let Outcome::Failed(error) = &outcome {
            if connection.is_autocommit() {
                tracing::error!(%error, "the transaction was rolled back; every write of the batch fails");
                let message = error.to_string();
                for job in batch.drain(..) {
                    reply_failed(job, &message, error);
                }
                return;
            }
        }
        outcomes.push(outcome);
    }
    match connection.execute_batch(COMMIT) {
        Ok(()) => {
            for (job, outcome) in batch.drain(..).zip(outcomes) {
                reply(job, outcome);
            }
        }
        Err(error) => {
            tracing::error!(%error, "group commit failed; every write of the batch fails");
            let _ = connection.execute_batch(ROLLBACK);
            let message = error.to_string();
            for job in batch.drain(..) {
                reply_failed(job, &message, &error);
            }
        }
    }
}

fn apply(connection: &Connection, job: &mut WriteJob) -> Outcome {
    match job {
        WriteJob::Work {
            record: None,
            savepoint: false,
            work,
            ..
        } => match work.take() {
            Some(work) => run_statement(connection, work.0),
            None => Outcome::WorkFailed("the work ran already".into()),
        },
        WriteJob::Work { record, work, .. } => match work.take() {
            Some(work) => run_work(connection, record.as_ref(), work.0),
            None => Outcome::WorkFailed("the work ran already".into()),
        },
        WriteJob::Append {
            row,
            rejected,
            changes: Some(changes),
            ..
        } => append_with(connection, row, rejected, changes),
        WriteJob::Append { row, rejected, .. } => match insert_stream(connection, row) {
            Ok(()) => Outcome::Appended,
            Err(error) => match classify(connection, row, rejected, &error) {
                Some(conflict) => Outcome::Conflict(conflict),
                None => Outcome::Failed(error),
            },
        },
        WriteJob::Reject { rejection, .. } => match insert_rejection(connection, rejection) {
            Ok(()) => Outcome::Rejected,
            Err(error) if violated(&error) == Some(Violated::RequestId) => {
                Outcome::Conflict(EventStoreError::request_decided(
                    &rejection.aggregate_id,
                    &rejection.request_id,
                    &rejection.record,
                ))
            }
            Err(error) => Outcome::Failed(error),
        },
        WriteJob::Deadline { write, .. } => match deadline::write(connection, write) {
            Ok(changed) => Outcome::Deadline(changed),
            Err(error) => Outcome::Failed(error),
        },
        WriteJob::SaveSnapshot {
            snapshot, state, ..
        } => match save_snapshot(connection, snapshot, state) {
            Ok(stored) => Outcome::Saved(stored),
            Err(error) => Outcome::Failed(error),
        },
    }
}

/// Inserts the stream and makes its key changes (SPEC DM-1), then its deadline changes (SPEC
/// DM-2), in one savepoint: a conflict of the stream, a key another aggregate holds or a
/// failure rolls back all of them, so a refused append leaves neither a key nor a deadline
/// row, and the rest of the batch goes on.
fn append_with(
    connection: &Connection,
    row: &StreamRow,
    rejected: &RejectedStream,
    changes: &AppendChanges,
) -> Outcome {
    // Cached statements: this runs once per append that changes a key or a deadline.
    let run = |sql: &str| {
        connection
            .prepare_cached(sql)
            .and_then(|mut s| s.execute([]))
    };
    if let Err(error) = run(SAVEPOINT_CHANGES) {
        return Outcome::Failed(error);
    }
    let undo = |outcome: Outcome| match run(UNDO_CHANGES).and_then(|_| run(RELEASE_CHANGES)) {
        Ok(_) => outcome,
        Err(error) => Outcome::Failed(error),
    };
    if let Err(error) = insert_stream(connection, row) {
        return undo(match classify(connection, row, rejected, &error) {
            Some(conflict) => Outcome::Conflict(conflict),
            None => Outcome::Failed(error),
        });
    }
    match failed_condition(connection, &changes.conditions) {
        Ok(None) => {}
        Ok(Some((condition, actual))) => {
            return undo(Outcome::Conflict(EventStoreError::ConditionFailed(
                Box::new(ConditionFailed {
                    stream: rejected.clone(),
                    condition: condition.clone(),
                    actual,
                }),
            )))
        }
        Err(error) => return undo(Outcome::Failed(error)),
    }
    match change_keys(connection, rejected, &changes.keys) {
        Ok(()) => {}
        Err(KeysRefused::Taken(taken)) => return undo(Outcome::Conflict(taken)),
        Err(KeysRefused::Failed(error)) => return undo(Outcome::Failed(error)),
    }
    if let Err(error) = deadline::change(connection, &rejected.aggregate_id, &changes.deadlines) {
        return undo(Outcome::Failed(error));
    }
    match run(RELEASE_CHANGES) {
        Ok(_) => Outcome::Appended,
        Err(error) => Outcome::Failed(error),
    }
}

/// Runs `work` in a savepoint, after writing its record: a record already there means the
/// message was processed (the work does not run); a failing or panicking work rolls back its
/// writes and the record, and the rest of the batch goes on.
fn run_work(
    connection: &Connection,
    record: Option<&(String, String, i64)>,
    work: Work,
) -> Outcome {
    // Prepared once per connection: a batch of consumers' work runs these two per job.
    let opened = connection
        .prepare_cached(SAVEPOINT_WORK)
        .and_then(|mut statement| statement.execute([]));
    if let Err(error) = opened {
        return Outcome::Failed(error);
    }
    let undo = |outcome: Outcome| match connection.execute_batch(UNDO_WORK) {
        Ok(()) => outcome,
        Err(error) => Outcome::Failed(error),
    };
    if let Some((consumer, message_id, processed_time)) = record {
        let recorded = processed_message::record(connection, consumer, message_id, *processed_time);
        match recorded {
            Ok(_) => {}
            Err(rusqlite::Error::SqliteFailure(failure, _))
                if failure.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                return undo(Outcome::Worked(Processed::AlreadyProcessed))
            }
            Err(error) => return undo(Outcome::Failed(error)),
        }
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(connection))) {
        Ok(Ok(())) => match connection
            .prepare_cached(RELEASE_WORK)
            .and_then(|mut statement| statement.execute([]))
        {
            Ok(_) => Outcome::Worked(Processed::Applied),
            Err(error) => Outcome::Failed(error),
        },
        Ok(Err(error)) => undo(Outcome::WorkFailed(error)),
        Err(_) => undo(Outcome::WorkFailed("the work panicked".into())),
    }
}

/// Runs `work`, one statement and no record, without a savepoint: a failing statement is
/// backed out alone by SQLite (as an append's insert is), so the rest of the batch goes on.
/// An error that rolled the whole transaction back is reported as the batch's failure.
fn run_statement(connection: &Connection, work: Work) -> Outcome {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(connection))) {
        Ok(Ok(())) => Outcome::Worked(Processed::Applied),
        Ok(Err(error)) if connection.is_autocommit() => match error.downcast::<rusqlite::Error>() {
            Ok(error) => Outcome::Failed(*error),
            Err(error) => Outcome::WorkFailed(error),
        },
        Ok(Err(error)) => Outcome::WorkFailed(error),
        Err(_) => Outcome::WorkFailed("the work panicked".into()),
    }
}

/// Which unique constraint a failed insert broke, by the column list SQLite names (SQLite
/// reports no constraint names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Violated {
    Version,
    RequestId,
}

/// Which unique index of `event_stream` `error` broke, if it broke one.
pub(crate) fn violated(error: &rusqlite::Error) -> Option<Violated> {
    let rusqlite::Error::SqliteFailure(failure, Some(message)) = error else {
        return None;
    };
    if failure.code != rusqlite::ErrorCode::ConstraintViolation {
        return None;
    }
    let columns = message.strip_prefix("UNIQUE constraint failed: ")?;
    match columns {
        "event_stream.tenant_id, event_stream.aggregate_name, event_stream.aggregate_id, event_stream.version" => {
            Some(Violated::Version)
        }
        "event_stream.tenant_id, event_stream.aggregate_name, event_stream.aggregate_id, event_stream.request_id" => {
            Some(Violated::RequestId)
        }
        _ => None,
    }
}

/// The typed conflict of a failed insert, decided in the same transaction: a request id the
/// aggregate holds wins over a taken version (SPEC ES-4), whichever index SQLite checked
/// first.
fn classify(
    connection: &Connection,
    row: &StreamRow,
    rejected: &RejectedStream,
    error: &rusqlite::Error,
) -> Option<EventStoreError> {
    let boxed = || Box::new(rejected.clone());
    match violated(error)? {
        Violated::RequestId => Some(EventStoreError::DuplicateRequestId(boxed())),
        Violated::Version => Some(if holds_request(connection, row).unwrap_or(false) {
            EventStoreError::DuplicateRequestId(boxed())
        } else if row.version == 1 {
            EventStoreError::DuplicateAggregateId(boxed())
        } else {
            EventStoreError::EventVersionConflict(boxed())
        }),
    }
}

fn reply(job: WriteJob, outcome: Outcome) {
    // A caller that went away no longer needs its answer; the write stands.
    match (job, outcome) {
        (WriteJob::Append { reply, .. }, Outcome::Appended) => {
            let _ = reply.send(Ok(()));
        }
        (WriteJob::Append { reply, .. }, Outcome::Conflict(conflict)) => {
            let _ = reply.send(Err(conflict));
        }
        (WriteJob::Append { reply, .. }, Outcome::Failed(error)) => {
            let _ = reply.send(Err(store_error(error)));
        }
        (WriteJob::Reject { reply, .. }, Outcome::Rejected) => {
            let _ = reply.send(Ok(()));
        }
        (WriteJob::Reject { reply, .. }, Outcome::Conflict(conflict)) => {
            let _ = reply.send(Err(conflict));
        }
        (WriteJob::Reject { reply, .. }, Outcome::Failed(error)) => {
            let _ = reply.send(Err(store_error(error)));
        }
        (WriteJob::Deadline { reply, .. }, Outcome::Deadline(changed)) => {
            let _ = reply.send(Ok(changed));
        }
        (WriteJob::Deadline { reply, .. }, Outcome::Failed(error)) => {
            let _ = reply.send(Err(store_error(error)));
        }
        (WriteJob::SaveSnapshot { reply, .. }, Outcome::Saved(stored)) => {
            let _ = reply.send(Ok(stored));
        }
        (WriteJob::SaveSnapshot { reply, .. }, Outcome::Failed(error)) => {
            let _ = reply.send(Err(snapshot_error(error)));
        }
        (WriteJob::Work { reply, .. }, Outcome::Worked(processed)) => {
            let _ = reply.send(Ok(processed));
        }
        (WriteJob::Work { reply, .. }, Outcome::WorkFailed(error)) => {
            let _ = reply.send(Err(ProcessError::Work(error)));
        }
        (WriteJob::Work { reply, .. }, Outcome::Failed(error)) => {
            let _ = reply.send(Err(ProcessError::Store(Box::new(error))));
        }
        (job, _) => tracing::error!(?job, "writer outcome does not match its job"),
    }
}

fn reply_failed(job: WriteJob, message: &str, error: &rusqlite::Error) {
    let unavailable = matches!(
        error.sqlite_error_code(),
        Some(
            rusqlite::ErrorCode::DatabaseBusy
                | rusqlite::ErrorCode::DatabaseLocked
                | rusqlite::ErrorCode::SystemIoFailure
                | rusqlite::ErrorCode::DiskFull
        )
    );
    match job {
        WriteJob::Append { reply, .. } | WriteJob::Reject { reply, .. } => {
            let _ = reply.send(Err(history_failed(unavailable, message)));
        }
        WriteJob::Deadline { reply, .. } => {
            let _ = reply.send(Err(history_failed(unavailable, message)));
        }
        WriteJob::Work { reply, .. } => {
            let _ = reply.send(Err(ProcessError::Store(message.to_owned().into())));
        }
        WriteJob::SaveSnapshot { reply, .. } => {
            let error = if unavailable {
                SnapshotStoreError::Unavailable(message.to_owned().into())
            } else {
                SnapshotStoreError::Internal(message.to_owned().into())
            };
            let _ = reply.send(Err(error));
        }
    }
}

/// A failed batch as the event store's error: retryable or not.
fn history_failed(unavailable: bool, message: &str) -> EventStoreError {
    if unavailable {
        EventStoreError::Unavailable(message.to_owned().into())
    } else {
        EventStoreError::Internal(message.to_owned().into())
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::params;

    use super::*;
    use crate::write_job::WorkFn;

    fn insert_row(
        connection: &Connection,
        version: i64,
        request_id: &str,
    ) -> rusqlite::Result<usize> {
        connection.execute(
            "INSERT INTO event_stream (aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body) VALUES ('a', '1', ?1, 'c', 't', 's', ?2, 'c', 'f', 0, '{}', '[]')",
            params![version, request_id],
        )
    }

    #[test]
    fn maps_each_unique_constraint_by_its_column_list() {
        let mut connection = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut connection).unwrap();
        insert_row(&connection, 1, "r-1").unwrap();
        let version_taken = insert_row(&connection, 1, "r-2").unwrap_err();
        assert_eq!(
            violated(&version_taken),
            Some(Violated::Version),
            "{version_taken}"
        );
        let request_taken = insert_row(&connection, 2, "r-1").unwrap_err();
        assert_eq!(
            violated(&request_taken),
            Some(Violated::RequestId),
            "{request_taken}"
        );
        let other = connection
            .execute("INSERT INTO nowhere VALUES (1)", [])
            .unwrap_err();
        assert_eq!(violated(&other), None);
    }

    #[test]
    fn a_statement_without_a_savepoint_fails_alone_and_the_batch_commits() {
        let mut connection = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut connection).unwrap();
        let statement = |version: i64, request_id: &'static str| -> WriteJob {
            let (reply, _answer) = tokio::sync::oneshot::channel();
            WriteJob::Work {
                record: None,
                savepoint: false,
                work: Some(WorkFn(Box::new(move |connection: &Connection| {
                    insert_row(connection, version, request_id)?;
                    Ok(())
                }))),
                reply,
            }
        };
        // The second conflicts with the first (same version); the third goes on.
        let mut batch = [
            statement(1, "r-1"),
            statement(1, "r-2"),
            statement(2, "r-3"),
        ];
        connection.execute_batch(BEGIN).unwrap();
        let outcomes: Vec<_> = batch
            .iter_mut()
            .map(|job| apply(&connection, job))
            .collect();
        assert!(matches!(outcomes[0], Outcome::Worked(Processed::Applied)));
        assert!(matches!(outcomes[1], Outcome::WorkFailed(_)));
        assert!(matches!(outcomes[2], Outcome::Worked(Processed::Applied)));
        assert!(!connection.is_autocommit(), "the transaction is still open");
        connection.execute_batch(COMMIT).unwrap();
        let requests: Vec<String> = connection
            .prepare("SELECT request_id FROM event_stream ORDER BY version")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(requests, ["r-1", "r-3"]);
    }
}
