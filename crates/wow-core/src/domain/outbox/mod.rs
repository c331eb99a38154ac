//! The outbox test kit: given an aggregate's events, expect an outbox's rows, without a
//! store. The outbox's processor and delivery run in `wow-runtime`.

mod spec;

pub use spec::{OutboxExpect, OutboxSpec};
