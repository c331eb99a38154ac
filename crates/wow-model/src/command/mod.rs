//! Commands: the message, its kind and stages, its body as a team's command enum provides it,
//! and the results a caller reads back.

mod binding_error;
mod body;
mod error;
mod fingerprint;
mod function;
pub mod headers;
mod kind;
mod message;
mod result;
mod stage;

pub use binding_error::BindingError;
pub use body::{BodyDecodeError, CommandBody, CommandInfo, EventBody};
pub use error::{
    decided_result, duplicate_result, CommandResultError, ORIGINAL_COMMAND_ID, REJECTION_DETAIL,
    REPLAYED,
};
pub use fingerprint::request_fingerprint;
pub use function::{FunctionInfo, FunctionKind, WaitFunction};
pub use kind::CommandKind;
pub use message::{
    CommandMessage, OWNER_ID_HEADER, SPACE_ID_HEADER, TRACEPARENT_HEADER, TRACESTATE_HEADER,
};
pub use result::CommandResult;
pub use stage::{CommandStage, UnknownStage};
