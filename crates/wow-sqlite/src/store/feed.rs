//! The global feed over `event_stream`: every appended stream, in commit order.
//!
//! The feed lists appended streams (versions from 1 up; a rejection row's is negative) after
//! a position, along the primary key. `position` is the rowid, chosen as `MAX + 1` under
//! SQLite's one write lock and committed before the next writer takes that lock, so position
//! order is commit order: a reader's snapshot never lacks a lower position that commits later.
//! (Positions taken by a transaction that rolled back are taken again by the next one; they
//! were never visible. No row of `event_stream` is ever deleted, so a committed position is
//! never reused.) The position is the feed's sequence; the transaction part is always 0.

use async_trait::async_trait;
use rusqlite::{params, Row};
use wow_core::eventsourcing::{EventFeed, EventStoreError, FeedEntry, GlobalPosition};

use super::stream_row::{decode_stream, stream_columns};
use super::{clamp, SqliteStore};
use crate::error::store_error;

/// The appended streams after position `?1`, in position order, at most `?2`: the columns of
/// [`stream_columns`], then the position.
const READ_FEED: &str = concat!(
    "SELECT ",
    stream_columns!(),
    ", position FROM event_stream WHERE position > ?1 AND version > 0 ORDER BY position LIMIT ?2"
);

/// Decodes a row of [`READ_FEED`].
fn decode_feed_entry(row: &Row<'_>) -> rusqlite::Result<FeedEntry> {
    let position = u64::try_from(row.get::<_, i64>(12)?).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(12, rusqlite::types::Type::Integer, Box::new(e))
    })?;
    Ok(FeedEntry {
        position: GlobalPosition::new(0, position),
        stream: decode_stream(row)?,
    })
}

#[async_trait]
impl EventFeed for SqliteStore {
    async fn read_feed(
        &self,
        after: GlobalPosition,
        limit: usize,
    ) -> Result<Vec<FeedEntry>, EventStoreError> {
        // Every position here is (0, rowid): nothing comes after a later transaction's.
        if after.transaction > 0 || limit == 0 {
            return Ok(Vec::new());
        }
        let (after, limit) = (
            clamp(after.sequence),
            i64::try_from(limit).unwrap_or(i64::MAX),
        );
        self.reads
            .read(move |connection| {
                let mut statement = connection.prepare_cached(READ_FEED)?;
                let rows = statement.query_map(params![after, limit], decode_feed_entry)?;
                rows.collect()
            })
            .await
            .map_err(store_error)
    }
}
