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
        .and_then(bearer_token)
        .ok_or(Unauthorized)?;
    config
        .auth_tokens
        .get(token.trim())
        .map(|tenant| Tenant(tenant.clone()))
        .ok_or(Unauthorized)
}

/// The token of an `Authorization: Bearer TOKEN` value; the scheme's case does not matter
/// (RFC 9110 §11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

impl Unauthorized {
    /// 401 with a code, `Wow-Error-Code` and the challenge `WWW-Authenticate: Bearer`.
    pub(crate) fn response(self) -> axum::response::Response {
        let mut response = crate::fallback::error_response(
            axum::http::StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "a valid bearer token is required".to_owned(),
        );
        response.headers_mut().insert(
            axum::http::header::WWW_AUTHENTICATE,
            axum::http::HeaderValue::from_static("Bearer"),
        );
        response
    }
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn the_bearer_scheme_is_read_whatever_its_case() {
        for value in ["Bearer t", "bearer t", "BEARER t", "  Bearer t"] {
            assert_eq!(bearer_token(value), Some("t"), "{value}");
        }
        assert_eq!(bearer_token("Basic t"), None);
        assert_eq!(bearer_token("Bearer"), None);
    }
}
