//! Answers for requests no route takes: an unknown path is 404 `NotFound`, a known path with
//! another method is 405 (with `Allow`, set by axum); both carry a body with a code and
//! `Wow-Error-Code`, as every other error does. The rules over every answer (the header on
//! every error, the 400 of a path that is not text) are the `rules` module's, applied here
//! over the merged-in routes too.

use std::collections::HashSet;
use std::sync::Arc;

use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use wow_core::aggregate::AggregateRegistry;

use crate::error::ApiError;

/// The first path segments of the service's own routes, not an aggregate's.
pub(crate) const FIXED: [&str; 10] = [
    "consumers",
    "deadlines",
    "health",
    "metrics",
    "metrics.json",
    "openapi.json",
    "compensation",
    "rebuilds",
    "ui",
    "unique-key",
];

/// An error answer: `{errorCode, errorMsg, succeeded: false}` with `Wow-Error-Code`, as
/// [`ApiError`] writes it (for the connection's own refusals, which answer before any route).
pub(crate) fn error_response(status: StatusCode, code: &'static str, message: String) -> Response {
    ApiError::new(status, code, message).into_response()
}

/// Adds the 404 and 405 answers to `router`, after every route is in it (call it again after
/// merging routes of your own), and `Wow-Error-Code` to every error answer of its routes
/// that names an `errorCode` without it. A path whose first segment names no aggregate of
/// `registry` and no route of the service is 404 whatever the method. A path with a segment
/// that is not UTF-8 once percent-decoded, or holds NUL, is 400 `IllegalArgument` with a JSON
/// body, before any route runs, on the routes merged in too.
pub fn error_fallbacks(router: Router, registry: &AggregateRegistry) -> Router {
    with_fallbacks(router, registry).layer(crate::rules::ApiRules)
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
