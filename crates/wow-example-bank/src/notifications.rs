//! The `notifications` outbox: one row per `Withdrawn` event, owed to the account holder.
//! A portable [`Outbox`]: no SQL, the rows live in whichever view store the service is
//! assembled with, each stored once with its processed-message record (SPEC DS-2) under the
//! event's id, and sent at most once each through a [`Mailer`].

use serde::{Deserialize, Serialize};
use wow_core::outbox::{EventMeta, Outbox, OutboxSender};

use crate::account::{Account, AccountEvent};

/// The consumer name of the processor, and the name of its rows in the view store.
pub const NAME: &str = "notifications";

/// The consumer name of the sender, in the effect journal: every send's key is
/// `notification_sender:{event id}`.
pub const SENDER: &str = "notification_sender";

/// One notification to send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxRow {
    /// The `Withdrawn` event's id: the row's identity.
    pub event_id: String,
    /// The account's tenant.
    pub tenant_id: String,
    /// The account.
    pub account_id: String,
    /// The amount withdrawn.
    pub amount: i64,
}

/// The outbox: a row per `Withdrawn` event, none for any other.
#[derive(Debug)]
pub struct NotificationOutbox;

impl Outbox for NotificationOutbox {
    type Aggregate = Account;
    type Row = OutboxRow;
    const NAME: &'static str = NAME;

    fn rows(event: &AccountEvent, meta: &EventMeta<'_>) -> Vec<OutboxRow> {
        match event {
            AccountEvent::Withdrawn(moved) => vec![OutboxRow {
                event_id: meta.event_id.to_owned(),
                tenant_id: meta.tenant_id.to_owned(),
                account_id: meta.aggregate_id.to_owned(),
                amount: moved.amount,
            }],
            _ => Vec::new(),
        }
    }
}

/// The outside system that sends a notification: it cannot join our transaction, but it
/// accepts an idempotency key and deduplicates by it (as payment and mail APIs do).
pub trait Mailer: OutboxSender<OutboxRow> {}

impl<M: OutboxSender<OutboxRow>> Mailer for M {}
