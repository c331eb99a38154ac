//! A request's JSON body, read at most to the configured limit and within the server's body
//! read timeout; why it was not read is a [`BodyError`], answered with its own status.

use axum::body::Body;
use axum::http::StatusCode;
use http_body::Body as _;
use serde_json::Value;
use wow_core::{AggregateId, ErrorCode};

use super::InputError;
use crate::server::BodyReadTimeout;
use crate::status::Answer;

/// Why a command's body was not read: its status is not always its code's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// `Content-Length` announced more than the limit: refused before a byte was read. 413.
    #[error("body: announced as {announced} bytes, more than the limit of {limit}")]
    Announced { announced: u64, limit: usize },
    /// The body grew past the limit while it was read (a chunked body). 413.
    #[error("body: longer than the limit of {limit} bytes")]
    TooLarge { limit: usize },
    /// The body did not arrive in full within the server's body read timeout. 408; not the
    /// `RequestTimeout` of a caller's wait: the command was never sent.
    #[error("body: {0}")]
    TimedOut(BodyReadTimeout),
    /// The body could not be read (the client went away mid-body) or is not JSON. 400.
    #[error("{}", .0.message)]
    Invalid(InputError),
    /// A body sent without a JSON `Content-Type` (a form, `text/plain`, none at all): what a
    /// web page can make a browser send to another site without asking it first. 415.
    #[error("body: must be sent as `Content-Type: application/json`, not {0}")]
    NotJson(String),
}

impl BodyError {
    /// The answer that reports this error for a command that was never sent: a
    /// `CommandResult` with `errorCode` `BadRequest` (the body named in its binding errors),
    /// and the status that says what was wrong with the body.
    pub(crate) fn result(self, aggregate_id: &AggregateId, request_id: Option<&str>) -> Answer {
        let bad = |message: String| InputError::bad(ErrorCode::BadRequest, "body", message);
        let (error, status) = match self {
            BodyError::Announced { announced, limit } => (
                bad(format!(
                    "must be at most {limit} bytes; Content-Length announces {announced}"
                )),
                StatusCode::PAYLOAD_TOO_LARGE,
            ),
            BodyError::TooLarge { limit } => (
                bad(format!("must be at most {limit} bytes")),
                StatusCode::PAYLOAD_TOO_LARGE,
            ),
            BodyError::TimedOut(BodyReadTimeout(timeout)) => (
                bad(format!(
                    "did not arrive in time: the server waits at most {} ms for a body \
                     (the command was not sent)",
                    timeout.as_millis()
                )),
                StatusCode::REQUEST_TIMEOUT,
            ),
            BodyError::Invalid(error) => (error, StatusCode::BAD_REQUEST),
            BodyError::NotJson(given) => (
                bad(format!(
                    "must be sent as `Content-Type: application/json`, not {given}"
                )),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ),
        };
        Answer::with_status(error.result(aggregate_id, request_id), status)
    }

    /// The status this error answers with (413, 408 or 400).
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            BodyError::Announced { .. } | BodyError::TooLarge { .. } => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            BodyError::TimedOut(_) => StatusCode::REQUEST_TIMEOUT,
            BodyError::Invalid(_) => StatusCode::BAD_REQUEST,
            BodyError::NotJson(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        }
    }

    /// What a failed read of the body means: over the limit, too slow, or unreadable.
    fn from_read(error: axum::Error, limit: usize) -> Self {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        while let Some(current) = cause {
            if current.is::<http_body_util::LengthLimitError>() {
                return BodyError::TooLarge { limit };
            }
            if let Some(timeout) = current.downcast_ref::<BodyReadTimeout>() {
                return BodyError::TimedOut(BodyReadTimeout(timeout.0));
            }
            cause = current.source();
        }
        BodyError::Invalid(InputError::bad(
            ErrorCode::BadRequest,
            "body",
            format!("could not be read: {error}"),
        ))
    }
}

