//! What the safe-retry helper found out, and what the look-up says.

use wow_core::{CommandResult, DomainEventStream, ErrorCode};

/// The end of the safe-retry sequence (SPEC TO-2). The helper never sends the intent under a
/// new request id, and never reports an intent rejected unless a rejection was answered or
/// recorded: a lost answer, a 5xx or an unreachable history end in
/// [`Outcome::NoDecisionYet`] or [`Outcome::Unknown`].
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
    /// The intent was refused (a business rule, a missing aggregate, a version the aggregate
    /// has passed, validation, a request id reused for another body). A business or
    /// existence rejection is recorded (SPEC ID-6): it is final, and every resend with this
    /// request id gets the same answer. Do not resend. So is `DuplicateKey` (SPEC DM-1), even
    /// after the key is freed: claiming it then is a new intent, under a new request id.
    Rejected {
        /// The rejection's code: match on it, never on the message.
        error_code: ErrorCode,
        /// The rejection's message, for a person.
        error_msg: String,
        /// The command id of the message that was rejected (the first one, for a replayed
        /// or looked-up rejection).
        command_id: String,
        /// The aggregate's version the rejection was decided on, when known.
        version: Option<u64>,
        /// The server's answer to a send, when the rejection came as one; `None` when the
        /// look-up found it.
        result: Option<CommandResult>,
    },
    /// History was asked and holds no decision yet, and the helper stopped waiting: with
    /// `in_flight`, the service still holds the request (look it up again later); without,
    /// no decision is recorded after every attempt (resending with the same request id is
    /// safe). Never resend it under a new request id.
    NoDecisionYet {
        /// The intent's request id, to look it up or resend it.
        request_id: String,
        /// Whether the service said it still holds the request (`IN_FLIGHT`).
        in_flight: bool,
        /// What happened.
        reason: String,
    },
    /// Neither the command's result nor history could be had: the outcome stays unknown.
    /// Escalate, look it up later; never resend it under a new request id.
    Unknown {
        /// The intent's request id, to resolve it later.
        request_id: String,
        /// Why it stays unknown.
        reason: String,
    },
}

/// What the service says of a request id (SPEC TO-1): one of its five answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// Appended, in the stream at `version`, by the command `command_id`: the intent took
    /// effect. Never resend it as a new intent.
    Appended {
        /// The stream's version.
        version: u64,
        /// The command id of the appending attempt.
        command_id: String,
        /// When it was appended, in milliseconds since the Unix epoch, if the service said.
        create_time: Option<i64>,
        /// The stream with its events, if the service sent one this client can read.
        stream: Option<Box<DomainEventStream>>,
    },
    /// Rejected for good (SPEC ID-6): a resend gets this same answer. Do not resend.
    Rejected {
        /// The recorded rejection's code.
        error_code: ErrorCode,
        /// Its message, for a person.
        error_msg: String,
        /// The command id of the message that was rejected.
        command_id: String,
        /// The aggregate's version it was decided on (0: the aggregate did not exist).
        version: u64,
        /// When it was decided, in milliseconds since the Unix epoch, if the service said.
        create_time: Option<i64>,
    },
    /// The service holds the request and has not decided yet: wait, then look again.
    InFlight,
    /// No decision is recorded and the service does not hold the request: a resend with
    /// the same request id is safe.
    None,
    /// The service could not ask its store, could not be reached, or gave an answer this
    /// client cannot read: stay unknown and escalate; never resend under a new request id.
    Unknown(String),
}
