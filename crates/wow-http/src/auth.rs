//! Which tenant a request acts for.

use axum::http::HeaderMap;
use wow_core::DEFAULT_TENANT_ID;

use crate::HttpConfig;

/// The tenant a request acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

/// Why a request has no tenant; as a response, 401 with `WWW-Authenticate: Bearer` or 400
/// naming the header, each with a code.
#[derive(Debug)]
#[non_exhaustive]
pub enum NoTenant {
    /// Auth is on and the token is missing or unknown (HTTP 401).
    Unauthorized,
    /// `Command-Tenant-Id` breaks the id rules (HTTP 400); the rule it breaks.
    Invalid(&'static str),
}

/// The request's tenant: from its bearer token when auth is on (the header cannot override
/// it), else from `Command-Tenant-Id`, else the default tenant. A tenant id follows the rules
/// of an aggregate id (the default tenant's own name aside).
pub(crate) fn tenant(config: &HttpConfig, headers: &HeaderMap) -> Result<Tenant, NoTenant> {
    if config.auth_tokens.is_empty() {
        let Some(named) = headers.get(wow_core::command::headers::TENANT_ID) else {
            return Ok(Tenant(DEFAULT_TENANT_ID.to_owned()));
        };
        let named = named
            .to_str()
            .map_err(|_| NoTenant::Invalid("may hold only A-Z a-z 0-9 . _ : -"))?;
        if named != DEFAULT_TENANT_ID {
            wow_core::check_aggregate_id(named).map_err(NoTenant::Invalid)?;
        }
        return Ok(Tenant(named.to_owned()));
    }
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .ok_or(NoTenant::Unauthorized)?;
    config
        .auth_tokens
        .get(token.trim())
        .map(|tenant| Tenant(tenant.clone()))
        .ok_or(NoTenant::Unauthorized)
}

/// The tenant a domain's own route acts for, found as every built-in route finds it (the
/// bearer token when auth is on, else `Command-Tenant-Id`, else the default tenant). `Err`
/// is the answer to give: 401 with `WWW-Authenticate: Bearer`, or 400 naming the header,
/// each with a code (`NoTenant` is that answer as a response).
pub fn caller_tenant(config: &HttpConfig, headers: &HeaderMap) -> Result<Tenant, NoTenant> {
    tenant(config, headers)
}

impl axum::response::IntoResponse for NoTenant {
    fn into_response(self) -> axum::response::Response {
        self.response()
    }
}

/// The token of an `Authorization: Bearer TOKEN` value; the scheme's case does not matter
/// (RFC 9110 §11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

impl NoTenant {
    /// 401 with the challenge `WWW-Authenticate: Bearer`, or 400 naming the header; both with
    /// a code and `Wow-Error-Code`.
    pub(crate) fn response(self) -> axum::response::Response {
        match self {
            NoTenant::Unauthorized => {
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
            NoTenant::Invalid(rule) => crate::fallback::error_response(
                axum::http::StatusCode::BAD_REQUEST,
                "IllegalArgument",
                format!("Command-Tenant-Id {rule}"),
            ),
        }
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
