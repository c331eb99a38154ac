//! Outboxes: rows for the outside world, written once per event in the store's own
//! database and sent from there at most once each (SPEC DS-2). The portable counterpart
//! of views: a team writes an [`Outbox`] once, with no SQL and no backend, names the
//! outside system its rows go to as an [`OutboxSender`], and
//! [`OutboxSpec`] tests it without a store; `wow-runtime`'s processor records its rows
//! through the view store and its delivery sends them through the effect journal.

mod spec;

pub use spec::{OutboxExpect, OutboxSpec};
pub use wow_model::outbox::{row_id, EventMeta, Outbox, OutboxEntry, OutboxSender};
