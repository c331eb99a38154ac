//! Error codes to HTTP statuses, and results to responses (the mapping of DESIGN.md §5).

use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use wow_core::{CommandResult, ErrorCode};

/// The header that repeats a result's error code.
pub const ERROR_CODE_HEADER: HeaderName = HeaderName::from_static("wow-error-code");

/// The status of a result with `code`: 200 `Ok`; 400 validation and unreadable input; 404
/// missing aggregates and commands; 409 conflicts; 408 an expired wait; 503 an unreachable
/// bus or store; 500 internal faults; 422 a domain's business rule.
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
        | ErrorCode::RequestIdReused => StatusCode::CONFLICT,
        ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
        ErrorCode::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::ServiceUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::InternalServerError => StatusCode::INTERNAL_SERVER_ERROR,
        ErrorCode::IllegalState => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::UNPROCESSABLE_ENTITY,
    }
}

/// `result` as the response body, with its status and `Wow-Error-Code`.
pub(crate) fn respond(result: CommandResult) -> Response {
    let status = status_for(&result.error_code);
    let code = HeaderValue::from_str(result.error_code.as_str())
        .unwrap_or(HeaderValue::from_static("InternalServerError"));
    let mut response = (status, Json(result)).into_response();
    response.headers_mut().insert(ERROR_CODE_HEADER, code);
    response
}
