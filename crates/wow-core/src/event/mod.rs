//! Domain events, the event bus and the dispatch of appended streams to their consumers.

mod bus;
mod consumer;
mod dispatcher;
mod processed;
mod stream;

pub use bus::{DomainEventBus, EventBusError, InMemoryDomainEventBus, NoopDomainEventBus};
pub use consumer::{ConsumerError, EventConsumer};
pub use dispatcher::{EventDispatcher, EventDispatcherBuilder};
pub use processed::{InMemoryProcessedMessages, ProcessError, Processed};
pub use stream::{DomainEvent, DomainEventStream};
