mod catch_up;
mod dispatcher;
mod in_memory_bus;
mod position_writer;

pub use catch_up::{catch_up, CatchUpError, CatchUpProgress};
pub use dispatcher::{EventDispatcher, EventDispatcherBuilder, NamedConsumer};
pub use in_memory_bus::{EventFeed, InMemoryDomainEventBus};
