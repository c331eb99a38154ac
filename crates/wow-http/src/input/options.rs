//! The command headers of docs/http-api.md, read into [`CommandOptions`]: each header by its own
//! function, in the order they are checked (the first bad one is the one answered).

use std::time::Duration;

use axum::http::HeaderMap;
use wow_core::command::{
    headers, UnknownStage, WaitFunction, TRACEPARENT_HEADER, TRACESTATE_HEADER,
};
use wow_core::{CommandStage, ErrorCode};
use wow_runtime::command::WaitTail;

use super::InputError;
use crate::config::HttpConfig;
use crate::ids::{Id, RequestId};

/// What a request asked for, beyond its body.
#[derive(Debug)]
pub(crate) struct CommandOptions {
    /// `Command-Request-Id`: the id of the intent (SPEC ID-3).
    pub(crate) request_id: Option<String>,
    /// `None`: no `Command-Wait-Stage`; the command's kind decides (`SENT` for a void
    /// command, `PROCESSED` otherwise).
    pub(crate) stage: Option<CommandStage>,
    /// `Command-Wait-Timeout`, or the configured default.
    pub(crate) timeout: Duration,
    /// `Command-Aggregate-Version`: the version the command expects the aggregate at.
    pub(crate) expected_version: Option<u64>,
    /// Whether the caller accepts `text/event-stream`: one event per stage.
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
    /// `Content-Type`, as sent: a body must be JSON ([`super::body`]).
    pub(crate) content_type: Option<String>,
    /// The W3C `traceparent` and `tracestate` the command carries on (SPEC OB-1); empty when
    /// the request has no valid `traceparent` (the gateway then starts a trace). Never an
    /// error: a malformed trace context is ignored, as W3C Trace Context asks.
    pub(crate) trace: Vec<(String, String)>,
}

