//! Answers for requests no route takes: an unknown path is 404 `NotFound`, a known path with
//! another method is 405 (with `Allow`, set by axum); both carry a body with a code and
//! `Wow-Error-Code`, as every other error does. And the guarantee behind "every error has
//! `Wow-Error-Code`": an error answer whose JSON body names an `errorCode` gets the header
//! here when its route did not set it, so no route (a domain's merged-in ones included) can
//! answer without it. And the JSON 400 of a path parameter that is not UTF-8 (the `paths`
//! module), over the merged-in routes too.

use std::collections::HashSet;
use std::sync::Arc;

use axum::body::{Body, HttpBody};
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use wow_core::aggregate::AggregateRegistry;
use wow_core::ErrorCode;

use crate::error::ApiError;
use crate::status::ERROR_CODE_HEADER;

/// The first path segments of the service's own routes, not an aggregate's.
pub(crate) const FIXED: [&str; 8] = [
    "deadlines",
    "health",
    "metrics",
    "metrics.json",
    "openapi.json",
    "compensation",
    "ui",
    "unique-key",
];

/// An error answer: `{errorCode, errorMsg, succeeded: false}` with `Wow-Error-Code`, as
/// [`ApiError`] writes it (for the connection's own refusals, which answer before any route).
pub(crate) fn error_response(status: StatusCode, code: &'static str, message: String) -> Response {
    ApiError::new(status, code, message).into_response()
}

/// The largest error body read to find its `errorCode` (error bodies are small JSON objects).
const MAX_ERROR_BODY: u64 = 64 * 1024;

/// Sets `Wow-Error-Code` on an error answer that lacks it, from the `errorCode` of its JSON
/// body. Answers that are not errors, already carry the header, are not JSON, or whose body
/// is not known in full up to [`MAX_ERROR_BODY`] bytes (a stream) pass unchanged.
pub(crate) async fn error_code_header(response: Response) -> Response {
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

/// Adds the 404 and 405 answers to `router`, after every route is in it (call it again after
/// merging routes of your own), and `Wow-Error-Code` to every error answer of its routes
/// that names an `errorCode` without it. A path whose first segment names no aggregate of
/// `registry` and no route of the service is 404 whatever the method. A path with a segment
/// that is not UTF-8 once percent-decoded, or holds NUL, is 400 `IllegalArgument` with a JSON
/// body, before any route runs, on the routes merged in too.
pub fn error_fallbacks(router: Router, registry: &AggregateRegistry) -> Router {
    with_fallbacks(router, registry).layer(crate::paths::ApiRules)
}

/// `router` with the 404 and 405 answers of [`error_fallbacks`], without its rules over every
/// answer (which the finished router applies once, over everything).
pub(crate) fn with_fallbacks(router: Router, registry: &AggregateRegistry) -> Router {
    let known: Arc<HashSet<String>> = Arc::new(
        registry
            .iter()
            .map(|runtime| runtime.named_aggregate().aggregate_name.clone())
            .chain(FIXED.iter().map(|fixed| (*fixed).to_owned()))
            .collect(),
    );
    router
        .method_not_allowed_fallback(move |method: Method, uri: Uri| {
            let known = known.clone();
            async move {
                let first = uri.path().trim_start_matches('/').split('/').next();
                if !first.is_some_and(|segment| known.contains(segment)) {
                    return ApiError::no_route(&method, uri.path());
                }
                ApiError::method_not_allowed(&method, uri.path())
            }
        })
        .fallback(|method: Method, uri: Uri| async move { ApiError::no_route(&method, uri.path()) })
}
