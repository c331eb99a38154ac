//! Which tenant a request acts for, and which owner and space its token binds it to.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use wow_core::aggregate::AccessRefused;
use wow_core::command::headers;
use wow_core::{ErrorCode, DEFAULT_TENANT_ID};

use crate::binding::TokenBinding;
use crate::config::HttpConfig;
use crate::error::ApiError;
use crate::ids::TenantId;

/// The tenant a request acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

/// Why a request has no tenant; as a response, 401 with `WWW-Authenticate: Bearer`, or 400
/// naming the header (a tenant id that breaks the rules, two `Authorization` headers), each
/// with a code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NoTenant {
    /// Auth is on and the token is missing or unknown (HTTP 401).
    #[error("a valid bearer token is required")]
    Unauthorized,
    /// `Command-Tenant-Id` breaks the id rules (HTTP 400); the rule it breaks.
    #[error("Command-Tenant-Id {0}")]
    Invalid(&'static str),
    /// Auth is on and the request has more than one `Authorization` header (HTTP 400): which
    /// one acts is not the server's to guess.
    #[error("more than one Authorization header: send exactly one")]
    AmbiguousCredentials,
}

/// The request's tenant: from its bearer token when auth is on (the header cannot override
/// it), else from `Command-Tenant-Id`, else the default tenant. A tenant id follows the rules
/// of an aggregate id (the default tenant's own name aside).
pub(crate) fn tenant(config: &HttpConfig, headers: &HeaderMap) -> Result<Tenant, NoTenant> {
    if config.auth_tokens.is_empty() {
        return named_tenant(headers);
    }
    binding(config, headers).map(|binding| Tenant(binding.tenant.clone()))
}

/// The tenant `Command-Tenant-Id` names, else the default tenant, whatever the token: how a
/// caller with no token's tenant (auth off, or an operator) names the one it acts in.
pub(crate) fn named_tenant(headers: &HeaderMap) -> Result<Tenant, NoTenant> {
    let Some(named) = headers.get(headers::TENANT_ID) else {
        return Ok(Tenant(DEFAULT_TENANT_ID.to_owned()));
    };
    let named = named
        .to_str()
        .map_err(|_| NoTenant::Invalid("may hold only A-Z a-z 0-9 . _ : -"))?;
    let named = TenantId::parse(named).map_err(NoTenant::Invalid)?;
    Ok(Tenant(named.into_string()))
}

/// The binding of the request's bearer token (auth on).
fn binding<'c>(config: &'c HttpConfig, headers: &HeaderMap) -> Result<&'c TokenBinding, NoTenant> {
    let mut given = headers.get_all(header::AUTHORIZATION).iter();
    let first = given.next();
    if given.next().is_some() {
        return Err(NoTenant::AmbiguousCredentials);
    }
    let token = first
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .ok_or(NoTenant::Unauthorized)?;
    config
        .auth_tokens
        .get(token.trim())
        .ok_or(NoTenant::Unauthorized)
}

/// Who a request acts for: its tenant, and the owner and space its token binds it to
/// (`None`: not bound, every owner's or space's aggregates of the tenant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    /// The tenant it acts for.
    pub(crate) tenant: String,
    /// The owner its token binds it to.
    pub(crate) owner: Option<String>,
    /// The space its token binds it to.
    pub(crate) space: Option<String>,
}

impl Caller {
    /// Whether the caller is bound to an owner or a space.
    pub(crate) fn is_bound(&self) -> bool {
        self.owner.is_some() || self.space.is_some()
    }
}

/// Why a request is refused before its route runs: no tenant, or headers that name another
/// owner or space than its token's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    /// No tenant: no valid token, or a tenant id that breaks the rules.
    #[error("{0}")]
    Tenant(NoTenant),
    /// Headers that name another owner or space than the token's.
    #[error("{}", .0.message)]
    Access(AccessRefused),
}

/// 401, 400 or 403, each with a code and `Wow-Error-Code`.
impl From<Refused> for ApiError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Tenant(refused) => refused.into(),
            Refused::Access(refused) => refused.into(),
        }
    }
}

/// 403 with the refusal's code (`IllegalAccessOwnerAggregate`, `IllegalAccessSpaceAggregate`).
impl From<AccessRefused> for ApiError {
    fn from(refused: AccessRefused) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, refused.code, refused.message)
    }
}

/// The request's caller: its tenant as [`tenant`] finds it, and its token's owner and space.
///
/// The token wins, as for the tenant: a bound caller's `Command-Owner-Id` (or the path's
/// `/owner/{ownerId}/`) naming another owner than the token's is refused
/// (`IllegalAccessOwnerAggregate`), and its `Wow-Space-Id` naming another space than the
/// token's (`IllegalAccessSpaceAggregate`); naming its own is the same as naming none.
pub(crate) fn caller(config: &HttpConfig, headers: &HeaderMap) -> Result<Caller, Refused> {
    let tenant = tenant(config, headers).map_err(Refused::Tenant)?.0;
    let Ok(binding) = binding(config, headers) else {
        return Ok(Caller {
            tenant,
            owner: None,
            space: None,
        });
    };
    let named = |header: &str| {
        headers
            .get(header)
            .map(|value| value.to_str().unwrap_or_default().trim().to_owned())
            .filter(|value| !value.is_empty())
    };
    for (bound, header, code, what) in [
        (
            &binding.owner,
            headers::OWNER_ID,
            ErrorCode::IllegalAccessOwnerAggregate,
            "owner",
        ),
        (
            &binding.space,
            headers::SPACE_ID,
            ErrorCode::IllegalAccessSpaceAggregate,
            "space",
        ),
    ] {
        if let (Some(bound), Some(named)) = (bound, named(header)) {
            if *bound != named {
                return Err(Refused::Access(AccessRefused {
                    code,
                    message: format!("{header} names another {what} than the token's"),
                }));
            }
        }
    }
    Ok(Caller {
        tenant,
        owner: binding.owner.clone(),
        space: binding.space.clone(),
    })
}

/// The tenant a domain's own route acts for, found as every built-in route finds it (the
/// bearer token when auth is on, else `Command-Tenant-Id`, else the default tenant). `Err`
/// is the answer to give: 401 with `WWW-Authenticate: Bearer`, or 400 naming the header,
/// each with a code (`NoTenant` is that answer as a response).
pub fn caller_tenant(config: &HttpConfig, headers: &HeaderMap) -> Result<Tenant, NoTenant> {
    tenant(config, headers)
}

impl IntoResponse for NoTenant {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

/// The token of an `Authorization: Bearer TOKEN` value; the scheme's case does not matter
/// (RFC 9110 §11.1).
pub(crate) fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

/// 401 with the challenge `WWW-Authenticate: Bearer`, or 400 naming the header; both with a
/// code and `Wow-Error-Code`.
impl From<NoTenant> for ApiError {
    fn from(refused: NoTenant) -> Self {
        match refused {
            NoTenant::Unauthorized => ApiError::new(
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                "a valid bearer token is required",
            )
            .with_header(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")),
            NoTenant::Invalid(rule) => {
                ApiError::illegal_argument(format!("{} {rule}", headers::TENANT_ID))
            }
            NoTenant::AmbiguousCredentials => {
                ApiError::bad_request("more than one Authorization header: send exactly one")
            }
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
