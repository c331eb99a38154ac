//! The operator's routes: `/metrics`, `/metrics.json` and the operations page (`/ui`,
//! `/ui/app.js`, `/ui/app.css`). They show every tenant's counters, so once any token is
//! configured ([`HttpConfig::operator_gated`]) they answer only an operator token
//! ([`HttpConfig::operator_tokens`]):
//!
//! - `Authorization: Bearer TOKEN` (a Prometheus scrape, `curl`), or
//! - the cookie [`COOKIE`], which a browser gets by opening `/ui?token=TOKEN` once: the answer
//!   is `303 See Other` to `ui` (the token gone from the address bar and the history) with
//!   `Set-Cookie: wow-operator=TOKEN; Path=/; HttpOnly; SameSite=Strict` (a session cookie,
//!   gone when the browser closes; no script can read it, no other site's request carries it).
//!   The page's own files and its `/metrics.json` then load with it.
//!
//! Without one: 401 `Unauthorized` with `WWW-Authenticate: Bearer`; with a tenant's token (of
//! `auth_tokens`) and no operator token: 403 `Forbidden` (a tenant's token is known, and is
//! not an operator's); two `Authorization` headers: 400 `BadRequest`. Each with the API's
//! error body and `Wow-Error-Code`. With no token configured at all the routes answer anyone,
//! and `?token=` is ignored.
//!
//! The cookie is read on these routes only: no tenant's route (commands above all) takes it,
//! so another site cannot make a browser act with it. The operator's two writes, the built-in
//! delete and recover of an aggregate whose lifecycle is
//! [`Lifecycle::Operator`](wow_core::aggregate::Lifecycle::Operator) (SPEC DM-6) and the
//! release of a unique key (`DELETE /unique-key/{space}/{value}`, SPEC DM-1), take the bearer
//! token only ([`permits_command`]), with the same answers; the release records the token's
//! fingerprint ([`token_fingerprint`]), never the token.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::{bearer_token, NoTenant};
use crate::config::HttpConfig;
use crate::error::ApiError;
use crate::state::HttpState;

/// The cookie that carries the operator token of a browser signed in by `/ui?token=`.
pub(crate) const COOKIE: &str = "wow-operator";

/// Why a request does not reach an operator's route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Refused {
    /// No operator token, and no tenant's token either (401).
    #[error("an operator token is required")]
    Missing,
    /// A tenant's token, which is not an operator's (403).
    #[error("a tenant's token is not an operator token")]
    TenantToken,
    /// More than one `Authorization` header (400).
    #[error("more than one Authorization header")]
    Ambiguous,
}

/// 401 with the challenge, 403 or 400, each with a code and `Wow-Error-Code`.
impl From<Refused> for ApiError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Missing => ApiError::new(
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                "an operator token is required: send `Authorization: Bearer TOKEN`, or open /ui?token=TOKEN once in a browser",
            )
            .with_header(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")),
            Refused::TenantToken => ApiError::forbidden(
                "a tenant's token is not an operator token: this route takes one of the operator tokens (WOW_OPERATOR_TOKENS)",
            ),
            Refused::Ambiguous => NoTenant::AmbiguousCredentials.into(),
        }
    }
}

/// Whether `token` is one of the operator's.
fn is_operator(config: &HttpConfig, token: &str) -> bool {
    config.operator_tokens.contains(token.trim())
}

/// The values of the cookie [`COOKIE`] the request carries (in any `Cookie` header).
fn cookies(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name.trim() == COOKIE).then(|| value.trim().trim_matches('"'))
        })
}

/// Whether the request reaches an operator's route: always when the routes are not gated;
/// else with an operator token as its bearer token or in its cookie.
fn check(config: &HttpConfig, headers: &HeaderMap) -> Result<(), Refused> {
    check_with(config, headers, true)
}

/// Whether the request may send an operator's command (the built-in delete and recover of an
/// aggregate whose lifecycle is `Operator`): always when no token is configured; else with an
/// operator token as its bearer token. The page's cookie is not read: no other site can make
/// a browser delete with it. Refused: 401 (with `WWW-Authenticate: Bearer`) without one, 403
/// `Forbidden` with a tenant's token, 400 with two `Authorization` headers.
pub(crate) fn permits_command(config: &HttpConfig, headers: &HeaderMap) -> Result<(), ApiError> {
    check_with(config, headers, false).map_err(ApiError::from)
}

