//! Wow's path prefixes, each answered by the same routes in the same shapes as without one
//! (a prefix never changes an answer's shape):
//!
//! - `/{context}/…`, the bounded context's alias that Wow's generated clients put first;
//! - `/tenant/{tenantId}/…`, with the path's tenant as the caller's (`Command-Tenant-Id`);
//!   with auth on, the token's tenant must be the path's (else 403);
//! - `/owner/{ownerId}/…`, with the path's owner as `Command-Owner-Id`; with a token bound to
//!   another owner, 403 `IllegalAccessOwnerAggregate` (SPEC TN-2). Under it, Wow's
//!   `GET /owner/{ownerId}/{aggregate}/state` loads the aggregate whose id is the owner's
//!   (Wow's aggregates owned by their own id), answered as `GET /{aggregate}/{ownerId}/state`.
//!
//! In that order, as Wow's paths nest them: `/bank/tenant/t1/owner/u1/account/a1/deposit`.

use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Uri};
use axum::response::Response;
use axum::routing::any;
use axum::Router;
use tower::ServiceExt;
use wow_core::command::headers;

use crate::config::HttpConfig;
use crate::error::ApiError;
use crate::ids::{Id, TenantId};
use crate::state::HttpState;
use crate::{auth, fallback};

/// `routes` answered under Wow's prefixes too, nested as Wow's paths nest them:
/// `/{context}/tenant/{t}/owner/{o}/…`. Each prefix is handled here once, for every route;
/// the prefixes' own parameters (`/tenant/{tenant_id}/…`) are checked as the routes' are.
pub(crate) fn nest(routes: Router, state: &HttpState) -> Router {
    let config = state.config().clone();
    let owned = routes.clone().route(
        "/owner/{owner_id}/{*rest}",
        any(owner_prefixed).with_state(Inner {
            routes,
            config: config.clone(),
        }),
    );
    let tenanted = owned.clone().route(
        "/tenant/{tenant_id}/{*rest}",
        any(tenant_prefixed).with_state(Inner {
            routes: owned,
            config,
        }),
    );
    let mut full = tenanted.clone();
    for context in contexts(state) {
        full = full.route(
            &format!("/{context}/{{*rest}}"),
            any(context_prefixed).with_state(tenanted.clone()),
        );
    }
    full
}

/// The bounded contexts of the registry's aggregates that can be a prefix: a context named
/// like an aggregate (or a route of the service) keeps the route's meaning.
fn contexts(state: &HttpState) -> Vec<String> {
    let registry = state.registry();
    let taken = |context: &str| {
        registry.find(context).is_ok()
            || fallback::FIXED.contains(&context)
            || ["tenant", "owner"].contains(&context)
            || context.is_empty()
            || context.contains(['/', '{', '}'])
    };
    let mut contexts: Vec<String> = registry
        .iter()
        .map(|runtime| runtime.named_aggregate().context_name.clone())
        .filter(|context| !taken(context))
        .collect();
    contexts.sort();
    contexts.dedup();
    contexts
}

/// What a prefix answers with: the routes it nests, and the settings.
#[derive(Debug, Clone)]
struct Inner {
    routes: Router,
    config: HttpConfig,
}

/// The tenant of `/tenant/{tenantId}/…`, by the rules of a tenant id.
#[derive(Debug)]
struct PathTenant(TenantId);

impl<S: Send + Sync> FromRequestParts<S> for PathTenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path((tenant, _)) = Path::<(String, String)>::from_request_parts(parts, state).await?;
        TenantId::parse(&tenant)
            .map(Self)
            .map_err(|rule| ApiError::illegal_argument(format!("the tenant id in the path {rule}")))
    }
}

/// The owner of `/owner/{ownerId}/…`, by the rules of an aggregate id.
#[derive(Debug)]
struct PathOwner(Id);

impl<S: Send + Sync> FromRequestParts<S> for PathOwner {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path((owner, _)) = Path::<(String, String)>::from_request_parts(parts, state).await?;
        Id::parse(&owner).map(Self).map_err(|invalid| {
            ApiError::illegal_argument(format!("the owner id in the path {}", invalid.rule()))
        })
    }
}

