//! The global feed over `event_stream`: every appended stream, in an order that never skips
//! one that commits late.
//!
//! [`EventFeed::read_feed`](wow_core::eventsourcing::EventFeed::read_feed) lists appended streams in `(txid, position)` order: the
//! appending transaction's id (`xid8`, column `txid`), then the `BIGSERIAL` position its row
//! took. A position alone is not a safe resume point: sequence values are handed out at
//! insert time and never rolled back, so a transaction that took position 10 may commit after
//! one that took 11, and a reader that read 11 and moved on would never see 10.
//!
//! So the feed reads only rows whose `txid` is below the xmin of the reading statement's
//! snapshot (`pg_snapshot_xmin(pg_current_snapshot())`), the oldest transaction id still in
//! flight. Why that is gap-free: every transaction with an id below xmin has ended (committed,
//! so its rows are visible in the same snapshot, or aborted, so they never will be), and every
//! transaction that can still commit rows is in flight (its id is at least xmin) or has no id
//! yet (it will take one above every id handed out so far). Rows that appear later therefore
//! all sort at or after `(xmin, 0)`, after everything a read returned: the prefix of the feed
//! below xmin never grows in the middle. Within one transaction, rows keep position order.
//!
//! The cost: **any transaction in the database cluster that holds an xid holds the feed
//! back** (xids are cluster-wide), not only appends. A session left `idle in transaction`
//! after a write, a long batch job, or a forgotten prepared transaction stops the feed at its
//! xid until it ends; appends still succeed and are read as soon as it does. Nothing is lost,
//! the feed is only late. To see who holds it:
//!
//! ```sql
//! SELECT pid, backend_xid, xact_start, state, left(query, 60)
//!   FROM pg_stat_activity WHERE backend_xid IS NOT NULL ORDER BY xact_start;
//! SELECT gid, transaction, prepared FROM pg_prepared_xacts;
//! SELECT pg_snapshot_xmin(pg_current_snapshot());  -- the feed's current bound
//! ```
//!
//! `idle_in_transaction_session_timeout` bounds the first kind. Read-only transactions take no
//! xid and hold nothing back. Recorded rejections (negative versions) are not streams and are
//! not in the feed, nor in its index `event_stream_feed`.

use async_trait::async_trait;
use tokio_postgres::Row;
use wow_core::eventsourcing::{EventFeed, EventStoreError, FeedEntry, GlobalPosition};

use super::stream_row::{corrupt, decode_stream, stream_columns};
use super::{clamp, PostgresStore};
use crate::error::store_error;

/// Appended streams after `($1, $2)` in `(txid, position)` order, at most `$3`, below the
/// oldest transaction in flight (see the module docs), along the partial index
/// `event_stream_feed`. The `xid8` travels as text both ways: `tokio-postgres` has no Rust
/// type for it. The text is named `feed_txid`, never `txid`: `ORDER BY txid` would take an
/// output column of that name first and sort transaction ids as text ("10" before "9").
const READ_FEED: &str = concat!(
    "SELECT ",
    stream_columns!(),
    ", txid::TEXT AS feed_txid, position FROM event_stream
    WHERE (txid, position) > ($1::TEXT::XID8, $2) AND version > 0
      AND txid < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY txid, position LIMIT $3"
);

/// At most `limit` appended streams after `after`, in feed order; none for a `limit` of 0.
pub(super) async fn read(
    store: &PostgresStore,
    after: GlobalPosition,
    limit: usize,
) -> Result<Vec<FeedEntry>, EventStoreError> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let client = store.client().await?;
    let statement = client
        .prepare_cached(READ_FEED)
        .await
        .map_err(store_error)?;
    let rows = client
        .query(
            &statement,
            &[
                &after.transaction.to_string(),
                &clamp(after.sequence),
                &i64::try_from(limit).unwrap_or(i64::MAX),
            ],
        )
        .await
        .map_err(store_error)?;
    rows.iter().map(decode_feed_entry).collect()
}

/// Decodes a row of [`READ_FEED`].
fn decode_feed_entry(row: &Row) -> Result<FeedEntry, EventStoreError> {
    let txid: String = row.try_get(12).map_err(store_error)?;
    let transaction = txid.parse::<u64>().map_err(|_| {
        corrupt(format!(
            "a stream's transaction id `{txid}` is not a number"
        ))
    })?;
    let position: i64 = row.try_get(13).map_err(store_error)?;
    let sequence = u64::try_from(position)
        .map_err(|_| corrupt(format!("a stream has the negative position {position}")))?;
    Ok(FeedEntry {
        position: GlobalPosition::new(transaction, sequence),
        stream: decode_stream(row)?,
    })
}

#[async_trait]
impl EventFeed for PostgresStore {
    async fn read_feed(
        &self,
        after: GlobalPosition,
        limit: usize,
    ) -> Result<Vec<FeedEntry>, EventStoreError> {
        self.within(async { read(self, after, limit).await }).await
    }
}
