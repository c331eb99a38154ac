mod stream;
mod upcast;

pub use stream::{DomainEvent, DomainEventStream};
pub use upcast::{EventShape, UpcastError, Upcasters};
