//! Reading a command request: its headers, ids and body. Every failure says what is wrong
//! and which header or field it is about; nothing has been recorded when one occurs.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use http_body::Body as _;
use serde_json::Value;
use wow_core::command::{headers, BindingError, WaitFunction, WaitTail, SENT};
use wow_core::{id, AggregateId, CommandResult, CommandStage, ErrorCode};

use crate::server::BodyReadTimeout;
use crate::status::Answer;
use crate::HttpConfig;

/// The longest request id or aggregate id accepted, in bytes.
pub(crate) const MAX_ID_BYTES: usize = wow_core::MAX_AGGREGATE_ID_BYTES;

/// What a request asked for, beyond its body.
#[derive(Debug)]
pub(crate) struct CommandOptions {
    pub(crate) request_id: Option<String>,
    /// `None`: no `Command-Wait-Stage`; the command's kind decides (`SENT` for a void
    /// command, `PROCESSED` otherwise).
    pub(crate) stage: Option<CommandStage>,
    pub(crate) timeout: Duration,
    pub(crate) expected_version: Option<u64>,
    pub(crate) stream: bool,
    /// The consumer a downstream stage's wait is for (Wow's `Command-Wait-Processor` and
    /// `-Function`, with `-Context`); `None`: the whole stage.
    pub(crate) wait_function: Option<WaitFunction>,
    /// A chained wait's tail (Wow's `Command-Wait-Tail-*`); `None`: no chain.
    pub(crate) wait_tail: Option<WaitTail>,
    /// The owner the command acts for (`Command-Owner-Id`, or `/owner/{ownerId}/`).
    pub(crate) owner_id: Option<String>,
    /// The aggregate's space (`Wow-Space-Id`).
    pub(crate) space_id: Option<String>,
}

/// Bad input: a code (400 unless said otherwise), a message and the offending names.
#[derive(Debug)]
pub(crate) struct InputError {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
    pub(crate) binding_errors: Vec<BindingError>,
}

impl InputError {
    pub(crate) fn bad(code: ErrorCode, name: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            code,
            binding_errors: vec![BindingError::new(name, message.clone())],
            message: format!("{name}: {message}"),
        }
    }

    /// The `CommandResult` that reports this error for a command that was never sent.
    pub(crate) fn result(
        self,
        aggregate_id: &AggregateId,
        request_id: Option<&str>,
    ) -> CommandResult {
        let command_id = id::new_id();
        CommandResult::for_ids(
            aggregate_id,
            &command_id,
            request_id.unwrap_or(&command_id),
            CommandStage::Sent,
            self.code,
            self.message,
        )
        .with_binding_errors(self.binding_errors)
        .with_result(SENT, false)
    }
}

/// A header as text: `None` when absent; an error naming it when it is not ASCII.
fn header<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, InputError> {
    headers
        .get(name)
        .map(|value| {
            value.to_str().map_err(|_| {
                InputError::bad(ErrorCode::IllegalArgument, name, "must be visible ASCII")
            })
        })
        .transpose()
}

/// A `Command-*` header (`name` as DESIGN.md §5 spells it) as text: `None` when absent; an
/// error naming it when it holds anything but visible ASCII and the space (`0x20..=0x7E`).
/// hyper refuses most control characters itself (a bare 400, see the `server` module); what
/// passes it, a tab or a byte above `0x7F`, is refused here.
fn command_header<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, InputError> {
    let Some(value) = headers.get(name) else {
        return Ok(None);
    };
    let bytes = value.as_bytes();
    match std::str::from_utf8(bytes) {
        Ok(text) if bytes.iter().all(|b| (0x20..=0x7e).contains(b)) => Ok(Some(text)),
        _ => Err(InputError::bad(
            ErrorCode::IllegalArgument,
            name,
            "must be visible ASCII",
        )),
    }
}