/// The SHA-256 fingerprint of the request's bearer token (lowercase hex): who did an
/// operator's action, for its audit record, without the token itself. `None` when the request
/// bears no token (no token is configured, so any caller may act).
pub(crate) fn token_fingerprint(headers: &HeaderMap) -> Option<String> {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(bearer_token)?;
    let digest = Sha256::digest(token.trim().as_bytes());
    let mut hex = String::with_capacity(digest.len() * 2);
    for byte in digest {
        let _ = write!(hex, "{byte:02x}");
    }
    Some(hex)
}

/// [`check`], reading the cookie too when `cookie`.
fn check_with(config: &HttpConfig, headers: &HeaderMap, cookie: bool) -> Result<(), Refused> {
    if !config.operator_gated() {
        return Ok(());
    }
    let mut given = headers.get_all(header::AUTHORIZATION).iter();
    let first = given.next();
    if given.next().is_some() {
        return Err(Refused::Ambiguous);
    }
    let bearer = first
        .and_then(|value| value.to_str().ok())
        .and_then(bearer_token);
    if bearer.is_some_and(|token| is_operator(config, token))
        || (cookie && cookies(headers).any(|token| is_operator(config, token)))
    {
        return Ok(());
    }
    match bearer {
        Some(token) if config.auth_tokens.contains_key(token.trim()) => Err(Refused::TenantToken),
        _ => Err(Refused::Missing),
    }
}

/// The `token` of a query string, percent-decoded (`None`: none given).
fn query_token(query: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        (name == "token").then(|| percent_decode(value))
    })
}

/// `value` with its `+` and `%XX` escapes decoded (a query's form encoding); an escape that
/// is not one, or bytes that are not UTF-8, are kept as they are written.
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        let hex = |at: usize| {
            bytes
                .get(at)
                .and_then(|b| char::from(*b).to_digit(16))
                .and_then(|d| u8::try_from(d).ok())
        };
        match (byte, hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                decoded.push(high * 16 + low);
                i += 3;
            }
            (b'+', _, _) => {
                decoded.push(b' ');
                i += 1;
            }
            _ => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(decoded).unwrap_or_else(|_| value.to_owned())
}

/// Whether `token` can be a cookie's value as it is: `A-Z a-z 0-9 - . _ ~ + / =`, not empty.
pub(crate) fn cookie_safe(token: &str) -> bool {
    !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b))
}

/// Whether `token` can be an operator token: not empty, and only `A-Z a-z 0-9 - . _ ~ + / =`
/// (a bearer token's characters, which a cookie carries as they are). `Err` is the rule it
/// breaks, without the token.
///
/// # Errors
///
/// The rule `token` breaks.
pub fn check_operator_token(token: &str) -> Result<(), &'static str> {
    if token.is_empty() {
        return Err("is empty");
    }
    if !cookie_safe(token) {
        return Err("may hold only A-Z a-z 0-9 - . _ ~ + / =");
    }
    Ok(())
}

/// `GET /ui?token=TOKEN`: an operator token is answered 303 to the page with the cookie set;
/// anything else as [`check`] answers a request bearing it.
fn sign_in(config: &HttpConfig, token: &str) -> Result<Response, ApiError> {
    let token = token.trim();
    if !is_operator(config, token) {
        return Err(if config.auth_tokens.contains_key(token) {
            Refused::TenantToken
        } else {
            Refused::Missing
        }
        .into());
    }
    let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
    let cookie = cookie_safe(token)
        .then(|| HeaderValue::from_str(&cookie).ok())
        .flatten()
        .ok_or_else(|| {
            ApiError::illegal_argument(
                "this operator token holds characters a cookie cannot carry: send it as `Authorization: Bearer` instead",
            )
        })?;
    let mut response = (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, HeaderValue::from_static("ui")),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
    )
        .into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    tracing::info!("an operator signed in to the operations page");
    Ok(response)
}

