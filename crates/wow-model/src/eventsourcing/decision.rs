//! The one decision a store records per request id (SPEC ID-6): an appended stream, or a
//! final rejection, under the same unique key.

use crate::error_code::ErrorCode;

/// What a store knows of one request id within one aggregate (SPEC ES-5): enough to tell a
/// caller what its first attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// The id of the stream that holds the request id.
    pub stream_id: String,
    /// The version of that stream.
    pub version: u64,
    /// The command id of the message that produced it.
    pub command_id: String,
    /// When it was made, in milliseconds since the Unix epoch.
    pub create_time: i64,
    /// The request fingerprint (SPEC ID-5) stored with it.
    pub fingerprint: String,
}

/// A final rejection of a request id: what was decided, on which version, by which command.
///
/// Only business and existence rejections are recorded (a domain rule, `NotFound`,
/// `DuplicateAggregateId`, a pinned version that history has passed). Transient failures
/// (unavailable, timeout, internal) and validation failures are not decisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectionRecord {
    /// The command id of the message that was rejected.
    pub command_id: String,
    /// The request fingerprint (SPEC ID-5) of that message.
    pub fingerprint: String,
    /// The rejection's code.
    pub error_code: ErrorCode,
    /// The rejection's message, for a person.
    pub error_msg: String,
    /// The aggregate's version the decision was made on (0: the aggregate did not exist).
    pub version: u64,
    /// When it was decided, in milliseconds since the Unix epoch.
    pub create_time: i64,
}

/// The decision a store holds for one request id within one aggregate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestDecision {
    /// The request's stream was appended.
    Appended(RequestRecord),
    /// The request was rejected, for good.
    Rejected(RejectionRecord),
}

impl RequestDecision {
    /// The appended stream's record, if the request was appended.
    pub fn appended(self) -> Option<RequestRecord> {
        match self {
            RequestDecision::Appended(record) => Some(record),
            RequestDecision::Rejected(_) => None,
        }
    }
}

/// Whether a rejection with `code` is a final decision that a store records (SPEC ID-6).
///
/// Business rules of the domain, `NotFound`, `DuplicateAggregateId`, `DuplicateKey` (SPEC
/// DM-1: the key another aggregate holds), and the soft delete's
/// refusals (`IllegalAccessDeletedAggregate`, `IllegalState` for a recover of an aggregate that
/// is not deleted) are. Transient failures, validation and version conflicts are not: a
/// command whose expected version history has passed (`CommandExpectVersionConflict`) was
/// decided on a state its caller no longer holds, so its retry with the same request id, after
/// reloading, is decided afresh (SPEC ES-3).
pub fn is_recorded_rejection(code: &ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::Domain(_)
            | ErrorCode::IllegalAccessDeletedAggregate
            | ErrorCode::IllegalState
            | ErrorCode::NotFound
            | ErrorCode::DuplicateAggregateId
            | ErrorCode::DuplicateKey
            | ErrorCode::DeadlineNotPending
    )
}
