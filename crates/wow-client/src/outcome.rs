//! What the safe-retry helper found out.

use wow_core::CommandResult;

/// The end of the safe-retry sequence (SPEC TO-2). Every variant is final: the helper never
/// sends the intent under a new request id.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The command reached the awaited stage now.
    Completed(CommandResult),
    /// An earlier attempt with this request id was appended (found by a resend answered
    /// `DuplicateRequestId`, or by the look-up). Do not send it again; repair or wait for any
    /// downstream branch that is incomplete.
    AlreadyApplied {
        /// The version of the stream that holds the request id.
        version: u64,
        /// The command id of the attempt that was appended.
        command_id: String,
        /// What the server answered last, if it answered with a result.
        result: Option<CommandResult>,
    },
    /// The server refused the intent (validation, a business rule, a conflict other than a
    /// duplicate, a missing aggregate): resending it would be refused again.
    Rejected(CommandResult),
    /// Neither the command's result nor history could be had: the outcome stays unknown.
    /// Escalate; never resend it under a new request id.
    Unknown {
        /// The intent's request id, to resolve it later.
        request_id: String,
        /// Why it stays unknown.
        reason: String,
    },
}

/// What history says of a request id (SPEC TO-1).
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// Appended, in the stream at `version`, by the command `command_id`.
    Appended {
        /// The stream's version.
        version: u64,
        /// The command id of the appending attempt.
        command_id: String,
    },
    /// Not in history.
    NotAppended,
    /// The store could not be asked, or the server not reached.
    Unknown(String),
}
