//! The router of docs/http-api.md: every route and the handler that answers it, the operator's
//! routes behind their token, the access gate and the error fallbacks, and Wow's prefixes
//! over all of them.

use axum::routing::{any, get, post, put};
use axum::Router;

use crate::service_routes::{self, Caller};
use crate::state::HttpState;
use crate::{access, commands, dsl_queries, fallback, operator, prefix, queries};

/// The router of docs/http-api.md over `state`. With any token configured, `/metrics`,
/// `/metrics.json` and the operations page (`/ui`) answer only an operator token
/// ([`HttpConfig::operator_tokens`](crate::HttpConfig::operator_tokens); a browser signs in
/// once by `/ui?token=…`, which sets a cookie); `/health` and `/openapi.json` answer anyone.
/// To add a domain's own read routes, start from [`routes`] instead.
pub fn router(state: HttpState) -> Router {
    let registry = state.registry().clone();
    crate::error_fallbacks(routes(state), &registry)
}

/// The routes of [`router`], before the rules it keeps over every answer. Merge a domain's
/// own read routes into them through [`gated`](crate::gated) (so that a route naming an
/// aggregate and an id is an owner's and space's access boundary, SPEC TN-2), then finish
/// with [`error_fallbacks`](crate::error_fallbacks), once, so that every route answers 404
/// and 405 with a code, refuses a path that is not text, and names every error's code in
/// `Wow-Error-Code`.
pub fn routes(state: HttpState) -> Router {
    let gated = Router::new()
        .merge(operator_routes(&state))
        .merge(operator_actions(&state))
        .merge(snapshot_regeneration(&state))
        .merge(service_routes::router(Caller::Anyone))
        .merge(query_routes())
        .merge(aggregate_routes())
        .with_state(state.clone());
    // The command routes name no aggregate's id for the access gate to check (the node
    // checks the owner and space), so they go without its layer.
    let routes = access::gated(gated, &state).merge(command_routes().with_state(state.clone()));
    let routes = fallback::with_fallbacks(routes, state.registry());
    prefix::nest(routes, &state)
}

/// The operator's routes: every tenant's counters, the pending deadlines, and the page that
/// draws them.
fn operator_routes(state: &HttpState) -> Router<HttpState> {
    service_routes::router(Caller::Operator).route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        operator::require,
    ))
}

/// The operator's actions on the service's state: fire or cancel one pending deadline. They
/// take an operator's bearer token, never the page's cookie.
fn operator_actions(state: &HttpState) -> Router<HttpState> {
    service_routes::router(Caller::OperatorBearer).route_layer(
        axum::middleware::from_fn_with_state(state.clone(), operator::require_bearer),
    )
}

/// Wow's regeneration of materialized snapshots, one aggregate's or a page of a type's: an
/// operator's actions, behind the operator's bearer token.
fn snapshot_regeneration(state: &HttpState) -> Router<HttpState> {
    Router::new()
        .route(
            "/{aggregate}/{id}/snapshot",
            put(queries::regenerate_snapshot),
        )
        .route(
            "/{aggregate}/snapshot/{afterId}/{limit}",
            put(queries::regenerate_snapshots),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            operator::require_bearer,
        ))
}

/// Wow's query DSL over the materialized snapshots and over history.
fn query_routes() -> Router<HttpState> {
    Router::new()
        .route("/{aggregate}/snapshot/count", post(dsl_queries::count))
        .route(
            "/{aggregate}/snapshot/single",
            post(dsl_queries::single::<dsl_queries::Documents>),
        )
        .route(
            "/{aggregate}/snapshot/single/state",
            post(dsl_queries::single::<dsl_queries::States>),
        )
        .route(
            "/{aggregate}/snapshot/list",
            post(dsl_queries::list::<dsl_queries::Documents>),
        )
        .route(
            "/{aggregate}/snapshot/list/state",
            post(dsl_queries::list::<dsl_queries::States>),
        )
        .route(
            "/{aggregate}/snapshot/paged",
            post(dsl_queries::paged::<dsl_queries::Documents>),
        )
        .route(
            "/{aggregate}/snapshot/paged/state",
            post(dsl_queries::paged::<dsl_queries::States>),
        )
        .route("/{aggregate}/event/count", post(dsl_queries::count_events))
        .route("/{aggregate}/event/list", post(dsl_queries::list_events))
        .route("/{aggregate}/event/paged", post(dsl_queries::paged_events))
}

/// One aggregate's commands: its creates, its commands, Wow's delete and recover.
fn command_routes() -> Router<HttpState> {
    Router::new()
        // `{command}` of a create (POST); the aggregate's id for Wow's soft delete (DELETE).
        .route("/{aggregate}/{command}", any(commands::two_segments))
        // A command (POST); Wow's recover (PUT `/{aggregate}/{id}/recover`).
        .route("/{aggregate}/{id}/{command}", any(commands::three_segments))
}

/// One aggregate's reads: its state, time travel, history, deadlines and request look-up.
fn aggregate_routes() -> Router<HttpState> {
    Router::new()
        .route("/{aggregate}/{id}/state", get(queries::state))
        .route("/{aggregate}/{id}/snapshot", get(queries::snapshot))
        .route(
            "/{aggregate}/{id}/deadlines",
            get(queries::aggregate_deadlines),
        )
        .route(
            "/{aggregate}/{id}/state/{version}",
            get(queries::state_at::<queries::AtVersion>),
        )
        .route(
            "/{aggregate}/{id}/state/time/{time}",
            get(queries::state_at::<queries::AtTime>),
        )
        .route(
            "/{aggregate}/{id}/event/{head}/{tail}",
            get(queries::events),
        )
        .route(
            "/{aggregate}/{id}/requests/{request_id}",
            get(queries::outcome),
        )
}
