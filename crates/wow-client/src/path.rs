//! URLs of the HTTP API, with every path segment percent-encoded.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Everything but the unreserved characters of RFC 3986 is encoded, so that a segment holding
/// `/`, `?`, `#`, `%` or a space (a saga's request id is `{event id}/{index}`) stays one
/// segment, and the server's path extractor decodes it back to the same text.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Why a URL cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PathError {
    /// A segment is empty, `.` or `..`: URL normalisation would drop or climb it (even
    /// encoded), so the request would reach another resource.
    #[error("`{0}` cannot be sent as one path segment")]
    DotOrEmpty(String),
}

/// `base` followed by `segments`, each percent-encoded as one path segment.
pub(crate) fn url(base: &str, segments: &[&str]) -> Result<String, PathError> {
    let mut url = base.to_owned();
    for segment in segments {
        if matches!(*segment, "" | "." | "..") {
            return Err(PathError::DotOrEmpty((*segment).to_owned()));
        }
        url.push('/');
        url.extend(utf8_percent_encode(segment, SEGMENT));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_with_a_slash_stays_one_segment() {
        assert_eq!(
            url("http://h", &["account", "a-1", "requests", "0192ab/0"]).as_deref(),
            Ok("http://h/account/a-1/requests/0192ab%2F0")
        );
        assert_eq!(
            url("http://h", &["x", "a b?c#d%e"]).as_deref(),
            Ok("http://h/x/a%20b%3Fc%23d%25e")
        );
        assert_eq!(
            url("http://h", &["x", "..", "y"]),
            Err(PathError::DotOrEmpty("..".to_owned()))
        );
    }
}
