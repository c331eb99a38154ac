//! Domain events and event streams.

mod stream;

pub use stream::{DomainEvent, DomainEventStream};
