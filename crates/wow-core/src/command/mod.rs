//! Commands: the message, its kind and stages, results and validation.

mod binding_error;
mod body;
mod fingerprint;
mod kind;
mod message;
mod result;
mod stage;

pub use binding_error::BindingError;
pub use body::{BodyDecodeError, CommandBody, CommandInfo, EventBody};
pub use fingerprint::request_fingerprint;
pub use kind::CommandKind;
pub use message::CommandMessage;
pub use result::CommandResult;
pub use stage::{CommandStage, UnknownStage};
