//! The rules every answer of the API keeps, applied once over every route, every prefix and
//! the fallbacks ([`ApiRules`]):
//!
//! - **Paths that are not text**: a segment that is not UTF-8 once percent-decoded
//!   (`/account/%FF/state`), or that holds NUL (`/unique-key/sku/%00`, which PostgreSQL cannot
//!   hold in text and SQLite can: one answer on every store), is answered 400
//!   `IllegalArgument` before any route runs, as the API answers bad input, not by axum's
//!   `Path` rejection (a `text/plain` 400 without a code). Nothing is recorded.
//! - **`Wow-Error-Code` on every error**: an error answer whose JSON body names an
//!   `errorCode` gets the header when its route did not set it (the `fallback` module).

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use tower::{Layer, Service};

use crate::error::ApiError;

/// Why `path` is refused: a segment that is not UTF-8 once percent-decoded, or that holds
/// NUL. `None` for a path of text.
fn refused_path(path: &str) -> Option<ApiError> {
    for segment in path.split('/') {
        if !segment.contains('%') {
            // Undecoded, the segment is the request line's text: UTF-8 with no NUL escape.
            continue;
        }
        match percent_encoding::percent_decode_str(segment).decode_utf8() {
            Err(_) => {
                return Some(ApiError::illegal_argument(format!(
                "the path segment `{segment}`: a path segment must be UTF-8 once percent-decoded"
            )))
            }
            Ok(text) if text.contains('\0') => {
                return Some(ApiError::illegal_argument(format!(
                    "the path segment `{segment}`: a path segment must not hold NUL (%00)"
                )))
            }
            Ok(_) => {}
        }
    }
    None
}

/// The layer of the API's rules (the module's list) over a router's routes and fallbacks.
/// Applied once, by [`error_fallbacks`](crate::error_fallbacks), over everything in the
/// router.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ApiRules;

impl<S> Layer<S> for ApiRules {
    type Service = WithApiRules<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WithApiRules { inner }
    }
}

/// A route (or fallback) that keeps the API's rules: see [`ApiRules`].
#[derive(Debug, Clone)]
pub(crate) struct WithApiRules<S> {
    inner: S,
}

impl<S> Service<Request> for WithApiRules<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if let Some(refusal) = refused_path(request.uri().path()) {
            return Box::pin(std::future::ready(Ok(refusal.into_response())));
        }
        let answer = self.inner.call(request);
        Box::pin(async move {
            let Ok(response) = answer.await;
            Ok(crate::fallback::error_code_header(response).await)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::refused_path;

    #[test]
    fn a_path_is_refused_only_for_a_segment_that_is_not_text() {
        for path in [
            "/account/%FF/state",
            "/unique-key/sku/%00",
            "/a/MUG%001",
            "/%C3",
        ] {
            assert!(refused_path(path).is_some(), "{path}");
        }
        for path in [
            "/account/a1/state",
            "/account/%C3%A9t%C3%A9/open",
            "/a/%25/b",
            "/",
        ] {
            assert!(refused_path(path).is_none(), "{path}");
        }
    }
}
