//! Owners and spaces as access boundaries at the HTTP edge (SPEC TN-2).
//!
//! One check, [`permitted`]: a caller bound to an owner or a space reaches an aggregate only
//! when the aggregate's recorded owner and space (its first stream's, read alone) are its
//! own. Two places call it:
//!
//! - [`gate`], a route layer over every route whose path names an aggregate and an id as its
//!   first two segments (`/{aggregate}/{id}/…`: state, time travel, history, the request
//!   look-up, views, and any such route a domain adds), so that a new route cannot forget it;
//! - the command route, which knows the id of a create only once it has read the headers,
//!   and answers the refusal as a command result. The processing node checks a command again
//!   against the aggregate it decides on.
//!
//! A refusal is 403 with the code and nothing of the aggregate: no state, version or request
//! ids. An aggregate that does not exist is not refused here: its route answers as for any
//! caller.

use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use wow_core::aggregate::{check_access, AccessRefused};
use wow_core::eventsourcing::EventStoreError;
use wow_core::AggregateId;
use wow_runtime::eventsourcing::recorded_scope;

use crate::auth::{self, Caller};
use crate::error::ApiError;
use crate::ids::Id;
use crate::state::HttpState;

/// Why a caller may not reach an aggregate, or why that cannot be told.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Denied {
    /// Another owner's or space's aggregate.
    #[error("{}", .0.message)]
    Refused(AccessRefused),
    /// The aggregate's first stream cannot be read.
    #[error(transparent)]
    Store(EventStoreError),
}

/// 403 with the refusal's code, or the store's failure (503 when it cannot be reached).
impl From<Denied> for ApiError {
    fn from(denied: Denied) -> Self {
        match denied {
            Denied::Refused(refused) => refused.into(),
            Denied::Store(error) => {
                let code = error.error_code();
                ApiError::new(crate::status::status_for(&code), code, error.to_string())
            }
        }
    }
}

/// Whether `caller` reaches `aggregate_id` (of its own tenant): always when it is bound to no
/// owner and no space, or the aggregate does not exist; else when the aggregate's recorded
/// owner and space are the caller's.
pub(crate) async fn permitted(
    state: &HttpState,
    caller: &Caller,
    aggregate_id: &AggregateId,
) -> Result<(), Denied> {
    if !caller.is_bound() {
        return Ok(());
    }
    match recorded_scope(state.store(), aggregate_id).await {
        Ok(None) => Ok(()),
        Ok(Some(recorded)) => check_access(
            caller.owner.as_deref(),
            caller.space.as_deref(),
            &recorded,
            aggregate_id,
        )
        .map_err(Denied::Refused),
        Err(error) => Err(Denied::Store(error)),
    }
}

/// Whether `caller` may learn who `aggregate_id` (the holder of a unique key, of its own
/// tenant) is: always when it is bound to no owner and no space; else only when the
/// aggregate exists and its recorded owner and space are the caller's. Unlike [`permitted`],
/// an aggregate that cannot be found is not the caller's to see.
pub(crate) async fn sees(
    state: &HttpState,
    caller: &Caller,
    aggregate_id: &AggregateId,
) -> Result<bool, EventStoreError> {
    if !caller.is_bound() {
        return Ok(true);
    }
    Ok(recorded_scope(state.store(), aggregate_id)
        .await?
        .is_some_and(|recorded| {
            check_access(
                caller.owner.as_deref(),
                caller.space.as_deref(),
                &recorded,
                aggregate_id,
            )
            .is_ok()
        }))
}

/// The first segment of a route whose path names an aggregate and an id: a registered
/// aggregate, literal or `{aggregate}`, then `{id}`. Commands (`/{aggregate}/{id}/{command}`)
/// are checked by their route, which answers with a command result.
fn gated_route(matched: &str) -> Option<&str> {
    let mut segments = matched.trim_start_matches('/').split('/');
    let (first, second, third) = (segments.next()?, segments.next()?, segments.next());
    (second == "{id}" && third != Some("{command}")).then_some(first)
}

/// The aggregate and id a gated route's request names.
fn addressed(matched: &str, params: &RawPathParams) -> Option<(String, String)> {
    let first = gated_route(matched)?;
    let param = |name: &str| {
        params
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.to_owned())
    };
    let aggregate = if first == "{aggregate}" {
        param("aggregate")?
    } else {
        first.to_owned()
    };
    Some((aggregate, param("id")?))
}

/// The route layer of SPEC TN-2: a request from a caller bound to an owner or a space, to a
/// route naming an existing aggregate of another owner or space, is refused (403) before the
/// route runs. Every other request passes to its route, which answers it as before (a missing
/// token, an unknown aggregate or a malformed id included).
pub(crate) async fn gate(
    State(state): State<HttpState>,
    matched: Option<MatchedPath>,
    params: Result<RawPathParams, RawPathParamsRejection>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let addressed = match (&matched, &params) {
        (Some(matched), Ok(params)) => addressed(matched.as_str(), params),
        _ => None,
    };
    if let Some((aggregate, id)) = addressed {
        if let Some((caller, aggregate_id)) =
            checked_target(&state, request.headers(), &aggregate, id)?
        {
            permitted(&state, &caller, &aggregate_id).await?;
        }
    }
    Ok(next.run(request).await)
}

/// The caller and the aggregate a gated request names, when the gate has to check them:
/// `None` when the caller is bound to no one, has no tenant (the route answers that in its
/// own shape), or names no aggregate that can exist; `Err` when its headers name another owner
/// or space than its token's.
fn checked_target(
    state: &HttpState,
    headers: &HeaderMap,
    aggregate: &str,
    id: String,
) -> Result<Option<(Caller, AggregateId)>, ApiError> {
    let caller = match auth::caller(state.config(), headers) {
        Ok(caller) => caller,
        Err(auth::Refused::Access(refused)) => return Err(refused.into()),
        Err(auth::Refused::Tenant(_)) => return Ok(None),
    };
    let Some(runtime) = state.registry().get(aggregate) else {
        return Ok(None);
    };
    if Id::parse(&id).is_err() {
        return Ok(None);
    }
    let aggregate_id = runtime
        .named_aggregate()
        .aggregate_id(id, caller.tenant.clone());
    Ok(Some((caller, aggregate_id)))
}

/// `routes` with the access gate over each of its routes: merge a domain's routes through it so that
/// they are access boundaries too.
pub fn gated(routes: axum::Router, state: &HttpState) -> axum::Router {
    routes.route_layer(axum::middleware::from_fn_with_state(state.clone(), gate))
}

#[cfg(test)]
mod tests {
    use super::gated_route;

    #[test]
    fn only_routes_naming_an_aggregate_and_an_id_are_gated() {
        let shapes = [
            ("/{aggregate}/{id}/state", Some("{aggregate}")),
            (
                "/{aggregate}/{id}/requests/{request_id}",
                Some("{aggregate}"),
            ),
            ("/account/{id}/view", Some("account")),
            ("/{aggregate}/{id}/{command}", None),
            ("/{aggregate}/snapshot/list", None),
            ("/compensation/failures/{id}", None),
            ("/health", None),
        ];
        for (shape, gated) in shapes {
            assert_eq!(gated_route(shape), gated, "{shape}");
        }
    }
}