/// Reads the command headers of DESIGN.md §5.
pub(crate) fn options(
    headers: &HeaderMap,
    config: &HttpConfig,
) -> Result<CommandOptions, InputError> {
    // Read by the create route before this; an unreadable one would pass there as an empty
    // id and be refused as "must be 1 to 128 bytes", which is not what is wrong with it.
    command_header(headers, headers::AGGREGATE_ID)?;
    let request_id = command_header(headers, headers::REQUEST_ID)?
        .map(|id| check_id(headers::REQUEST_ID, id, false).map(|()| id.to_owned()))
        .transpose()?;
    let stage = command_header(headers, headers::WAIT_STAGE)?
        .map(|name| {
            name.parse().map_err(|e: wow_core::command::UnknownStage| {
                InputError::bad(
                    ErrorCode::IllegalArgument,
                    headers::WAIT_STAGE,
                    e.to_string(),
                )
            })
        })
        .transpose()?;
    let timeout = match command_header(headers, headers::WAIT_TIMEOUT)? {
        None => config.default_wait_timeout,
        Some(text) => {
            let millis: u64 = text.trim().parse().map_err(|_| {
                InputError::bad(
                    ErrorCode::IllegalArgument,
                    headers::WAIT_TIMEOUT,
                    "must be a whole number of milliseconds",
                )
            })?;
            let timeout = Duration::from_millis(millis);
            if millis == 0 || timeout > config.max_wait_timeout {
                return Err(InputError::bad(
                    ErrorCode::IllegalArgument,
                    headers::WAIT_TIMEOUT,
                    format!(
                        "must be between 1 and {} ms",
                        config.max_wait_timeout.as_millis()
                    ),
                ));
            }
            timeout
        }
    };
    let expected_version = command_header(headers, headers::AGGREGATE_VERSION)?
        .map(|text| {
            text.trim().parse::<u64>().map_err(|_| {
                InputError::bad(
                    ErrorCode::IllegalArgument,
                    headers::AGGREGATE_VERSION,
                    "must be a non-negative whole number",
                )
            })
        })
        .transpose()?;
    let stream =
        header(headers, "Accept")?.is_some_and(|accept| accept.contains("text/event-stream"));
    let part = |name: &str| -> Result<String, InputError> {
        Ok(command_header(headers, name)?
            .unwrap_or_default()
            .trim()
            .to_owned())
    };
    let wait_function = WaitFunction {
        context: part(headers::WAIT_CONTEXT)?,
        processor: part(headers::WAIT_PROCESSOR)?,
        name: part(headers::WAIT_FUNCTION)?,
    };
    // A context alone names no consumer: the wait is for the whole stage, as without it.
    let names_consumer = |f: &WaitFunction| !f.processor.is_empty() || !f.name.is_empty();
    let wait_function = names_consumer(&wait_function).then_some(wait_function);
    let wait_tail = command_header(headers, headers::WAIT_TAIL_STAGE)?
        .map(|name| -> Result<WaitTail, InputError> {
            let stage: CommandStage =
                name.parse().map_err(|e: wow_core::command::UnknownStage| {
                    InputError::bad(
                        ErrorCode::IllegalArgument,
                        headers::WAIT_TAIL_STAGE,
                        e.to_string(),
                    )
                })?;
            let function = WaitFunction {
                context: part(headers::WAIT_TAIL_CONTEXT)?,
                processor: part(headers::WAIT_TAIL_PROCESSOR)?,
                name: part(headers::WAIT_TAIL_FUNCTION)?,
            };
            let tail = WaitTail::new(stage);
            Ok(if names_consumer(&function) {
                tail.for_wait_function(function)
            } else {
                tail
            })
        })
        .transpose()?;
    if wait_tail.is_none() {
        for named in [
            headers::WAIT_TAIL_CONTEXT,
            headers::WAIT_TAIL_PROCESSOR,
            headers::WAIT_TAIL_FUNCTION,
        ] {
            if command_header(headers, named)?.is_some() {
                return Err(InputError::bad(
                    ErrorCode::IllegalArgument,
                    named,
                    format!("names a tail consumer without {}", headers::WAIT_TAIL_STAGE),
                ));
            }
        }
    }
    let owner_id = owned_id(headers, headers::OWNER_ID)?;
    let space_id = owned_id(headers, headers::SPACE_ID)?;
    Ok(CommandOptions {
        owner_id,
        space_id,
        request_id,
        stage,
        timeout,
        expected_version,
        stream,
        wait_function,
        wait_tail,
    })
}

