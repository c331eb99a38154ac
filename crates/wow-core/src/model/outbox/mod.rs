mod model;
mod sender;

pub use model::{row_id, EventMeta, Outbox, OutboxEntry};
pub use sender::OutboxSender;
