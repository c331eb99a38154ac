//! Table `feed_cursor`: where each reader of the global feed got to, as the feed orders
//! positions (transaction part, then sequence).
//!
//! A save never moves a cursor back (the `WHERE` of its upsert), so a save that lands late,
//! after one further on, loses nothing.

use rusqlite::{params, OptionalExtension};
use wow_core::event::ConsumerStoreError;
use wow_core::eventsourcing::GlobalPosition;

use crate::SqliteStore;

/// The cursor of reader `?1`: (transaction part, sequence), if it saved one.
const LOAD_CURSOR: &str = "SELECT txn, sequence FROM feed_cursor WHERE reader = ?1";

/// Saves (`?2` transaction part, `?3` sequence) as reader `?1`'s cursor, unless its cursor
/// is at or past it.
const SAVE_CURSOR: &str = "INSERT INTO feed_cursor (reader, txn, sequence) VALUES (?1, ?2, ?3)
    ON CONFLICT (reader) DO UPDATE SET txn = excluded.txn, sequence = excluded.sequence
    WHERE (feed_cursor.txn, feed_cursor.sequence) < (excluded.txn, excluded.sequence)";

/// A feed position as two integers SQLite stores.
fn feed_parts(position: GlobalPosition) -> Result<(i64, i64), ConsumerStoreError> {
    let part = |n: u64| {
        i64::try_from(n).map_err(|_| {
            ConsumerStoreError::Internal(format!("feed position {position} is out of range").into())
        })
    };
    Ok((part(position.transaction)?, part(position.sequence)?))
}

/// Where `reader` got to, read on the read pool: the start of the feed when it saved
/// nothing.
pub(super) async fn load(
    store: &SqliteStore,
    reader: &str,
) -> Result<GlobalPosition, ConsumerStoreError> {
    let reader = reader.to_owned();
    store
        .read_rows(move |connection| {
            connection
                .prepare_cached(LOAD_CURSOR)?
                .query_row([reader], |row| {
                    let part = |n: i64| u64::try_from(n).unwrap_or(0);
                    Ok(GlobalPosition::new(part(row.get(0)?), part(row.get(1)?)))
                })
                .optional()
                .map(Option::unwrap_or_default)
        })
        .await
}

/// Moves `reader`'s cursor to `position`, never back, in the writer's transaction. A
/// position out of SQLite's range is [`ConsumerStoreError::Internal`], and nothing is
/// written.
pub(super) async fn save(
    store: &SqliteStore,
    reader: &str,
    position: GlobalPosition,
) -> Result<(), ConsumerStoreError> {
    let reader = reader.to_owned();
    let (txn, sequence) = feed_parts(position)?;
    store
        .write(move |connection| {
            connection
                .prepare_cached(SAVE_CURSOR)?
                .execute(params![reader, txn, sequence])?;
            Ok(())
        })
        .await
}
