mod model;

pub use model::{row_id, EventMeta, Outbox, OutboxEntry};
