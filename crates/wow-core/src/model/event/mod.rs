mod stream;

pub use stream::{DomainEvent, DomainEventStream};
