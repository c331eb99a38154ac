//! Outboxes: rows for the outside world, written once per event in the store's own database
//! and sent from there at most once each. The portable counterpart of views
//! ([`crate::view`]): a team writes an [`Outbox`] once, with no SQL and no backend.
//!
//! # Design
//!
//! An effect that cannot join our transaction (a mail, a payment call) is split in two
//! (SPEC DS-2):
//!
//! 1. **Record.** [`OutboxProcessor`] runs an [`Outbox`] as an
//!    [`EventConsumer`](wow_core::event::EventConsumer): each stream of the outbox's aggregate
//!    is decoded once into typed events, [`Outbox::rows`] maps each event to its rows, and
//!    each row is stored through the [`ViewStore`](wow_core::view::ViewStore) contract, under
//!    the key (`Outbox::NAME`, tenant, row id) and together with its processed-message record
//!    (message id = row id). The row id is the event id (with `#n` for an event's second and
//!    later rows, see [`row_id`]), so a redelivered stream writes nothing twice, and a crash
//!    between two rows of one stream resumes with the rows still missing.
//! 2. **Deliver.** [`OutboxDelivery`] lists the stored rows across every tenant
//!    ([`ViewStore::scan`](wow_core::view::ViewStore::scan)) and sends each through an
//!    [`OutboxSender`] with [`run_external_effect`](wow_core::event::run_external_effect): the
//!    send is journaled "started" under the key `{consumer}:{row id}`, and "done" after it.
//!    A row left "started" by a crash is confirmed with the sender by its key, and sent again
//!    under the same key only when the sender has no trace of it. A done row is never sent
//!    again, even when the outbox is rebuilt, since the rebuilt rows keep their ids.
//!
//! Rows stay in the store after delivery (they are the record of what was owed); rebuilding
//! an outbox (`clear` its name in the view store and reset its positions) refills it from
//! history with the same row ids. [`OutboxSpec`] tests an outbox without a store: given the
//! aggregate's events, expect its rows.
//! [`OutboxSender`]: wow_core::outbox::OutboxSender
//!
//! [`Outbox`]: wow_core::outbox::Outbox
//! [`Outbox::rows`]: wow_core::outbox::Outbox::rows
//! [`row_id`]: wow_core::outbox::row_id
//! [`OutboxSpec`]: wow_core::outbox::OutboxSpec
//! [`OutboxSender`]: wow_core::outbox::OutboxSender

mod delivery;
mod processor;

pub use delivery::{Delivery, DeliveryError, OutboxDelivery};
pub use processor::{outbox_page, outbox_rows, OutboxProcessor};
