//! The trait a team implements once per outbox, and what an outbox stores.

use std::fmt::Debug;

use serde::{de::DeserializeOwned, Serialize};

use crate::aggregate::{Aggregate, LifecycleEvent};

/// Where one event comes from, for [`Outbox::rows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventMeta<'a> {
    /// The event's id: unique, stable across redeliveries and rebuilds.
    pub event_id: &'a str,
    /// The tenant of the aggregate that raised it.
    pub tenant_id: &'a str,
    /// The aggregate's id within its tenant.
    pub aggregate_id: &'a str,
    /// The aggregate version of the event's stream.
    pub version: u64,
}

/// An outbox of one aggregate type: the rows owed to the outside world for each of that
/// aggregate's typed events.
///
/// `rows` is pure and infallible: replaying history through it gives the same rows with the
/// same ids, which is what a rebuild does. Rows are stored as JSON, so they must survive a
/// JSON round trip unchanged (the `OutboxSpec` (wow-core) kit checks that).
///
/// ```
/// use wow_core::testing_example::{Counter, CounterEvent};
/// use wow_core::outbox::{EventMeta, Outbox};
///
/// #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Receipt {
///     counter: String,
///     by: u64,
/// }
///
/// #[derive(Debug)]
/// struct Receipts;
///
/// impl Outbox for Receipts {
///     type Aggregate = Counter;
///     type Row = Receipt;
///     const NAME: &'static str = "receipts";
///
///     fn rows(event: &CounterEvent, meta: &EventMeta<'_>) -> Vec<Receipt> {
///         match event {
///             CounterEvent::Added(added) => vec![Receipt {
///                 counter: meta.aggregate_id.to_owned(),
///                 by: added.by,
///             }],
///             _ => Vec::new(),
///         }
///     }
/// }
/// ```
pub trait Outbox: Send + Sync + 'static {
    /// The aggregate whose events the outbox reads.
    type Aggregate: Aggregate;
    /// One thing owed to the outside world.
    type Row: Serialize + DeserializeOwned + Clone + Debug + PartialEq + Send + Sync + 'static;
    /// The outbox's name: unique within a store among views and outboxes, its consumer name,
    /// and the `view` of its keys in the view store.
    const NAME: &'static str;

    /// The rows owed for one event; most events owe none.
    fn rows(event: &<Self::Aggregate as Aggregate>::Event, meta: &EventMeta<'_>) -> Vec<Self::Row>;

    /// The rows owed for the aggregate's soft delete or recover (SPEC DM-6), pure and
    /// infallible as [`rows`](Self::rows) is; `meta` is the built-in event's. Default: none.
    fn lifecycle_rows(event: LifecycleEvent, meta: &EventMeta<'_>) -> Vec<Self::Row> {
        let _ = (event, meta);
        Vec::new()
    }
}

/// The id of the `index`th row (from 0) of the event `event_id`: the event id itself for the
/// first, `{event_id}#{index}` for the others. Stable, so a redelivery or a rebuild stores
/// the same rows under the same ids, and the effect journal's keys stay the same.
pub fn row_id(event_id: &str, index: usize) -> String {
    if index == 0 {
        event_id.to_owned()
    } else {
        format!("{event_id}#{index}")
    }
}

/// One stored row of an outbox, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEntry<R> {
    /// The row's tenant.
    pub tenant_id: String,
    /// The row's id ([`row_id`]): the key of its send in the effect journal.
    pub id: String,
    /// The aggregate version of the stream it came from (0 when unknown, as for rows copied
    /// from an older store).
    pub version: u64,
    /// The row.
    pub row: R,
}
