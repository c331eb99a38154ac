//! # wow-http
//!
//! The HTTP API of DESIGN.md §5, generated from the aggregate registry: no route is written
//! per command. Commands answer with a `CommandResult` as JSON, or one server-sent event per
//! stage; history, state and the outcome look-up (SPEC TO-1) read the event store; bad input
//! is a 4xx with a `CommandResult` that says what is wrong, and records nothing.
//!
//! The router needs a gateway and the query side, not a whole pipeline: a process that only
//! runs a gateway serves it too ([`HttpState::for_gateway`]); [`HttpState::new`] is the
//! shorthand for a process running the whole [`LocalPipeline`](wow_core::pipeline::LocalPipeline).
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use wow_core::{command::CommandGateway, eventsourcing::EventStore};
//! # async fn demo(gateway: CommandGateway, events: Arc<dyn EventStore>) {
//! use wow_http::{HttpConfig, HttpState, QuerySide};
//! let state = HttpState::for_gateway(gateway, QuerySide::new(events), HttpConfig::default());
//! let app = wow_http::router(state);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await.unwrap();
//! let stop = std::future::pending(); // the service's own stop: Ctrl-C, SIGTERM
//! wow_http::serve(listener, app, wow_http::ServerLimits::default(), stop).await.unwrap();
//! # }
//! ```

mod access;
mod auth;
mod binding;
mod commands;
mod compensation;
mod config;
mod create_id;
mod dsl_queries;
mod fallback;
mod input;
mod metrics;
mod openapi;
mod operator;
mod paths;
mod prefix;
mod queries;
mod server;
mod state;
mod status;
mod strict_json;
mod ui;

use axum::routing::{any, get, post};
use axum::Router;

pub use access::gated;
pub use auth::{caller_tenant, NoTenant, Tenant};
pub use binding::{InvalidBinding, TokenBinding};
pub use config::HttpConfig;
pub use create_id::derived_aggregate_id;
pub use fallback::error_fallbacks;
pub use metrics::HttpMetrics;
pub use operator::check_operator_token;
pub use server::{serve, InvalidLimits, ServerLimits, MAX_READ_TIMEOUT};
pub use state::{HttpState, NodeStatus, QuerySide};
pub use status::{status_for, ERROR_CODE_HEADER, REPLAYED_HEADER};

/// The router of DESIGN.md §5 over `state`. With any token configured, `/metrics`,
/// `/metrics.json` and the operations page (`/ui`) answer only an operator token
/// ([`HttpConfig::operator_tokens`]; a browser signs in once by `/ui?token=…`, which sets a
/// cookie); `/health` and `/openapi.json` answer anyone. Merge a domain's own read routes into it through
/// [`gated`] (so that a route naming an aggregate and an id is an owner's and space's access
/// boundary, SPEC TN-2), then call [`error_fallbacks`] again so that they answer 405 with a
/// code too.
pub fn router(state: HttpState) -> Router {
    let registry = state.registry().clone();
    // The operator's routes: every tenant's counters, and the page that draws them.
    let operator = Router::new()
        .route("/metrics", get(metrics::render))
        .route("/metrics.json", get(metrics::render_json))
        .route("/ui", get(ui::page))
        .route("/ui/app.js", get(ui::script))
        .route("/ui/app.css", get(ui::style))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            operator::require,
        ));
    let routes = Router::new()
        .merge(operator)
        .route("/health", get(queries::health))
        .route("/compensation/failures/{id}", get(compensation::detail))
        .route("/openapi.json", get(openapi::document))
        .route("/compensation/failures", get(compensation::list))
        .route(
            "/compensation/failures/{id}/retry",
            post(compensation::retry),
        )
        .route("/{aggregate}/snapshot/count", post(dsl_queries::count))
        .route(
            "/{aggregate}/snapshot/single",
            post(dsl_queries::single_snapshot),
        )
        .route(
            "/{aggregate}/snapshot/single/state",
            post(dsl_queries::single_state),
        )
        .route(
            "/{aggregate}/snapshot/list",
            post(dsl_queries::list_snapshots),
        )
        .route(
            "/{aggregate}/snapshot/list/state",
            post(dsl_queries::list_states),
        )
        .route(
            "/{aggregate}/snapshot/paged",
            post(dsl_queries::paged_snapshots),
        )
        .route(
            "/{aggregate}/snapshot/paged/state",
            post(dsl_queries::paged_states),
        )
        .route("/{aggregate}/event/count", post(dsl_queries::count_events))
        .route("/{aggregate}/event/list", post(dsl_queries::list_events))
        .route("/{aggregate}/event/paged", post(dsl_queries::paged_events))
        // `{command}` of a create (POST); the aggregate's id for Wow's soft delete (DELETE).
        .route("/{aggregate}/{command}", any(commands::two_segments))
        // A command (POST); Wow's recover (PUT `/{aggregate}/{id}/recover`).
        .route("/{aggregate}/{id}/{command}", any(commands::three_segments))
        .route("/{aggregate}/{id}/state", get(queries::state))
        .route(
            "/{aggregate}/{id}/state/{version}",
            get(queries::state_at_version),
        )
        .route(
            "/{aggregate}/{id}/state/time/{time}",
            get(queries::state_at_time),
        )
        .route(
            "/{aggregate}/{id}/event/{head}/{tail}",
            get(queries::events),
        )
        .route(
            "/{aggregate}/{id}/requests/{request_id}",
            get(queries::outcome),
        )
        .with_state(state.clone());
    let routes = error_fallbacks(access::gated(routes, &state), &registry);
    // Wow's prefixes, nested as Wow's paths nest them: `/{context}/tenant/{t}/owner/{o}/…`.
    let inner = routes.clone();
    let config = state.config().clone();
    let owner_config = config.clone();
    let owned = routes.route(
        "/owner/{owner_id}/{*rest}",
        axum::routing::any(move |path, request| {
            prefix::owner_prefixed(inner.clone(), owner_config.clone(), path, request)
        }),
    );
    let inner = owned.clone();
    let tenanted = owned.route(
        "/tenant/{tenant_id}/{*rest}",
        axum::routing::any(move |path, request| {
            prefix::tenant_prefixed(inner.clone(), config.clone(), path, request)
        }),
    );
    let mut contexts: Vec<String> = registry
        .iter()
        .map(|runtime| runtime.named_aggregate().context_name.clone())
        .collect();
    contexts.sort();
    contexts.dedup();
    // A context named like an aggregate (or a route of the service) keeps the route's meaning.
    let taken = |context: &str| {
        registry.find(context).is_ok()
            || fallback::FIXED.contains(&context)
            || ["tenant", "owner"].contains(&context)
            || context.is_empty()
            || context.contains(['/', '{', '}'])
    };
    let inner = tenanted.clone();
    let mut full = tenanted;
    for context in contexts.iter().filter(|context| !taken(context)) {
        let inner = inner.clone();
        full = full.route(
            &format!("/{context}/{{*rest}}"),
            axum::routing::any(move |request| prefix::context_prefixed(inner.clone(), request)),
        );
    }
    // The prefixes' own parameters (`/tenant/{tenant_id}/…`) are checked as the routes' are.
    paths::checked(full)
}
