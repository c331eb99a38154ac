//! Wow's path prefixes, each answered by the same routes:
//!
//! - `/{context}/…`, the bounded context's alias that Wow's generated clients put first;
//! - `/tenant/{tenantId}/…`, with the path's tenant as the caller's (`Command-Tenant-Id`);
//!   with auth on, the token's tenant must be the path's (else 403). A state read under it
//!   answers Wow's shape: the bare state;
//! - `/owner/{ownerId}/…`, with the path's owner as `Command-Owner-Id`; with a token bound to
//!   another owner, 403 `IllegalAccessOwnerAggregate` (SPEC TN-2).
//!
//! In that order, as Wow's paths nest them: `/bank/tenant/t1/owner/u1/account/a1/deposit`.

use axum::extract::{Path, Request};
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use tower::ServiceExt;

use crate::{auth, HttpConfig};

/// Marks a request that came in under `/tenant/{tenantId}/` or `/{context}/`: answers take
/// Wow's shapes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WowPrefixed;

/// `ANY /tenant/{tenantId}/{*rest}`: `rest` answered by `inner` in the tenant `tenantId`.
pub(crate) async fn tenant_prefixed(
    inner: Router,
    config: HttpConfig,
    Path((tenant, _)): Path<(String, String)>,
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
    request.extensions_mut().insert(WowPrefixed);
    forward(inner, 2, request).await
}

/// `ANY /owner/{ownerId}/{*rest}`: `rest` answered by `inner` for the owner `ownerId`, as if
/// it came with `Command-Owner-Id`: a command acts for that owner (its stream and snapshot
/// carry it), a query sees that owner's documents only.
pub(crate) async fn owner_prefixed(
    inner: Router,
    config: HttpConfig,
    Path((owner, _)): Path<(String, String)>,
    mut request: Request,
) -> Response {
    if let Err(rule) = wow_core::check_aggregate_id(&owner) {
        return crate::fallback::error_response(
            StatusCode::BAD_REQUEST,
            "IllegalArgument",
            format!("the owner id in the path {rule}"),
        );
    }
    let Ok(value) = HeaderValue::from_str(&owner) else {
        return crate::fallback::error_response(
            StatusCode::BAD_REQUEST,
            "IllegalArgument",
            "the owner id in the path is not a header value".to_owned(),
        );
    };
    request
        .headers_mut()
        .insert(wow_core::command::headers::OWNER_ID, value);
    // SPEC TN-2: a token bound to another owner is refused on every route under the prefix.
    if let Err(auth::Refused::Access(refused)) = auth::caller(&config, request.headers()) {
        return auth::forbidden(&refused);
    }
    forward(inner, 2, request).await
}

/// `ANY /{context}/{*rest}`: `rest` answered by `inner`. Wow's generated clients put the
/// bounded context's alias before every path (their `basePath`), as a gateway in front of
/// Wow services routes them.
///
/// No client of wow-rs's own contract (DESIGN §5) puts a context first, so answers under it
/// take Wow's shapes, as under `/tenant/{tenantId}/`: the state routes answer the bare state.
pub(crate) async fn context_prefixed(inner: Router, mut request: Request) -> Response {
    request.extensions_mut().insert(WowPrefixed);
    forward(inner, 1, request).await
}

/// Answers `request` by `inner` as if its path were what follows its first `prefix`
/// segments (the query kept). The rest is taken from the path as it came, still
/// percent-encoded, so the inner route decodes it once: a request id with `%` or `/` in a
/// look-up reads as itself under every prefix.
async fn forward(inner: Router, prefix: usize, mut request: Request) -> Response {
    let rest = raw_rest(request.uri().path(), prefix).unwrap_or_default();
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
    // see them (they match their own). Only the mark of Wow's tenant prefix goes along.
    let prefixed = request.extensions().get::<WowPrefixed>().copied();
    *request.extensions_mut() = axum::http::Extensions::new();
    if let Some(prefixed) = prefixed {
        request.extensions_mut().insert(prefixed);
    }
    match inner.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// What follows the first `segments` segments of `path` (`/a/b/rest` with 2: `rest`), as it
/// is written; `None` when the path has no more.
fn raw_rest(path: &str, segments: usize) -> Option<&str> {
    let mut rest = path.strip_prefix('/')?;
    for _ in 0..segments {
        rest = rest.split_once('/')?.1;
    }
    Some(rest)
}

#[cfg(test)]
mod tests {
    use super::raw_rest;

    #[test]
    fn the_rest_of_a_prefixed_path_keeps_its_escapes() {
        assert_eq!(
            raw_rest("/tenant/t1/account/a/requests/50%25%2Fx", 2),
            Some("account/a/requests/50%25%2Fx")
        );
        assert_eq!(raw_rest("/bank/account/a", 1), Some("account/a"));
        assert_eq!(raw_rest("/bank", 1), None);
    }
}