impl CommandOptions {
    /// Reads the command headers of docs/http-api.md from `headers`; the first that is wrong is
    /// the error.
    pub(crate) fn read(headers: &HeaderMap, config: &HttpConfig) -> Result<Self, InputError> {
        // Read by the create route before this; an unreadable one would pass there as an
        // empty id and be refused as "must be 1 to 128 bytes", which is not what is wrong.
        command_header(headers, headers::AGGREGATE_ID)?;
        let request_id = request_id(headers)?;
        let stage = stage(headers, headers::WAIT_STAGE)?;
        let timeout = timeout(headers, config)?;
        let expected_version = expected_version(headers)?;
        let stream =
            header(headers, "Accept")?.is_some_and(|accept| accept.contains("text/event-stream"));
        let wait_function = wait_function(
            headers,
            [
                headers::WAIT_CONTEXT,
                headers::WAIT_PROCESSOR,
                headers::WAIT_FUNCTION,
            ],
        )?;
        let wait_tail = wait_tail(headers)?;
        let content_type = header(headers, "Content-Type")?.map(str::to_owned);
        Ok(CommandOptions {
            trace: wow_runtime::trace_context::from_request(
                headers
                    .get(TRACEPARENT_HEADER)
                    .and_then(|value| value.to_str().ok()),
                headers
                    .get(TRACESTATE_HEADER)
                    .and_then(|value| value.to_str().ok()),
            ),
            content_type,
            owner_id: owned_id(headers, headers::OWNER_ID)?,
            space_id: owned_id(headers, headers::SPACE_ID)?,
            request_id,
            stage,
            timeout,
            expected_version,
            stream,
            wait_function: Some(wait_function).filter(names_consumer),
            wait_tail,
        })
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

/// A `Command-*` header (`name` as docs/http-api.md spells it) as text: `None` when absent; an
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

/// `Command-Request-Id`, by the rules of a request id.
fn request_id(headers: &HeaderMap) -> Result<Option<String>, InputError> {
    command_header(headers, headers::REQUEST_ID)?
        .map(|id| {
            RequestId::parse(id)
                .map(RequestId::into_string)
                .map_err(|rule| {
                    InputError::bad(ErrorCode::IllegalArgument, headers::REQUEST_ID, rule)
                })
        })
        .transpose()
}

/// The stage the header `name` names (`Command-Wait-Stage`, `Command-Wait-Tail-Stage`).
fn stage(headers: &HeaderMap, name: &str) -> Result<Option<CommandStage>, InputError> {
    command_header(headers, name)?
        .map(|stage| {
            stage.parse().map_err(|e: UnknownStage| {
                InputError::bad(ErrorCode::IllegalArgument, name, e.to_string())
            })
        })
        .transpose()
}

/// `Command-Wait-Timeout` in milliseconds, from 1 to the configured longest wait; absent,
/// the default wait.
fn timeout(headers: &HeaderMap, config: &HttpConfig) -> Result<Duration, InputError> {
    let Some(text) = command_header(headers, headers::WAIT_TIMEOUT)? else {
        return Ok(config.default_wait_timeout);
    };
    let bad =
        |rule: String| InputError::bad(ErrorCode::IllegalArgument, headers::WAIT_TIMEOUT, rule);
    let millis: u64 = text
        .trim()
        .parse()
        .map_err(|_| bad("must be a whole number of milliseconds".to_owned()))?;
    let timeout = Duration::from_millis(millis);
    if millis == 0 || timeout > config.max_wait_timeout {
        return Err(bad(format!(
            "must be between 1 and {} ms",
            config.max_wait_timeout.as_millis()
        )));
    }
    Ok(timeout)
}

/// `Command-Aggregate-Version`: the version the command expects the aggregate at.
fn expected_version(headers: &HeaderMap) -> Result<Option<u64>, InputError> {
    command_header(headers, headers::AGGREGATE_VERSION)?
        .map(|text| {
            text.trim().parse::<u64>().map_err(|_| {
                InputError::bad(
                    ErrorCode::IllegalArgument,
                    headers::AGGREGATE_VERSION,
                    "must be a non-negative whole number",
                )
            })
        })
        .transpose()
}

/// The consumer the headers `[context, processor, function]` name, each trimmed (absent:
/// empty); whether it names one is for [`names_consumer`] to say.
fn wait_function(
    headers: &HeaderMap,
    [context, processor, name]: [&str; 3],
) -> Result<WaitFunction, InputError> {
    let part = |name: &str| -> Result<String, InputError> {
        Ok(command_header(headers, name)?
            .unwrap_or_default()
            .trim()
            .to_owned())
    };
    Ok(WaitFunction {
        context: part(context)?,
        processor: part(processor)?,
        name: part(name)?,
    })
}

/// Whether `function` names a consumer: a context alone names none (the wait is for the
/// whole stage, as without it).
fn names_consumer(function: &WaitFunction) -> bool {
    !function.processor.is_empty() || !function.name.is_empty()
}

/// The tail of a chained wait (`Command-Wait-Tail-Stage`, and the consumer its
/// `-Context`, `-Processor` and `-Function` name); a consumer without the stage is an error.
fn wait_tail(headers: &HeaderMap) -> Result<Option<WaitTail>, InputError> {
    let parts = [
        headers::WAIT_TAIL_CONTEXT,
        headers::WAIT_TAIL_PROCESSOR,
        headers::WAIT_TAIL_FUNCTION,
    ];
    let Some(stage) = stage(headers, headers::WAIT_TAIL_STAGE)? else {
        for named in parts {
            if command_header(headers, named)?.is_some() {
                return Err(InputError::bad(
                    ErrorCode::IllegalArgument,
                    named,
                    format!("names a tail consumer without {}", headers::WAIT_TAIL_STAGE),
                ));
            }
        }
        return Ok(None);
    };
    let function = wait_function(headers, parts)?;
    let tail = WaitTail::new(stage);
    Ok(Some(if names_consumer(&function) {
        tail.for_wait_function(function)
    } else {
        tail
    }))
}

/// The owner or space id a header names, by the rules of an aggregate id; absent or empty:
/// none.
pub(crate) fn owned_id(headers: &HeaderMap, name: &str) -> Result<Option<String>, InputError> {
    match command_header(headers, name)?.map(str::trim) {
        None | Some("") => Ok(None),
        Some(id) => Id::parse(id)
            .map(|id| Some(id.into_string()))
            .map_err(|invalid| {
                InputError::bad(ErrorCode::IllegalArgument, name, invalid.for_binding())
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let error = CommandOptions::read(&headers, &HttpConfig::default()).unwrap_err();
            assert_eq!(error.binding_errors[0].name, "Command-Aggregate-Id");
            assert_eq!(error.binding_errors[0].msg, "must be visible ASCII");
        }
    }
}
