//! Wow's resource prefix `/tenant/{tenantId}/…`: every route of the API under a tenant named in
//! the path. The request is answered by the same routes, with the path's tenant as the
//! caller's (`Command-Tenant-Id`); with auth on, the token's tenant must be the path's (else
//! 403). A state read under the prefix answers Wow's shape: the bare state.

use axum::extract::{Path, Request};
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use tower::ServiceExt;

use crate::{auth, HttpConfig};

/// Marks a request that came in under `/tenant/{tenantId}/`: answers take Wow's shapes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WowPrefixed;

/// `ANY /tenant/{tenantId}/{*rest}`: `rest` answered by `inner` in the tenant `tenantId`.
pub(crate) async fn tenant_prefixed(
    inner: Router,
    config: HttpConfig,
    Path((tenant, rest)): Path<(String, String)>,
    mut request: Request,
) -> Response {
    if tenant != wow_core::DEFAULT_TENANT_ID {
        if let Err(rule) = wow_core::check_aggregate_id(&tenant) {
            return crate::fallback::error_response(
                StatusCode::BAD_REQUEST,
                "IllegalArgument",
                format!("the tenant id in the path {rule}"),
            );
        }
    }
    if !config.auth_tokens.is_empty() {
        match auth::tenant(&config, request.headers()) {
            Ok(caller) if caller.0 == tenant => {}
            Ok(_) => {
                return crate::fallback::error_response(
                    StatusCode::FORBIDDEN,
                    "Forbidden",
                    format!("the token does not act for tenant `{tenant}`"),
                )
            }
            Err(refused) => return refused.response(),
        }
    }
    let Ok(value) = HeaderValue::from_str(&tenant) else {
        return crate::fallback::error_response(
            StatusCode::BAD_REQUEST,
            "IllegalArgument",
            "the tenant id in the path is not a header value".to_owned(),
        );
    };
    request
        .headers_mut()
        .insert(wow_core::command::headers::TENANT_ID, value);
    let query = request
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let Ok(uri) = format!("/{rest}{query}").parse::<Uri>() else {
        return crate::fallback::error_response(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "the path is not a URI".to_owned(),
        );
    };
    *request.uri_mut() = uri;
    // The outer route's path parameters live in the extensions: the inner routes must not
    // see them (they match their own).
    *request.extensions_mut() = axum::http::Extensions::new();
    request.extensions_mut().insert(WowPrefixed);
    match inner.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}
