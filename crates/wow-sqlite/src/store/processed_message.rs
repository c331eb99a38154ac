//! Table `processed_message`: which messages each consumer has run, so that a redelivered
//! message runs once (SPEC DS-2).
//!
//! Why the record is written first, in the savepoint of the consumer's work on the writer's
//! connection ([`SqliteStore::process_once`](crate::SqliteStore::process_once)): a record
//! already there means the message ran, and its work does not run again; a failing work
//! rolls the record back with its writes, so the message runs again on its next delivery.

use rusqlite::{params, Connection};

/// Records that consumer `?1` ran message `?2` at `?3` (epoch milliseconds); a record already
/// there breaks the primary key.
const RECORD_PROCESSED: &str =
    "INSERT INTO processed_message (consumer, message_id, processed_time) VALUES (?1, ?2, ?3)";

/// Forgets every message consumer `?1` ran, so that all of them run again.
pub(crate) const FORGET_CONSUMER: &str = "DELETE FROM processed_message WHERE consumer = ?1";

/// Records ([`RECORD_PROCESSED`]) on the writer's connection that `consumer` ran
/// `message_id` at `processed_time`: a constraint violation when it had already.
pub(crate) fn record(
    connection: &Connection,
    consumer: &str,
    message_id: &str,
    processed_time: i64,
) -> rusqlite::Result<usize> {
    connection
        .prepare_cached(RECORD_PROCESSED)
        .and_then(|mut statement| statement.execute(params![consumer, message_id, processed_time]))
}
