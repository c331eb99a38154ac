//! The error codes every result and error carries.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What went wrong, as a stable name a caller can match on (never match on message text).
///
/// The framework's codes keep Wow's names; a domain's business rules add their own codes
/// (for example `InsufficientBalance`) as [`ErrorCode::Domain`]. In JSON a code is its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// Success.
    Ok,
    /// The aggregate type, command or aggregate does not exist.
    NotFound,
    /// The request could not be read (malformed JSON, wrong types, oversize body).
    BadRequest,
    /// An argument is outside its allowed range.
    IllegalArgument,
    /// The operation is not allowed in the current state.
    IllegalState,
    /// The caller's wait expired; the command's outcome is unknown.
    RequestTimeout,
    /// The caller is sending faster than it is allowed to.
    TooManyRequests,
    /// The aggregate already holds a stream with this request id.
    DuplicateRequestId,
    /// The command failed validation; binding errors name the fields.
    CommandValidation,
    /// The version the stream would take is already taken.
    EventVersionConflict,
    /// A create command named an aggregate that already exists.
    DuplicateAggregateId,
    /// The command pinned an expected version that is not the aggregate's current version.
    CommandExpectVersionConflict,
    /// An unexpected fault inside the framework.
    InternalServerError,
    /// The request id was used before for a different command or body (SPEC ID-5).
    RequestIdReused,
    /// A bus or store could not be reached; the caller may retry later.
    ServiceUnavailable,
    /// A command other than `recover` to an aggregate deleted softly (Wow's code; HTTP 410).
    IllegalAccessDeletedAggregate,
    /// A command or read for an aggregate of another owner than the one the caller is bound
    /// to (Wow's code; HTTP 403). Never recorded as a decision.
    IllegalAccessOwnerAggregate,
    /// A command or read for an aggregate of another space than the one the caller is bound
    /// to (Wow's code; HTTP 403). Never recorded as a decision.
    IllegalAccessSpaceAggregate,
    /// A query ran past the store's time budget and was stopped (HTTP 503); nothing changed.
    QueryTimeout,
    /// The command would claim a unique key (an email, a SKU) another aggregate of its
    /// tenant holds (SPEC DM-1; HTTP 409). Recorded as the decision: nothing was appended.
    DuplicateKey,
    /// A service the handler consulted failed or did not answer in time (SPEC DM-3; HTTP
    /// 503). Not a decision: nothing was recorded, and the resend decides again.
    ServiceFailed,
    /// A command a deadline fired whose schedule is no longer pending: a later event moved or
    /// cancelled the deadline before the command was decided (SPEC DM-6; HTTP 409). Recorded
    /// as the decision: nothing was appended, and the handler never ran.
    DeadlineNotPending,
    /// A delete or recover of an aggregate whose type allows neither
    /// ([`Lifecycle::Disabled`](crate::aggregate::Lifecycle::Disabled), SPEC DM-6;
    /// HTTP 405). Not a decision: nothing was recorded.
    LifecycleDisabled,
    /// A consumer did not run the stream yet: an earlier stream of the same aggregate failed
    /// for it, and this one waits behind it, parked in version order until the earlier one
    /// succeeds or an operator skips it (SPEC DS-5; HTTP 503). Nothing failed on this stream.
    StreamParked,
    /// A read that asked for data at least as fresh as an append (a request id's, or an
    /// aggregate version) found the view still behind it when its wait ran out (SPEC DS-6;
    /// HTTP 408, as a command's wait that runs out). The answer says how far behind; nothing
    /// stale was served.
    ViewNotFresh,
    /// A business rule of a domain, named by the domain.
    Domain(Cow<'static, str>),
}