/// Reads a command's JSON body, at most `limit` bytes: an empty body is `{}`, and anything
/// else must be a JSON object (an array would bind a command's fields by position, a scalar
/// binds nothing).
///
/// A body whose `Content-Length` (which hyper reports as the body's exact size hint) is
/// above `limit` is refused before anything is read, so a client that announces a huge body
/// and sends nothing holds nothing.
pub(crate) async fn body(
    body: Body,
    limit: usize,
    content_type: Option<&str>,
) -> Result<Value, BodyError> {
    let bytes = read_bytes(body, limit).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Default::default()));
    }
    if !is_json(content_type) {
        return Err(BodyError::NotJson(
            content_type.map_or_else(|| "none".to_owned(), |given| format!("`{given}`")),
        ));
    }
    let value = parse(&bytes)?;
    // `null` is a command without fields, as an empty body is.
    if value.is_null() {
        return Ok(Value::Object(Default::default()));
    }
    if !value.is_object() {
        return Err(BodyError::Invalid(InputError::bad(
            ErrorCode::BadRequest,
            "body",
            format!("must be a JSON object, not {}", kind_of(&value)),
        )));
    }
    Ok(value)
}

/// What kind of JSON `value` is, for an error.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether `content_type` names JSON: `application/json` or a `+json` type, any parameters
/// (`; charset=utf-8`) aside, in any case.
fn is_json(content_type: Option<&str>) -> bool {
    let Some(given) = content_type else {
        return false;
    };
    let essence = given
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Reads a query's JSON body, at most `limit` bytes: no body at all is `{}`; anything else
/// must be JSON (whitespace alone is not).
pub(crate) async fn query_body(body: Body, limit: usize) -> Result<Value, BodyError> {
    let bytes = read_bytes(body, limit).await?;
    if bytes.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    parse(&bytes)
}

/// Reads a body, at most `limit` bytes.
async fn read_bytes(body: Body, limit: usize) -> Result<axum::body::Bytes, BodyError> {
    let announced = body.size_hint().lower();
    if usize::try_from(announced).map_or(true, |announced| announced > limit) {
        return Err(BodyError::Announced { announced, limit });
    }
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|error| BodyError::from_read(error, limit))
}

/// `bytes` as JSON, read strictly ([`StrictValue`](crate::strict_json::StrictValue)).
fn parse(bytes: &[u8]) -> Result<Value, BodyError> {
    serde_json::from_slice::<crate::strict_json::StrictValue>(bytes)
        .map(|strict| strict.0)
        .map_err(|e| {
            BodyError::Invalid(InputError::bad(
                ErrorCode::BadRequest,
                "body",
                format!("is not valid JSON: {e}"),
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_announced_over_the_limit_is_refused_unread_with_413() {
        let announced = Body::new(http_body_util::Full::new(axum::body::Bytes::from(vec![
            b' ';
            300
        ])));
        let error = body(announced, 256, Some("application/json"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                BodyError::Announced {
                    announced: 300,
                    limit: 256
                }
            ),
            "{error}"
        );
        let aggregate = AggregateId::new("bank", "account", "a", "(0)");
        let answer = crate::status::respond(error.result(&aggregate, None));
        assert_eq!(answer.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(answer.headers()["wow-error-code"], "BadRequest");
    }

    #[tokio::test]
    async fn a_command_body_that_is_not_an_object_is_refused_with_400() {
        for text in [r#"["ArrayName",55]"#, "55", r#""x""#, "true"] {
            let read = body(Body::from(text), 1024, JSON).await;
            let Err(error) = read else {
                panic!("{text} was read");
            };
            assert_eq!(error.status(), StatusCode::BAD_REQUEST, "{text}");
            assert!(error.to_string().contains("JSON object"), "{text}: {error}");
        }
        assert!(body(Body::from(" "), 1024, JSON).await.unwrap().is_object());
        assert!(body(Body::from("null"), 1024, JSON)
            .await
            .unwrap()
            .is_object());
        assert!(body(Body::from(r#"{"a":1}"#), 1024, JSON).await.is_ok());
    }

    const JSON: Option<&str> = Some("application/json");

    #[tokio::test]
    async fn a_command_body_not_sent_as_json_is_refused_with_415_and_an_empty_one_needs_no_type() {
        for given in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("application/jsonx"),
        ] {
            let error = body(Body::from(r#"{"a":1}"#), 1024, given)
                .await
                .unwrap_err();
            assert_eq!(
                error.status(),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{given:?}"
            );
        }
        for given in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/vnd.wow+json",
        ] {
            assert!(
                body(Body::from(r#"{"a":1}"#), 1024, Some(given))
                    .await
                    .is_ok(),
                "{given}"
            );
        }
        for empty in ["", "  \n"] {
            assert!(
                body(Body::from(empty), 1024, None).await.is_ok(),
                "no body, no type"
            );
        }
    }
}
