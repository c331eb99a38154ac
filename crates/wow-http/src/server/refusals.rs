//! The answers the server gives before a request reaches a route: a header too long (431)
//! and a connection past the limit (503). Both carry `{errorCode, errorMsg}` and
//! `Wow-Error-Code`, as every other error does.

use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;

use crate::fallback::error_response;

/// The longest header name quoted in an answer; a longer one is cut.
const QUOTED_NAME_BYTES: usize = 64;

/// The 431 answer to a request with a header name or value longer than `limit` bytes,
/// naming the first such header; `None` when every header fits.
pub(crate) fn header_too_long(headers: &HeaderMap, limit: usize) -> Option<Response> {
    let (name, _) = headers
        .iter()
        .find(|(name, value)| value.len() > limit || name.as_str().len() > limit)?;
    Some(error_response(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "BadRequest",
        format!("header {} is longer than {limit} bytes", display_name(name)),
    ))
}

/// The 503 answer to a connection past `max_connections`; hyper closes the connection after
/// it (keep-alive is off on those connections).
pub(crate) fn busy(max_connections: usize) -> Response {
    let mut response = error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        format!(
            "the server is serving its limit of {max_connections} connections; try again shortly"
        ),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// `command-request-id` as `Command-Request-Id`, at most [`QUOTED_NAME_BYTES`] long.
fn display_name(name: &HeaderName) -> String {
    let mut shown: String = name
        .as_str()
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join("-");
    if shown.len() > QUOTED_NAME_BYTES {
        // Header names are ASCII, so any byte index is a char boundary.
        shown.truncate(QUOTED_NAME_BYTES);
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_first_long_header_is_named_in_its_usual_case() {
        let mut headers = HeaderMap::new();
        headers.insert("accept", HeaderValue::from_static("*/*"));
        headers.insert(
            "command-request-id",
            HeaderValue::from_str(&"r".repeat(20)).unwrap(),
        );
        let answer = header_too_long(&headers, 16).unwrap();
        assert_eq!(answer.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        assert_eq!(answer.headers()["wow-error-code"], "BadRequest");
        assert!(header_too_long(&headers, 20).is_none());
        assert_eq!(
            display_name(&HeaderName::from_static("command-request-id")),
            "Command-Request-Id"
        );
        let long = HeaderName::from_bytes("x".repeat(100).as_bytes()).unwrap();
        assert_eq!(
            display_name(&long).len(),
            QUOTED_NAME_BYTES + '…'.len_utf8()
        );
    }
}