/// The owner or space id a header names, by the rules of an aggregate id; absent or empty:
/// none.
pub(crate) fn owned_id(headers: &HeaderMap, name: &str) -> Result<Option<String>, InputError> {
    match command_header(headers, name)?.map(str::trim) {
        None | Some("") => Ok(None),
        Some(id) => check_id(name, id, true).map(|()| Some(id.to_owned())),
    }
}

/// Checks an id: 1 to 128 bytes, no control characters; an aggregate id also only
/// `[A-Za-z0-9._:-]`.
pub(crate) fn check_id(name: &str, id: &str, aggregate: bool) -> Result<(), InputError> {
    if id.is_empty() || id.len() > MAX_ID_BYTES {
        return Err(InputError::bad(
            ErrorCode::IllegalArgument,
            name,
            format!("must be 1 to {MAX_ID_BYTES} bytes"),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(InputError::bad(
            ErrorCode::IllegalArgument,
            name,
            "must not contain control characters",
        ));
    }
    if aggregate {
        wow_core::check_aggregate_id(id)
            .map_err(|rule| InputError::bad(ErrorCode::IllegalArgument, name, rule))?;
    }
    Ok(())
}

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

/// Reads the JSON body, at most `limit` bytes; an empty body is `{}`.
///
/// A body whose `Content-Length` (which hyper reports as the body's exact size hint) is
/// above `limit` is refused before anything is read, so a client that announces a huge body
/// and sends nothing holds nothing.
pub(crate) async fn body(body: Body, limit: usize) -> Result<Value, BodyError> {
    read_json(body, limit, true).await
}

/// Reads a query's JSON body, at most `limit` bytes: no body at all is `{}`; anything else
/// must be JSON (whitespace alone is not).
pub(crate) async fn query_body(body: Body, limit: usize) -> Result<Value, BodyError> {
    read_json(body, limit, false).await
}

/// Reads a JSON body; `{}` when it is empty, or (with `whitespace_is_empty`) only whitespace.
async fn read_json(
    body: Body,
    limit: usize,
    whitespace_is_empty: bool,
) -> Result<Value, BodyError> {
    let announced = body.size_hint().lower();
    if usize::try_from(announced).map_or(true, |announced| announced > limit) {
        return Err(BodyError::Announced { announced, limit });
    }
    let bytes = axum::body::to_bytes(body, limit)
        .await
        .map_err(|error| BodyError::from_read(error, limit))?;
    let empty = if whitespace_is_empty {
        bytes.iter().all(u8::is_ascii_whitespace)
    } else {
        bytes.is_empty()
    };
    if empty {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_slice::<crate::strict_json::StrictValue>(&bytes)
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

    #[test]
    fn aggregate_ids_are_checked() {
        assert!(check_id("id", "acc-1.a_b:c", true).is_ok());
        assert!(check_id("id", "", true).is_err());
        assert!(check_id("id", "a b", true).is_err());
        assert!(check_id("id", "a/b", true).is_err());
        assert!(check_id("id", &"a".repeat(129), true).is_err());
        assert!(check_id("id", "with space ok", false).is_ok());
        assert!(check_id("id", "tab\there", false).is_err());
    }

    #[test]
    fn command_headers_must_be_visible_ascii_and_say_which() {
        use axum::http::HeaderValue;
        let mut headers = HeaderMap::new();
        headers.insert(
            "command-request-id",
            HeaderValue::from_static("with space ok"),
        );
        assert_eq!(
            command_header(&headers, "Command-Request-Id").unwrap(),
            Some("with space ok")
        );
        for bad in [&b"a\tb"[..], b"caf\xc3\xa9", b"\xff"] {
            headers.insert(
                "command-aggregate-id",
                HeaderValue::from_bytes(bad).unwrap(),
            );
            let error = options(&headers, &HttpConfig::default()).unwrap_err();
            assert_eq!(error.binding_errors[0].name, "Command-Aggregate-Id");
            assert_eq!(error.binding_errors[0].msg, "must be visible ASCII");
        }
    }

    #[tokio::test]
    async fn a_body_announced_over_the_limit_is_refused_unread_with_413() {
        let announced = Body::new(http_body_util::Full::new(axum::body::Bytes::from(vec![
            b' ';
            300
        ])));
        let error = body(announced, 256).await.unwrap_err();
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
}