/// `ANY /tenant/{tenantId}/{*rest}`: `rest` answered by the routes in the tenant `tenantId`;
/// with auth on, only for a token of that tenant.
async fn tenant_prefixed(
    State(inner): State<Inner>,
    PathTenant(tenant): PathTenant,
    mut request: Request,
) -> Result<Response, ApiError> {
    if !inner.config.auth_tokens.is_empty() {
        let caller = auth::tenant(&inner.config, request.headers())?;
        if caller.0 != tenant.as_str() {
            return Err(ApiError::forbidden(format!(
                "the token does not act for tenant `{}`",
                tenant.as_str()
            )));
        }
    }
    let value = HeaderValue::from_str(tenant.as_str()).map_err(|_| {
        ApiError::illegal_argument("the tenant id in the path is not a header value")
    })?;
    request.headers_mut().insert(headers::TENANT_ID, value);
    forward(inner.routes, 2, request).await
}

/// `ANY /owner/{ownerId}/{*rest}`: `rest` answered by the routes for the owner `ownerId`, as
/// if it came with `Command-Owner-Id`: a command acts for that owner (its stream and snapshot
/// carry it), a query sees that owner's documents only.
async fn owner_prefixed(
    State(inner): State<Inner>,
    PathOwner(owner): PathOwner,
    mut request: Request,
) -> Result<Response, ApiError> {
    let owner = owner.into_string();
    let value = HeaderValue::from_str(&owner).map_err(|_| {
        ApiError::illegal_argument("the owner id in the path is not a header value")
    })?;
    request.headers_mut().insert(headers::OWNER_ID, value);
    // SPEC TN-2: a token bound to another owner is refused on every route under the prefix.
    if let Err(auth::Refused::Access(refused)) = auth::caller(&inner.config, request.headers()) {
        return Err(refused.into());
    }
    if let Some(path) = owner_state_path(&request) {
        let uri = path
            .parse::<Uri>()
            .map_err(|_| ApiError::bad_request("the path is not a URI"))?;
        *request.uri_mut() = uri;
    }
    forward(inner.routes, 2, request).await
}

/// Wow's state of an aggregate owned by its own id: `GET /owner/{o}/{aggregate}/state` (no id
/// in the path) is the path `/owner/{o}/{aggregate}/{o}/state`, the owner's segment written
/// as it came. `None` for any other request.
fn owner_state_path(request: &Request) -> Option<String> {
    if request.method() != axum::http::Method::GET {
        return None;
    }
    let path = request.uri().path();
    let owner = raw_rest(path, 1)?.split('/').next()?;
    let (aggregate, "state") = raw_rest(path, 2)?.split_once('/')? else {
        return None;
    };
    if aggregate.is_empty() {
        return None;
    }
    let query = request
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    Some(format!("/owner/{owner}/{aggregate}/{owner}/state{query}"))
}

/// `ANY /{context}/{*rest}`: `rest` answered by the routes. Wow's generated clients put the
/// bounded context's alias before every path (their `basePath`), as a gateway in front of
/// Wow services routes them.
async fn context_prefixed(
    State(routes): State<Router>,
    request: Request,
) -> Result<Response, ApiError> {
    forward(routes, 1, request).await
}

/// Answers `request` by `inner` as if its path were what follows its first `prefix`
/// segments (the query kept). The rest is taken from the path as it came, still
/// percent-encoded, so the inner route decodes it once: a request id with `%` or `/` in a
/// look-up reads as itself under every prefix.
async fn forward(inner: Router, prefix: usize, mut request: Request) -> Result<Response, ApiError> {
    let rest = raw_rest(request.uri().path(), prefix).unwrap_or_default();
    let query = request
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let uri = format!("/{rest}{query}")
        .parse::<Uri>()
        .map_err(|_| ApiError::bad_request("the path is not a URI"))?;
    *request.uri_mut() = uri;
    // The outer route's path parameters live in the extensions: the inner routes must not
    // see them (they match their own).
    *request.extensions_mut() = axum::http::Extensions::new();
    match inner.oneshot(request).await {
        Ok(response) => Ok(response),
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
