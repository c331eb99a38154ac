mod bus;

pub use bus::{
    CommandBus, CommandBusError, CommandHandler, InMemoryCommandBus, InTransit, JsonCommand,
};
