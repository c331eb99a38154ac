//! Outboxes: the rows a team's `Outbox` writes for the outside world, one per event, and the
//! sender that delivers them.

mod model;
mod sender;

pub use model::{row_id, EventMeta, Outbox, OutboxEntry};
pub use sender::OutboxSender;
