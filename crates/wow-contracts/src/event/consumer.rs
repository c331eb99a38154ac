//! What projections and event processors implement.

use async_trait::async_trait;

use wow_model::command::CommandResultError;
use wow_model::error_code::ErrorCode;
use wow_model::event::DomainEventStream;

/// A consumer's failure: reported on its own stage (SPEC ST-5), never undoing history.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ConsumerError {
    /// What went wrong, as a code.
    pub code: ErrorCode,
    /// What went wrong, for a person.
    pub message: String,
}

impl ConsumerError {
    /// A failure with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// An unexpected failure (`InternalServerError`).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InternalServerError, message)
    }
}

impl From<CommandResultError> for ConsumerError {
    /// A command a saga sent failed (or its wait expired): the saga fails with the command's
    /// code and the whole story in the message.
    fn from(error: CommandResultError) -> Self {
        Self::new(error.error_code().clone(), error.to_string())
    }
}

/// A projection (stage `PROJECTED`) or an event processor (stage `EVENT_HANDLED`): reads
/// appended streams, one aggregate's in version order.
///
/// A stream can arrive again (SPEC DS-1): a consumer with side effects records the stream or
/// event id with its effect, in one transaction.
#[async_trait]
pub trait EventConsumer: Send + Sync + std::fmt::Debug {
    /// The consumer's name, unique within its stage (a wait can name it).
    fn name(&self) -> &str;

    /// Handles one appended stream.
    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError>;
}
