//! Domain events: the stream of one command's events as it is appended, and the upcasters
//! that read old event shapes as today's.

mod stream;
mod upcast;

pub use stream::{DomainEvent, DomainEventStream};
pub use upcast::{EventShape, UpcastError, Upcasters};
