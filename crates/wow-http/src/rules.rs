//! The rules every answer of the API keeps, applied once over every route, every prefix and
//! the fallbacks ([`ApiRules`]):
//!
//! - **Paths that are not text**: a segment that is not UTF-8 once percent-decoded
//!   (`/account/%FF/state`), or that holds NUL (`/unique-key/sku/%00`, which PostgreSQL cannot
//!   hold in text and SQLite can: one answer on every store), is answered 400
//!   `IllegalArgument` before any route runs, as the API answers bad input, not by axum's
//!   `Path` rejection (a `text/plain` 400 without a code). Nothing is recorded.
//! - **`Wow-Error-Code` on every error**: an error answer whose JSON body names an
//!   `errorCode` gets the header when its route did not set it ([`error_code_header`]), so
//!   no route (a domain's merged-in ones included) can answer without it.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use tower::{Layer, Service};
use wow_core::ErrorCode;

use crate::error::ApiError;
use crate::status::ERROR_CODE_HEADER;

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

/// The largest error body read to find its `errorCode` (error bodies are small JSON objects).
const MAX_ERROR_BODY: u64 = 64 * 1024;

/// Sets `Wow-Error-Code` on an error answer that lacks it, from the `errorCode` of its JSON
/// body. Answers that are not errors, already carry the header, are not JSON, or whose body
/// is not known in full up to [`MAX_ERROR_BODY`] bytes (a stream) pass unchanged.
async fn error_code_header(response: Response) -> Response {
    let status = response.status();
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let size = response.body().size_hint().exact();
    if !(status.is_client_error() || status.is_server_error())
        || response.headers().contains_key(ERROR_CODE_HEADER)
        || !json
        || size.is_none_or(|size| size > MAX_ERROR_BODY)
    {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // A body of an exact, small size is in memory: reading it cannot wait or fail.
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY as usize).await else {
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::InternalServerError,
            "an error answer could not be read",
        )
        .into_response();
    };
    let code = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|body| {
            let code = body.get("errorCode")?.as_str()?;
            HeaderValue::from_str(code).ok()
        });
    if let Some(code) = code {
        parts.headers.insert(ERROR_CODE_HEADER, code);
    }
    Response::from_parts(parts, Body::from(bytes))
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
            Ok(error_code_header(response).await)
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
