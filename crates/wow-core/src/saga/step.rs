//! A saga step's failure, typed by the target aggregate's own error.

use std::fmt;

use wow_contracts::event::ConsumerError;
use wow_model::aggregate::DecodeDomainError;
use wow_model::command::CommandResult;
use wow_model::command::CommandResultError;
use wow_model::error_code::ErrorCode;

pub use wow_model::command::REJECTION_DETAIL;

/// Why a command a saga sent to an aggregate whose error type is `E` did not succeed.
#[derive(Debug)]
#[non_exhaustive]
pub enum StepError<E: DecodeDomainError> {
    /// The target rejected the command by one of its own rules, for good (SPEC ID-6).
    Rejected {
        /// Which rule: told from the error code, on a first answer and on a replay alike.
        /// Decide on this.
        kind: E::Kind,
        /// The whole error with its fields, when the result carries them
        /// ([`REJECTION_DETAIL`]); `None` otherwise.
        error: Option<E>,
        /// The complete result.
        result: Box<CommandResult>,
    },
    /// The target aggregate does not exist (`NotFound`), for good.
    NotFound(Box<CommandResult>),
    /// Any other failure, or the wait expired with the outcome unknown: as the gateway
    /// reported it. Failing the saga with it lets compensation retry the same intent.
    Failed(CommandResultError),
    /// The command was not sent: it names an aggregate of another type, or does not encode.
    NotSent {
        /// `IllegalArgument` or `InternalServerError`.
        code: ErrorCode,
        /// What is wrong.
        message: String,
    },
}

impl<E: DecodeDomainError> StepError<E> {
    /// The typed error of a failed send: the target's rule when the code is one of `E`'s
    /// codes (checked first, so a code `E` shares with the framework counts as `E`'s),
    /// `NotFound`, or the failure as it came.
    pub(crate) fn of(error: CommandResultError) -> Self {
        let CommandResultError::Failed(result) = error else {
            return StepError::Failed(error);
        };
        if let Some(kind) = E::kind_of(&result.error_code) {
            let error = match result.result.get(REJECTION_DETAIL) {
                Some(serde_json::Value::Object(detail)) => E::decode(&result.error_code, detail),
                _ => None,
            };
            return StepError::Rejected {
                kind,
                error,
                result,
            };
        }
        if result.error_code == ErrorCode::NotFound {
            return StepError::NotFound(result);
        }
        StepError::Failed(CommandResultError::Failed(result))
    }

    /// The error code the step failed with.
    pub fn error_code(&self) -> &ErrorCode {
        match self {
            StepError::Rejected { result, .. } | StepError::NotFound(result) => &result.error_code,
            StepError::Failed(error) => error.error_code(),
            StepError::NotSent { code, .. } => code,
        }
    }

    /// The complete result, when the command was sent.
    pub fn result(&self) -> Option<&CommandResult> {
        match self {
            StepError::Rejected { result, .. } | StepError::NotFound(result) => Some(result),
            StepError::Failed(error) => Some(error.result()),
            StepError::NotSent { .. } => None,
        }
    }
}

impl<E: DecodeDomainError> fmt::Display for StepError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepError::Rejected { kind, result, .. } => write!(
                f,
                "command {} rejected ({kind:?}): {}",
                result.command_id, result.error_msg
            ),
            StepError::NotFound(result) => write!(
                f,
                "command {}: aggregate {} does not exist",
                result.command_id,
                result.aggregate()
            ),
            StepError::Failed(error) => error.fmt(f),
            StepError::NotSent { code, message } => write!(f, "not sent ({code}): {message}"),
        }
    }
}

impl<E: DecodeDomainError> std::error::Error for StepError<E> {}

impl<E: DecodeDomainError> From<StepError<E>> for ConsumerError {
    /// A step the saga does not handle fails the saga with the step's code.
    fn from(error: StepError<E>) -> Self {
        match error {
            StepError::Failed(error) => error.into(),
            StepError::NotSent { code, message } => ConsumerError::new(code, message),
            other => ConsumerError::new(other.error_code().clone(), other.to_string()),
        }
    }
}
