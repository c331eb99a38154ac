//! The error of `send_and_wait`: always the complete result (SPEC RS-1, RS-3).

use std::time::Duration;

use crate::command::CommandResult;
use crate::command::{CommandMessage, CommandStage};
use crate::error_code::ErrorCode;
use crate::eventsourcing::RequestRecord;
use crate::eventsourcing::{RejectionRecord, RequestDecision};

/// Why `send_and_wait` did not return a successful result. Both variants hold the complete
/// [`CommandResult`]: match on its `error_code` and fields, never on message text.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CommandResultError {
    /// The command failed before sending, at sending, or at a stage up to the awaited one.
    #[error("command {} failed at {}: {} {}", .0.command_id, .0.stage, .0.error_code, .0.error_msg)]
    Failed(Box<CommandResult>),
    /// The caller's wait expired. **The outcome is unknown**: the command may still take
    /// effect. Look it up by aggregate and request id before retrying, and retry only with
    /// the same request id (SPEC TO-2).
    #[error("waiting for command {} timed out after {timeout:?} at {}; outcome unknown", .result.command_id, .result.stage)]
    Timeout {
        /// The last stage reached, with `RequestTimeout` and the ids to resolve it.
        result: Box<CommandResult>,
        /// The timeout that expired.
        timeout: Duration,
    },
}

impl CommandResultError {
    /// The complete result.
    pub fn result(&self) -> &CommandResult {
        match self {
            CommandResultError::Failed(result) => result,
            CommandResultError::Timeout { result, .. } => result,
        }
    }

    /// The error code.
    pub fn error_code(&self) -> &ErrorCode {
        &self.result().error_code
    }

    /// Whether the caller's wait expired with the outcome unknown.
    pub fn is_timeout(&self) -> bool {
        matches!(self, CommandResultError::Timeout { .. })
    }
}

/// The `result` key naming the command id of the stream a duplicate collided with.
pub const ORIGINAL_COMMAND_ID: &str = "originalCommandId";

/// The `result` key set to `true` on a result that replays a recorded decision rather than
/// deciding anew (SPEC ID-6); over HTTP it is the header `Wow-Replayed: true`.
pub const REPLAYED: &str = "replayed";

/// The `result` key under which a rejection's result carries the fields of the domain error
/// ([`DomainError::detail`](crate::aggregate::DomainError::detail)), so that a saga's
/// step sees the whole typed error. A replayed rejection (SPEC ID-6 records only code and
/// message) has none; its code still names the error's kind.
pub const REJECTION_DETAIL: &str = "rejection";

/// The answer to a command whose request id already holds `decision` (SPEC ID-6): for an
/// appended stream, [`duplicate_result`]; for a recorded rejection, the original code and
/// message with its command id and [`REPLAYED`]. `RequestIdReused` wins when the original
/// was a different command or body (SPEC ID-5).
pub fn decided_result<B>(
    command: &CommandMessage<B>,
    stage: CommandStage,
    fingerprint: &str,
    decision: &RequestDecision,
) -> CommandResult {
    match decision {
        RequestDecision::Appended(record) => duplicate_result(command, stage, fingerprint, record),
        RequestDecision::Rejected(record) => rejection_result(command, stage, fingerprint, record),
    }
}

fn rejection_result<B>(
    command: &CommandMessage<B>,
    stage: CommandStage,
    fingerprint: &str,
    record: &RejectionRecord,
) -> CommandResult {
    if !record.fingerprint.is_empty() && record.fingerprint != fingerprint {
        return CommandResult::failure(
            command,
            stage,
            ErrorCode::RequestIdReused,
            format!(
                "request id `{}` was used for a different command or body, rejected with {}",
                command.request_id, record.error_code
            ),
        )
        .with_version(record.version)
        .with_result(ORIGINAL_COMMAND_ID, record.command_id.clone());
    }
    CommandResult::failure(
        command,
        stage,
        record.error_code.clone(),
        record.error_msg.clone(),
    )
    .with_version(record.version)
    .with_result(ORIGINAL_COMMAND_ID, record.command_id.clone())
    .with_result(REPLAYED, true)
}

/// The result for a command whose request id `record` already holds: `DuplicateRequestId`
/// with the original stream's version and command id, or `RequestIdReused` when the original
/// was a different command or body (SPEC ID-5).
pub fn duplicate_result<B>(
    command: &CommandMessage<B>,
    stage: CommandStage,
    fingerprint: &str,
    record: &RequestRecord,
) -> CommandResult {
    let reused = !record.fingerprint.is_empty() && record.fingerprint != fingerprint;
    let (code, message) = if reused {
        (
            ErrorCode::RequestIdReused,
            format!(
                "request id `{}` was used at version {} for a different command or body",
                command.request_id, record.version
            ),
        )
    } else {
        (
            ErrorCode::DuplicateRequestId,
            format!(
                "request id `{}` was recorded before, at version {}",
                command.request_id, record.version
            ),
        )
    };
    CommandResult::failure(command, stage, code, message)
        .with_version(record.version)
        .with_result(ORIGINAL_COMMAND_ID, record.command_id.clone())
}
