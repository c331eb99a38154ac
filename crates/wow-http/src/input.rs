//! Reading a command request: its headers, ids and body. Every failure says what is wrong
//! and which header or field it is about; nothing has been recorded when one occurs.

use std::time::Duration;

use axum::body::Body;
use axum::http::HeaderMap;
use serde_json::Value;
use wow_core::command::{BindingError, SENT};
use wow_core::{id, AggregateId, CommandResult, CommandStage, ErrorCode};

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

/// Reads the command headers of DESIGN.md §5.
pub(crate) fn options(
    headers: &HeaderMap,
    config: &HttpConfig,
) -> Result<CommandOptions, InputError> {
    let request_id = header(headers, "command-request-id")?
        .map(|id| check_id("Command-Request-Id", id, false).map(|()| id.to_owned()))
        .transpose()?;
    let stage = header(headers, "command-wait-stage")?
        .map(|name| {
            name.parse().map_err(|e: wow_core::command::UnknownStage| {
                InputError::bad(
                    ErrorCode::IllegalArgument,
                    "Command-Wait-Stage",
                    e.to_string(),
                )
            })
        })
        .transpose()?;
    let timeout = match header(headers, "command-wait-timeout")? {
        None => config.default_wait_timeout,
        Some(text) => {
            let millis: u64 = text.trim().parse().map_err(|_| {
                InputError::bad(
                    ErrorCode::IllegalArgument,
                    "Command-Wait-Timeout",
                    "must be a whole number of milliseconds",
                )
            })?;
            let timeout = Duration::from_millis(millis);
            if millis == 0 || timeout > config.max_wait_timeout {
                return Err(InputError::bad(
                    ErrorCode::IllegalArgument,
                    "Command-Wait-Timeout",
                    format!(
                        "must be between 1 and {} ms",
                        config.max_wait_timeout.as_millis()
                    ),
                ));
            }
            timeout
        }
    };
    let expected_version = header(headers, "command-aggregate-version")?
        .map(|text| {
            text.trim().parse::<u64>().map_err(|_| {
                InputError::bad(
                    ErrorCode::IllegalArgument,
                    "Command-Aggregate-Version",
                    "must be a non-negative whole number",
                )
            })
        })
        .transpose()?;
    let stream =
        header(headers, "accept")?.is_some_and(|accept| accept.contains("text/event-stream"));
    Ok(CommandOptions {
        request_id,
        stage,
        timeout,
        expected_version,
        stream,
    })
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

/// Reads the JSON body, at most `limit` bytes; an empty body is `{}`.
pub(crate) async fn body(body: Body, limit: usize) -> Result<Value, InputError> {
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        InputError::bad(
            ErrorCode::BadRequest,
            "body",
            format!("must be at most {limit} bytes"),
        )
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_slice::<crate::strict_json::StrictValue>(&bytes)
        .map(|strict| strict.0)
        .map_err(|e| {
            InputError::bad(
                ErrorCode::BadRequest,
                "body",
                format!("is not valid JSON: {e}"),
            )
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
}
