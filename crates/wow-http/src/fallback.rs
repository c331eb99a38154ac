//! Answers for requests no route takes: an unknown path is 404 `NotFound`, a known path with
//! another method is 405; both carry a body with a code and `Wow-Error-Code`, as every other
//! error does.

use std::collections::HashSet;
use std::sync::Arc;

use axum::http::{HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::json;
use wow_core::aggregate::AggregateRegistry;

use crate::status::ERROR_CODE_HEADER;

/// Paths that are the service's own, not an aggregate's.
const FIXED: [&str; 4] = ["health", "metrics", "openapi.json", "compensation"];

/// An error answer of a query or a route: `{errorCode, errorMsg}` with `Wow-Error-Code`.
pub(crate) fn error_response(status: StatusCode, code: &'static str, message: String) -> Response {
    let mut response = (
        status,
        Json(json!({"errorCode": code, "errorMsg": message, "succeeded": false})),
    )
        .into_response();
    response
        .headers_mut()
        .insert(ERROR_CODE_HEADER, HeaderValue::from_static(code));
    response
}

fn not_found(method: &Method, uri: &Uri) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("no route answers {method} {}", uri.path()),
    )
}

/// Adds the 404 and 405 answers to `router`, after every route is in it (call it again after
/// merging routes of your own). A path whose first segment names no aggregate of `registry`
/// and no route of the service is 404 whatever the method.
pub fn error_fallbacks(router: Router, registry: &AggregateRegistry) -> Router {
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
                    return not_found(&method, &uri);
                }
                error_response(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "MethodNotAllowed",
                    format!("{} does not answer {method}", uri.path()),
                )
            }
        })
        .fallback(|method: Method, uri: Uri| async move { not_found(&method, &uri) })
}
