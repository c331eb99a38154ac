//! A given → expect test kit for outboxes, like [`ViewSpec`](crate::view::ViewSpec) for
//! views: given the aggregate's events, expect the rows owed.
//!
//! ```
//! # use wow_core::testing_example::{Added, Counter, CounterEvent};
//! use wow_core::outbox::{EventMeta, Outbox, OutboxSpec};
//!
//! #[derive(Debug)]
//! struct Receipts;
//!
//! impl Outbox for Receipts {
//!     type Aggregate = Counter;
//!     type Row = u64;
//!     const NAME: &'static str = "receipts";
//!     fn rows(event: &CounterEvent, _meta: &EventMeta<'_>) -> Vec<u64> {
//!         match event {
//!             CounterEvent::Added(added) => vec![added.by],
//!             _ => Vec::new(),
//!         }
//!     }
//! }
//!
//! OutboxSpec::<Receipts>::new()
//!     .given([CounterEvent::Started, CounterEvent::Added(Added { by: 2 })])
//!     .expect_rows([2])
//!     .expect_ids(["event-2"]);
//! ```

use std::marker::PhantomData;

use crate::aggregate::round_trip;
use wow_model::aggregate::Aggregate;
use wow_model::outbox::{row_id, EventMeta, Outbox, OutboxEntry};

type Event<O> = <<O as Outbox>::Aggregate as Aggregate>::Event;

/// The start of an outbox spec: which outbox, and which aggregate the events are of.
#[derive(Debug)]
pub struct OutboxSpec<O: Outbox> {
    tenant_id: String,
    aggregate_id: String,
    outbox: PhantomData<fn() -> O>,
}

impl<O: Outbox> Default for OutboxSpec<O> {
    fn default() -> Self {
        Self::new()
    }
}

impl<O: Outbox> OutboxSpec<O> {
    /// A spec of `O` for the aggregate `aggregate-1` of the tenant `(0)`.
    pub fn new() -> Self {
        Self {
            tenant_id: "(0)".to_owned(),
            aggregate_id: "aggregate-1".to_owned(),
            outbox: PhantomData,
        }
    }

    /// The events are of `aggregate_id` in `tenant_id` instead.
    pub fn of(mut self, tenant_id: impl Into<String>, aggregate_id: impl Into<String>) -> Self {
        self.tenant_id = tenant_id.into();
        self.aggregate_id = aggregate_id.into();
        self
    }

    /// The aggregate's history: each event its own stream, in order, with the ids
    /// `event-1`, `event-2`, .... Each event goes through its JSON form, and each row
    /// through its stored JSON form, so a lossy serialization of either fails here.
    #[track_caller]
    pub fn given(self, events: impl IntoIterator<Item = Event<O>>) -> OutboxExpect<O> {
        let mut entries = Vec::new();
        for (n, event) in events.into_iter().enumerate() {
            let (event_id, version) = (format!("event-{}", n + 1), n as u64 + 1);
            let meta = EventMeta {
                event_id: &event_id,
                tenant_id: &self.tenant_id,
                aggregate_id: &self.aggregate_id,
                version,
            };
            let rows = O::rows(&round_trip::<O::Aggregate>(&event), &meta);
            for (index, row) in rows.into_iter().enumerate() {
                entries.push(OutboxEntry {
                    tenant_id: self.tenant_id.clone(),
                    id: row_id(&event_id, index),
                    version,
                    row: stored::<O>(&row),
                });
            }
        }
        OutboxExpect { entries }
    }
}

/// `row` after a trip through its stored JSON form; panics if it does not come back equal.
#[track_caller]
fn stored<O: Outbox>(row: &O::Row) -> O::Row {
    let json = match serde_json::to_value(row) {
        Ok(json) => json,
        Err(error) => panic!("outbox {} row {row:?} does not encode: {error}", O::NAME),
    };
    let back: O::Row = match serde_json::from_value(json.clone()) {
        Ok(back) => back,
        Err(error) => panic!(
            "outbox {} row {json} does not decode from its own JSON: {error}",
            O::NAME
        ),
    };
    assert_eq!(
        &back,
        row,
        "outbox {} row changes through its JSON form {json}",
        O::NAME
    );
    back
}

/// The rows owed after the given history; each `expect_*` checks one thing and returns the
/// spec for more.
#[derive(Debug)]
pub struct OutboxExpect<O: Outbox> {
    entries: Vec<OutboxEntry<O::Row>>,
}

impl<O: Outbox> OutboxExpect<O> {
    /// Expects exactly these rows, in order.
    #[track_caller]
    pub fn expect_rows(self, expected: impl IntoIterator<Item = O::Row>) -> Self {
        let expected: Vec<O::Row> = expected.into_iter().collect();
        let rows: Vec<&O::Row> = self.entries.iter().map(|entry| &entry.row).collect();
        assert_eq!(
            rows,
            expected.iter().collect::<Vec<_>>(),
            "outbox {} rows",
            O::NAME
        );
        self
    }

    /// Expects the rows to have exactly these ids, in order.
    #[track_caller]
    pub fn expect_ids<'a>(self, expected: impl IntoIterator<Item = &'a str>) -> Self {
        let ids: Vec<&str> = self.entries.iter().map(|entry| entry.id.as_str()).collect();
        assert_eq!(
            ids,
            expected.into_iter().collect::<Vec<_>>(),
            "outbox {} row ids",
            O::NAME
        );
        self
    }

    /// Expects no row at all.
    #[track_caller]
    pub fn expect_no_rows(self) -> Self {
        assert!(
            self.entries.is_empty(),
            "outbox {} owes no row, but got {:?}",
            O::NAME,
            self.entries
        );
        self
    }

    /// The rows, for checks of one's own.
    pub fn entries(&self) -> &[OutboxEntry<O::Row>] {
        &self.entries
    }
}
