//! Table `feed_cursor`: where each reader of the global feed got to, as the feed orders
//! positions (transaction id, then position).
//!
//! A save never moves a cursor back (the `WHERE` of its upsert), so a save that lands late,
//! after one further on, loses nothing.

use wow_core::event::ConsumerStoreError;
use wow_core::eventsourcing::GlobalPosition;

use crate::error::consumer_store_error as db_error;
use crate::PostgresStore;

/// The cursor of reader `$1`: (transaction id, position), if it saved one.
const LOAD_CURSOR: &str = "SELECT txn, sequence FROM feed_cursor WHERE reader = $1";

/// Saves (`$2` transaction id, `$3` position) as reader `$1`'s cursor, unless its cursor is
/// at or past it.
const SAVE_CURSOR: &str = "INSERT INTO feed_cursor (reader, txn, sequence) VALUES ($1, $2, $3)
                 ON CONFLICT (reader) DO UPDATE SET txn = excluded.txn, sequence = excluded.sequence
                 WHERE (feed_cursor.txn, feed_cursor.sequence) < (excluded.txn, excluded.sequence)";

/// Where `reader` got to: the start of the feed when it saved nothing.
pub(super) async fn load(
    store: &PostgresStore,
    reader: &str,
) -> Result<GlobalPosition, ConsumerStoreError> {
    let client = store.downstream_client().await?;
    let row = client
        .query_opt(LOAD_CURSOR, &[&reader])
        .await
        .map_err(db_error)?;
    let part = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(row.map_or(GlobalPosition::START, |row| {
        GlobalPosition::new(part(row.get(0)), part(row.get(1)))
    }))
}

/// Moves `reader`'s cursor to `position`, never back. A position out of the database's
/// range is [`ConsumerStoreError::Internal`], and nothing is written.
pub(super) async fn save(
    store: &PostgresStore,
    reader: &str,
    position: GlobalPosition,
) -> Result<(), ConsumerStoreError> {
    let part = |n: u64| {
        i64::try_from(n).map_err(|_| {
            ConsumerStoreError::Internal(format!("feed position {position} is out of range").into())
        })
    };
    let (txn, sequence) = (part(position.transaction)?, part(position.sequence)?);
    let client = store.downstream_client().await?;
    client
        .execute(SAVE_CURSOR, &[&reader, &txn, &sequence])
        .await
        .map_err(db_error)?;
    Ok(())
}
