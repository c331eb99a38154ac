//! [`ApiError`]: the one place a failed request becomes an answer, a status, headers and a
//! body. A route, an extractor or a layer says what failed (a status, a code and a message,
//! or the `CommandResult` of a command that was never sent) and returns the error; how it is
//! written is decided here.

use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use wow_core::{CommandResult, ErrorCode};

use crate::status::{respond, Answer, ERROR_CODE_HEADER};

/// A request that failed, as it is answered. Boxed, so that a `Result` of it stays small.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(crate) struct ApiError(Box<Failure>);

/// What failed, and in which shape it is answered.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// `{errorCode, errorMsg}` with the status and `Wow-Error-Code` (and `succeeded: false`
    /// unless the body has the shape of a read's error).
    #[error("{code}: {message}")]
    Error {
        status: StatusCode,
        code: String,
        message: String,
        shape: Shape,
        header: Option<(HeaderName, HeaderValue)>,
    },
    /// A command that was never sent (or that the gateway answered): its `CommandResult`, as
    /// every command's answer is written ([`respond`]).
    #[error("{}: {}", .0.result().error_code, .0.result().error_msg)]
    Command(Box<Answer>),
}

/// The body of an error that is not a command's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `{errorCode, errorMsg, succeeded: false}`: every route's but a read's.
    Full,
    /// `{errorCode, errorMsg}`: the errors of the state, time travel and history reads.
    Read,
}

impl ApiError {
    /// `status`, with `{errorCode: code, errorMsg: message, succeeded: false}` and
    /// `Wow-Error-Code: code`.
    pub(crate) fn new(
        status: StatusCode,
        code: impl std::fmt::Display,
        message: impl Into<String>,
    ) -> Self {
        Self::of(status, code, message, Shape::Full)
    }

    /// `status`, with the body of a read's error, `{errorCode: code, errorMsg: message}`, and
    /// `Wow-Error-Code: code`.
    pub(crate) fn read(
        status: StatusCode,
        code: impl std::fmt::Display,
        message: impl Into<String>,
    ) -> Self {
        Self::of(status, code, message, Shape::Read)
    }

    /// `status`, `code` and `message`, with a body of `shape`.
    fn of(
        status: StatusCode,
        code: impl std::fmt::Display,
        message: impl Into<String>,
        shape: Shape,
    ) -> Self {
        Self(Box::new(Failure::Error {
            status,
            code: code.to_string(),
            message: message.into(),
            shape,
            header: None,
        }))
    }

    /// 404 `NotFound`.
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, message)
    }

    /// 404 `NotFound`, with the body of a read's error.
    pub(crate) fn read_not_found(message: impl Into<String>) -> Self {
        Self::read(StatusCode::NOT_FOUND, ErrorCode::NotFound, message)
    }

    /// 400 `IllegalArgument`.
    pub(crate) fn illegal_argument(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::IllegalArgument, message)
    }

    /// 400 `BadRequest`.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, message)
    }

    /// 403 `Forbidden`.
    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "Forbidden", message)
    }

    /// 404 `NotFound` for a request no route answers.
    pub(crate) fn no_route(method: &Method, path: &str) -> Self {
        Self::not_found(format!("no route answers {method} {path}"))
    }

    /// 405 `MethodNotAllowed` for a path that does not answer `method` (the router sets
    /// `Allow`, unless [`with_allow`](Self::with_allow) does).
    pub(crate) fn method_not_allowed(method: &Method, path: &str) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!("{path} does not answer {method}"),
        )
    }

    /// A command that was never sent, answered with `answer`'s result and status.
    pub(crate) fn command(answer: impl Into<Answer>) -> Self {
        Self(Box::new(Failure::Command(Box::new(answer.into()))))
    }

    /// This error with the header `name: value` too (`WWW-Authenticate`, `Retry-After`).
    /// A command's result takes no other header.
    pub(crate) fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        if let Failure::Error { header, .. } = self.0.as_mut() {
            *header = Some((name, value));
        }
        self
    }

    /// This error with `Allow: allow`: the methods its path answers.
    pub(crate) fn with_allow(self, allow: &'static str) -> Self {
        self.with_header(header::ALLOW, HeaderValue::from_static(allow))
    }
}

impl From<CommandResult> for ApiError {
    fn from(result: CommandResult) -> Self {
        Self::command(result)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message, shape, header) = match *self.0 {
            Failure::Command(answer) => return respond(*answer),
            Failure::Error {
                status,
                code,
                message,
                shape,
                header,
            } => (status, code, message, shape, header),
        };
        let code_header = HeaderValue::from_str(&code).ok();
        let mut body = json!({"errorCode": code, "errorMsg": message});
        if shape == Shape::Full {
            body["succeeded"] = json!(false);
        }
        let mut response = (status, Json(body)).into_response();
        if let Some(code) = code_header {
            response.headers_mut().insert(ERROR_CODE_HEADER, code);
        }
        if let Some((name, value)) = header {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(error: ApiError) -> (StatusCode, Option<String>, serde_json::Value) {
        let response = error.into_response();
        let status = response.status();
        let code = response
            .headers()
            .get(ERROR_CODE_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap_or_default();
        let body = serde_json::from_slice(&bytes).unwrap_or_default();
        (status, code, body)
    }

    #[tokio::test]
    async fn an_error_is_its_status_its_code_header_and_its_body() {
        let (status, code, body) = read(ApiError::not_found("gone")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(code.as_deref(), Some("NotFound"));
        assert_eq!(
            body,
            json!({"errorCode": "NotFound", "errorMsg": "gone", "succeeded": false})
        );
        let read_error = ApiError::read(StatusCode::BAD_REQUEST, "IllegalArgument", "no");
        let (_, code, body) = read(read_error).await;
        assert_eq!(code.as_deref(), Some("IllegalArgument"));
        assert_eq!(
            body,
            json!({"errorCode": "IllegalArgument", "errorMsg": "no"})
        );
    }
}