const FRAMEWORK_CODES: [ErrorCode; 25] = [
    ErrorCode::Ok,
    ErrorCode::NotFound,
    ErrorCode::BadRequest,
    ErrorCode::IllegalArgument,
    ErrorCode::IllegalState,
    ErrorCode::RequestTimeout,
    ErrorCode::TooManyRequests,
    ErrorCode::DuplicateRequestId,
    ErrorCode::CommandValidation,
    ErrorCode::EventVersionConflict,
    ErrorCode::DuplicateAggregateId,
    ErrorCode::CommandExpectVersionConflict,
    ErrorCode::InternalServerError,
    ErrorCode::RequestIdReused,
    ErrorCode::ServiceUnavailable,
    ErrorCode::IllegalAccessDeletedAggregate,
    ErrorCode::IllegalAccessOwnerAggregate,
    ErrorCode::IllegalAccessSpaceAggregate,
    ErrorCode::QueryTimeout,
    ErrorCode::DuplicateKey,
    ErrorCode::ServiceFailed,
    ErrorCode::DeadlineNotPending,
    ErrorCode::LifecycleDisabled,
    ErrorCode::StreamParked,
    ErrorCode::ViewNotFresh,
];

impl ErrorCode {
    /// A domain's own code, for a business rule.
    pub fn domain(code: impl Into<Cow<'static, str>>) -> Self {
        ErrorCode::Domain(code.into())
    }

    /// The code's stable name.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::Ok => "Ok",
            ErrorCode::NotFound => "NotFound",
            ErrorCode::BadRequest => "BadRequest",
            ErrorCode::IllegalArgument => "IllegalArgument",
            ErrorCode::IllegalState => "IllegalState",
            ErrorCode::RequestTimeout => "RequestTimeout",
            ErrorCode::TooManyRequests => "TooManyRequests",
            ErrorCode::DuplicateRequestId => "DuplicateRequestId",
            ErrorCode::CommandValidation => "CommandValidation",
            ErrorCode::EventVersionConflict => "EventVersionConflict",
            ErrorCode::DuplicateAggregateId => "DuplicateAggregateId",
            ErrorCode::CommandExpectVersionConflict => "CommandExpectVersionConflict",
            ErrorCode::InternalServerError => "InternalServerError",
            ErrorCode::RequestIdReused => "RequestIdReused",
            ErrorCode::ServiceUnavailable => "ServiceUnavailable",
            ErrorCode::IllegalAccessDeletedAggregate => "IllegalAccessDeletedAggregate",
            ErrorCode::IllegalAccessOwnerAggregate => "IllegalAccessOwnerAggregate",
            ErrorCode::IllegalAccessSpaceAggregate => "IllegalAccessSpaceAggregate",
            ErrorCode::QueryTimeout => "QueryTimeout",
            ErrorCode::DuplicateKey => "DuplicateKey",
            ErrorCode::ServiceFailed => "ServiceFailed",
            ErrorCode::DeadlineNotPending => "DeadlineNotPending",
            ErrorCode::LifecycleDisabled => "LifecycleDisabled",
            ErrorCode::StreamParked => "StreamParked",
            ErrorCode::ViewNotFresh => "ViewNotFresh",
            ErrorCode::Domain(code) => code,
        }
    }

    /// Whether this is [`ErrorCode::Ok`].
    pub fn is_ok(&self) -> bool {
        matches!(self, ErrorCode::Ok)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ErrorCode {
    type Err = std::convert::Infallible;

    /// Reads a code by name; a name the framework does not know is a domain code.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(FRAMEWORK_CODES
            .iter()
            .find(|code| code.as_str() == s)
            .cloned()
            .unwrap_or_else(|| ErrorCode::Domain(Cow::Owned(s.to_owned()))))
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = Cow::<'de, str>::deserialize(deserializer)?;
        let Ok(code) = name.parse();
        Ok(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_framework_code_round_trips_by_name() {
        for code in FRAMEWORK_CODES {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            let back: ErrorCode = serde_json::from_str(&json).unwrap();
            assert_eq!(back, code);
        }
    }

    #[test]
    fn unknown_names_are_domain_codes() {
        let code: ErrorCode = "InsufficientBalance".parse().unwrap();
        assert_eq!(code, ErrorCode::domain("InsufficientBalance"));
        assert_eq!(code.to_string(), "InsufficientBalance");
    }
}