/// The route layer over the operator's routes: a request without an operator token (when the
/// routes are gated) is refused before the route runs; `GET /ui?token=` signs a browser in.
pub(crate) async fn require(
    State(state): State<HttpState>,
    matched: Option<MatchedPath>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let config = state.config();
    if config.operator_gated() {
        if matched.as_ref().map(MatchedPath::as_str) == Some("/ui") {
            if let Some(token) = request.uri().query().and_then(query_token) {
                return sign_in(config, &token);
            }
        }
        check(config, request.headers())?;
    }
    Ok(next.run(request).await)
}

/// The gate of an operator's action on the service's state (firing or cancelling a pending
/// deadline): an operator's bearer token when any token is configured, as
/// [`permits_command`] answers. The page's cookie is not read: no other site can make a
/// browser act with it.
pub(crate) async fn require_bearer(
    State(state): State<HttpState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    permits_command(state.config(), request.headers())?;
    Ok(next.run(request).await)
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use axum::http::{header, HeaderMap, HeaderValue};

    use super::{check, check_with, cookie_safe, query_token, Refused};
    use crate::binding::TokenBinding;
    use crate::config::HttpConfig;

    fn config() -> HttpConfig {
        HttpConfig {
            auth_tokens: HashMap::from([("ta".to_owned(), TokenBinding::tenant("tenant-a"))]),
            operator_tokens: HashSet::from(["op".to_owned()]),
            ..HttpConfig::default()
        }
    }

    fn headers(pairs: &[(header::HeaderName, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn an_operator_token_is_read_from_the_bearer_or_the_cookie_and_a_tenants_is_refused() {
        let config = config();
        let auth = header::AUTHORIZATION;
        let cookie = header::COOKIE;
        assert_eq!(check(&config, &headers(&[])), Err(Refused::Missing));
        assert_eq!(
            check(&config, &headers(&[(auth.clone(), "Bearer op")])),
            Ok(())
        );
        assert_eq!(
            check(&config, &headers(&[(auth.clone(), "Bearer ta")])),
            Err(Refused::TenantToken)
        );
        assert_eq!(
            check(&config, &headers(&[(auth.clone(), "Bearer nope")])),
            Err(Refused::Missing)
        );
        assert_eq!(
            check(
                &config,
                &headers(&[(cookie.clone(), "a=b; wow-operator=op")])
            ),
            Ok(())
        );
        // The page sends the tenant's token beside the cookie: the cookie signs it in.
        assert_eq!(
            check(
                &config,
                &headers(&[
                    (auth.clone(), "Bearer ta"),
                    (cookie.clone(), "wow-operator=op")
                ])
            ),
            Ok(())
        );
        assert_eq!(
            check(&config, &headers(&[(cookie.clone(), "wow-operator=ta")])),
            Err(Refused::Missing)
        );
        assert_eq!(
            check(
                &config,
                &headers(&[(auth.clone(), "Bearer op"), (auth, "Bearer op")])
            ),
            Err(Refused::Ambiguous)
        );
        assert_eq!(check(&HttpConfig::default(), &headers(&[])), Ok(()));
    }

    #[test]
    fn an_operators_command_takes_the_bearer_token_and_never_the_cookie() {
        let config = config();
        let auth = header::AUTHORIZATION;
        let cookie = header::COOKIE;
        assert_eq!(
            check_with(&config, &headers(&[(auth.clone(), "Bearer op")]), false),
            Ok(())
        );
        assert_eq!(
            check_with(&config, &headers(&[(cookie, "wow-operator=op")]), false),
            Err(Refused::Missing)
        );
        assert_eq!(
            check_with(&config, &headers(&[(auth, "Bearer ta")]), false),
            Err(Refused::TenantToken)
        );
        assert_eq!(
            check_with(&HttpConfig::default(), &headers(&[]), false),
            Ok(())
        );
    }

    #[test]
    fn the_query_token_is_decoded_and_a_cookie_takes_only_safe_characters() {
        assert_eq!(query_token("token=a%2Fb%3D"), Some("a/b=".to_owned()));
        assert_eq!(query_token("x=1&token=op"), Some("op".to_owned()));
        assert_eq!(query_token("x=1"), None);
        assert_eq!(query_token("token"), Some(String::new()));
        assert!(cookie_safe("Abc-._~+/="));
        for unsafe_token in ["", "a b", "a;b", "a,b", "a\"b", "é"] {
            assert!(!cookie_safe(unsafe_token), "{unsafe_token:?}");
        }
    }
}
