//! Running commands: the [`CommandGateway`] a caller sends through (request-id check,
//! validation, the bus), waiting for a stage ([`WaitPlan`], [`WaitCoordinator`], chained
//! waits), the processing node's [`DefaultCommandHandler`] that loads, decides and appends,
//! and [`look_up_request`], which tells a caller that timed out what became of its request.

mod answer;
mod chain;
mod gateway;
mod in_flight;
mod lost_signals;
mod node;
mod outcome;
mod void_requests;
mod wait;

pub use answer::{FAILED_STAGE, PROCESSED_OUTCOME};
pub(crate) use chain::link_headers;
pub use chain::{
    WaitTail, CHAIN_HEADER, CHAIN_REPLY_HEADER, CHAIN_STAGE_HEADER, TAIL_CONTEXT_HEADER,
    TAIL_FUNCTION_HEADER, TAIL_PROCESSOR_HEADER, TAIL_STAGE_HEADER, WAIT_REPLY_HEADER,
};
pub use gateway::{
    CommandGateway, CommandGatewayBuilder, WaitFunctions, WeakCommandGateway, DEFAULT_SEND_TIMEOUT,
    DEFAULT_VOID_RECORD_CAPACITY, SENT, TIMEOUT_MS,
};
pub use in_flight::{InFlightRequests, DEFAULT_UNSURE_HORIZON};
pub use node::{
    DefaultCommandHandler, DefaultCommandHandlerBuilder, DEFAULT_CONFLICT_RETRIES,
    DEFAULT_DECISION_BUDGET, QUARANTINED,
};
pub use outcome::{look_up_request, RequestOutcome};
pub(crate) use wait::notify_signal;
pub use wait::{
    signal_wanted, WaitCoordinator, WaitHandle, WaitNotifier, WaitPlan, DEFAULT_WAIT_TIMEOUT,
    PROTOCOL_HEADER, PROTOCOL_VERSION, RECORDED, WAIT_STAGE_HEADER,
};
