//! Commands: the message, its kind and stages, results, the gateway, the bus, waiting, and
//! the processing node's handler.

mod binding_error;
mod body;
mod bus;
mod error;
mod fingerprint;
mod gateway;
pub mod headers;
mod in_flight;
mod kind;
mod message;
mod node;
mod outcome;
mod result;
mod stage;
mod wait;

pub use binding_error::BindingError;
pub use body::{BodyDecodeError, CommandBody, CommandInfo, EventBody};
pub use bus::{CommandBus, CommandBusError, CommandHandler, InMemoryCommandBus, JsonCommand};
pub use error::{
    decided_result, duplicate_result, CommandResultError, ORIGINAL_COMMAND_ID, REPLAYED,
};
pub use fingerprint::request_fingerprint;
pub use gateway::{CommandGateway, CommandGatewayBuilder, DEFAULT_SEND_TIMEOUT, SENT, TIMEOUT_MS};
pub use in_flight::{InFlightRequests, DEFAULT_UNSURE_HORIZON};
pub use kind::CommandKind;
pub use message::CommandMessage;
pub use node::{
    DefaultCommandHandler, DefaultCommandHandlerBuilder, DEFAULT_CONFLICT_RETRIES, QUARANTINED,
};
pub use outcome::{look_up_request, RequestOutcome};
pub use result::CommandResult;
pub use stage::{CommandStage, UnknownStage};
pub use wait::{
    signal_wanted, WaitCoordinator, WaitHandle, WaitNotifier, WaitPlan, DEFAULT_WAIT_TIMEOUT,
    PROTOCOL_HEADER, PROTOCOL_VERSION, RECORDED, WAIT_STAGE_HEADER,
};
