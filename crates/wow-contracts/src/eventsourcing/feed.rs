//! The global feed: every appended stream in the order of its store (docs/distributed.md).
//!
//! Each appended [`DomainEventStream`] has a [`GlobalPosition`] in its store, and
//! [`EventFeed::read_feed`] lists
//! streams of every tenant and aggregate in that order, after a position the reader kept. The
//! promise that makes a kept position safe to resume from: once a read returned a position,
//! no stream with a lower position ever appears (no gap is filled in later). A backend whose
//! positions can commit out of order (PostgreSQL's sequences) reads only below the oldest
//! transaction still in flight to keep it; see `wow-postgres`'s store docs for the cost.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::eventsourcing::EventStoreError;
use wow_model::event::DomainEventStream;

/// The store's global feed: every appended stream of every tenant and aggregate, in the
/// store's order, read page by page from a position a reader kept.
#[async_trait]
pub trait EventFeed: Send + Sync + std::fmt::Debug {
    /// Up to `limit` appended streams of every tenant and aggregate whose positions come
    /// after `after`, in [`GlobalPosition`] order: the store's global feed (docs/distributed.md).
    /// Pass the last entry's position to get the next page; [`GlobalPosition::START`] reads
    /// from the first stream. `limit` 0 reads nothing.
    ///
    /// The promise a reader resumes on: **no gap is filled in later.** When a read after `a`
    /// returns entries up to position `p`, they are all the streams the store will ever hold
    /// between `a` and `p`: no stream with a lower position appears after a reader has moved
    /// past it, so a reader that resumes after the last position it handled skips nothing.
    /// To keep it, a store whose positions can commit out of order (PostgreSQL) holds back
    /// streams behind a transaction still in flight: an acknowledged append appears once
    /// every transaction with an older transaction id, anywhere in that database server,
    /// has ended, so not always at once. Recorded rejections (SPEC
    /// ID-6) are decisions, not streams, and never appear. Each stream appears once, whole,
    /// as [`History::load`](crate::eventsourcing::History::load) returns it.
    ///
    /// Fails with [`EventStoreError::Unavailable`] when the store cannot be reached and
    /// [`EventStoreError::Internal`] when a stored row cannot be read; nothing is consumed
    /// either way, so the same read may be retried.
    async fn read_feed(
        &self,
        after: GlobalPosition,
        limit: usize,
    ) -> Result<Vec<FeedEntry>, EventStoreError>;
}

/// Where a stream stands in its store's global order: `(transaction, sequence)`, compared
/// lexicographically.
///
/// On PostgreSQL `transaction` is the appending transaction's id (`xid8`) and `sequence` the
/// row's `position`; on SQLite and in memory `transaction` is 0 and `sequence` the append
/// order. A position means something only in the store that gave it. Written and parsed as
/// `"transaction.sequence"` (see [`Display`](fmt::Display) and [`FromStr`]), e.g. for a
/// configuration file or a command line.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct GlobalPosition {
    /// The store's transaction order; compared first.
    pub transaction: u64,
    /// The order within one transaction value; compared second.
    pub sequence: u64,
}

impl GlobalPosition {
    /// Before every stream of every store: read the feed after it to start from the first.
    pub const START: GlobalPosition = GlobalPosition {
        transaction: 0,
        sequence: 0,
    };

    /// The position `(transaction, sequence)`.
    pub const fn new(transaction: u64, sequence: u64) -> Self {
        Self {
            transaction,
            sequence,
        }
    }
}

impl fmt::Display for GlobalPosition {
    /// `"transaction.sequence"`, which [`FromStr`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.transaction, self.sequence)
    }
}

/// A text that is not `"transaction.sequence"` with two unsigned 64-bit decimals.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a global position (expected `transaction.sequence`, e.g. `0.42`)")]
pub struct ParseGlobalPositionError(String);

impl FromStr for GlobalPosition {
    type Err = ParseGlobalPositionError;

    /// Reads `"transaction.sequence"`, as [`Display`](fmt::Display) writes it; anything else
    /// (a missing part, a sign, a value past `u64::MAX`) is an error.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || ParseGlobalPositionError(text.to_owned());
        let (transaction, sequence) = text.split_once('.').ok_or_else(error)?;
        let part = |part: &str| {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(error());
            }
            part.parse::<u64>().map_err(|_| error())
        };
        Ok(Self::new(part(transaction)?, part(sequence)?))
    }
}

/// One appended stream of the feed and its position in its store.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedEntry {
    /// The stream's position; read the feed after it to get the streams that follow.
    pub position: GlobalPosition,
    /// The stream, as `load` returns it.
    pub stream: DomainEventStream,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_transaction_then_sequence() {
        let positions = [
            GlobalPosition::START,
            GlobalPosition::new(0, 7),
            GlobalPosition::new(1, 0),
            GlobalPosition::new(1, 3),
            GlobalPosition::new(2, 1),
        ];
        assert!(positions.windows(2).all(|pair| pair[0] < pair[1]));
        assert_eq!(GlobalPosition::default(), GlobalPosition::START);
    }

    #[test]
    fn displays_and_parses_as_transaction_dot_sequence() {
        let position = GlobalPosition::new(u64::MAX, 42);
        assert_eq!(position.to_string(), format!("{}.42", u64::MAX));
        assert_eq!(position.to_string().parse::<GlobalPosition>(), Ok(position));
        assert_eq!("0.0".parse::<GlobalPosition>(), Ok(GlobalPosition::START));
    }

    #[test]
    fn refuses_what_is_not_a_position() {
        for text in [
            "",
            "1",
            ".",
            "1.",
            ".1",
            "1.2.3",
            "-1.2",
            "+1.2",
            "1 .2",
            "a.b",
            "18446744073709551616.0",
        ] {
            assert!(
                text.parse::<GlobalPosition>().is_err(),
                "`{text}` parsed as a position"
            );
        }
    }

    #[test]
    fn round_trips_through_serde() {
        let position = GlobalPosition::new(9, 3);
        let json = serde_json::to_value(position).unwrap();
        assert_eq!(json, serde_json::json!({"transaction": 9, "sequence": 3}));
        assert_eq!(
            serde_json::from_value::<GlobalPosition>(json).unwrap(),
            position
        );
    }
}
