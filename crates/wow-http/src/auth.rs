//! Which tenant a request acts for.

use axum::http::HeaderMap;
use wow_core::DEFAULT_TENANT_ID;

use crate::HttpConfig;

/// The tenant a request acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

/// Why a request has no tenant: auth is on and the token is missing or unknown (HTTP 401).
#[derive(Debug)]
pub(crate) struct Unauthorized;

/// The request's tenant: from its bearer token when auth is on (the header cannot override
/// it), else from `Command-Tenant-Id`, else the default tenant.
pub(crate) fn tenant(config: &HttpConfig, headers: &HeaderMap) -> Result<Tenant, Unauthorized> {
    if config.auth_tokens.is_empty() {
        let named = headers
            .get("command-tenant-id")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty());
        return Ok(Tenant(named.unwrap_or(DEFAULT_TENANT_ID).to_owned()));
    }
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or(Unauthorized)?;
    config
        .auth_tokens
        .get(token.trim())
        .map(|tenant| Tenant(tenant.clone()))
        .ok_or(Unauthorized)
}

impl Unauthorized {
    pub(crate) fn response(self) -> axum::response::Response {
        use axum::response::IntoResponse;
        let body = serde_json::json!({
            "errorCode": "Unauthorized",
            "errorMsg": "a valid bearer token is required",
            "succeeded": false,
        });
        (axum::http::StatusCode::UNAUTHORIZED, axum::Json(body)).into_response()
    }
}
