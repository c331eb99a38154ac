//! The command bus that carries commands to a processing node, its in-memory reference, and
//! the handler a node registers on it.

mod bus;

pub use bus::{
    CommandBus, CommandBusError, CommandHandler, InMemoryCommandBus, InTransit, JsonCommand,
};
