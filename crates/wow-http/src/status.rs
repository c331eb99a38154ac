//! Error codes to HTTP statuses, and results to responses (the mapping of docs/http-api.md).

use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;
use wow_core::command::REPLAYED;
use wow_core::{CommandResult, ErrorCode};

/// The header that repeats a result's error code.
pub const ERROR_CODE_HEADER: HeaderName = HeaderName::from_static("wow-error-code");

/// The header set to `true` on an answer that replays a decision recorded for the request id
/// before (SPEC ID-6): the handler did not run again, and the status, code and message are
/// those of the original decision.
pub const REPLAYED_HEADER: HeaderName = HeaderName::from_static("wow-replayed");

/// The status of a result with `code`: 200 `Ok`; 400 validation and unreadable input; 404
/// missing aggregates and commands; 409 conflicts; 408 an expired wait; 503 an unreachable
/// bus or store, or a query past its time budget; 429 a tenant's queries past its share; 500 internal faults; 422 a domain's business rule; 403 an aggregate of
/// another owner or space than the caller's (SPEC TN-2); 405 a delete or recover of an
/// aggregate whose domain disables both (SPEC DM-6).
///
/// A replayed rejection (SPEC ID-6) carries its original code, so it gets the status of the
/// original answer: 422 for a business rule, 404 `NotFound`, 409 `DuplicateAggregateId`,
/// `DuplicateKey`, `DeadlineNotPending` or `CommandExpectVersionConflict`.
pub fn status_for(code: &ErrorCode) -> StatusCode {
    match code {
        ErrorCode::Ok => StatusCode::OK,
        ErrorCode::CommandValidation | ErrorCode::IllegalArgument | ErrorCode::BadRequest => {
            StatusCode::BAD_REQUEST
        }
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::DuplicateRequestId
        | ErrorCode::EventVersionConflict
        | ErrorCode::DuplicateAggregateId
        | ErrorCode::CommandExpectVersionConflict
        | ErrorCode::DuplicateKey
        | ErrorCode::DeadlineNotPending
        | ErrorCode::RequestIdReused => StatusCode::CONFLICT,
        ErrorCode::RequestTimeout | ErrorCode::ViewNotFresh => StatusCode::REQUEST_TIMEOUT,
        ErrorCode::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::ServiceUnavailable
        | ErrorCode::QueryTimeout
        | ErrorCode::ServiceFailed
        | ErrorCode::StreamParked => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::InternalServerError => StatusCode::INTERNAL_SERVER_ERROR,
        ErrorCode::IllegalState => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::IllegalAccessDeletedAggregate => StatusCode::GONE,
        ErrorCode::LifecycleDisabled => StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::IllegalAccessOwnerAggregate | ErrorCode::IllegalAccessSpaceAggregate => {
            StatusCode::FORBIDDEN
        }
        _ => StatusCode::UNPROCESSABLE_ENTITY,
    }
}

/// Whether `result` replays a recorded decision (`result.replayed` is `true`).
pub(crate) fn is_replayed(result: &CommandResult) -> bool {
    result.result.get(REPLAYED) == Some(&Value::Bool(true))
}

/// A result and the status it is answered with: its code's ([`status_for`]), or a more
/// precise one an input error needs while keeping its code (a body over the limit is 413, a
/// body that did not arrive in time 408, both `BadRequest`).
#[derive(Debug)]
pub(crate) struct Answer {
    result: CommandResult,
    status: StatusCode,
}

impl Answer {
    /// `result`, answered with `status` rather than its code's.
    pub(crate) fn with_status(result: CommandResult, status: StatusCode) -> Self {
        Self { result, status }
    }

    /// The result answered.
    pub(crate) fn result(&self) -> &CommandResult {
        &self.result
    }
}

impl From<CommandResult> for Answer {
    fn from(result: CommandResult) -> Self {
        let status = status_for(&result.error_code);
        Self { result, status }
    }
}

/// `result` as an answer carries it: every field, and `function` always, as Wow's clients
/// read it (a result of a stage as a whole carries the framework's function,
/// [`FunctionInfo::of_stage`](wow_core::command::FunctionInfo::of_stage)). Serialized
/// straight to the body, with no JSON tree in between.
pub(crate) fn wire(mut result: CommandResult) -> CommandResult {
    if result.function.is_none() {
        result.function = Some(wow_core::command::FunctionInfo::of_stage(result.stage));
    }
    result
}

/// `answer`'s result as the response body, with its status, `Wow-Error-Code`, and
/// `Wow-Replayed: true` when it replays a recorded decision.
pub(crate) fn respond(answer: impl Into<Answer>) -> Response {
    let Answer { result, status } = answer.into();
    let code = HeaderValue::from_str(result.error_code.as_str())
        .unwrap_or(HeaderValue::from_static("InternalServerError"));
    let replayed = is_replayed(&result);
    let mut response = (status, Json(wire(result))).into_response();
    response.headers_mut().insert(ERROR_CODE_HEADER, code);
    if replayed {
        response
            .headers_mut()
            .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
    response
}

/// The status of each answer of the request look-up (SPEC TO-1, docs/http-api.md): 200 a
/// decision (`APPENDED` or `REJECTED`), 202 `IN_FLIGHT`, 404 `NONE`, 503 `UNKNOWN`.
pub(crate) fn look_up_status(status: &str) -> StatusCode {
    match status {
        "APPENDED" | "REJECTED" => StatusCode::OK,
        "IN_FLIGHT" => StatusCode::ACCEPTED,
        "NONE" => StatusCode::NOT_FOUND,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}
