mod gateway;
mod in_flight;
mod node;
mod outcome;
mod wait;

pub use gateway::{
    CommandGateway, CommandGatewayBuilder, WaitFunctions, WeakCommandGateway, DEFAULT_SEND_TIMEOUT,
    SENT, TIMEOUT_MS,
};
pub use in_flight::{InFlightRequests, DEFAULT_UNSURE_HORIZON};
pub use node::{
    DefaultCommandHandler, DefaultCommandHandlerBuilder, DEFAULT_CONFLICT_RETRIES, QUARANTINED,
};
pub use outcome::{look_up_request, RequestOutcome};
pub use wait::{
    signal_wanted, WaitCoordinator, WaitHandle, WaitNotifier, WaitPlan, DEFAULT_WAIT_TIMEOUT,
    PROTOCOL_HEADER, PROTOCOL_VERSION, RECORDED, WAIT_STAGE_HEADER,
};
