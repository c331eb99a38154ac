//! The service's own routes (health, this document, metrics, the operations page, deadlines,
//! unique keys, compensation, consumers), each declared once: its path, who may call it, the handler that
//! answers it and its operation in `/openapi.json`. The router and the document both read
//! [`SERVICE_ROUTES`], so a route added here is served and documented alike
//! (`tests/openapi_complete.rs` proves the two agree).

use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::{delete, get, post, put, MethodRouter};
use axum::{Json, Router};
use serde_json::{Map, Value};

use crate::openapi::operations as doc;
use crate::state::HttpState;
use crate::{
    compensation, consumers, lag, metrics, openapi, operator_deadlines, queries, rebuilds, ui,
};

/// Who may call a service route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// Anyone (a route that needs a token checks it itself, as the key release does).
    Anyone,
    /// With any token configured, an operator's token or the operations page's cookie.
    Operator,
    /// An operator's bearer token, never the page's cookie: actions on the service's state.
    OperatorBearer,
}

/// One route of the service's own.
struct ServiceRoute {
    path: &'static str,
    caller: Caller,
    /// The methods the route answers, with their handlers.
    handler: fn() -> MethodRouter<HttpState>,
    /// The route's path item in `/openapi.json`.
    operation: fn() -> Value,
}

/// Every route of the service's own.
const SERVICE_ROUTES: [ServiceRoute; 21] = [
    ServiceRoute {
        path: "/health",
        caller: Caller::Anyone,
        handler: || get(queries::health),
        operation: doc::health,
    },
    ServiceRoute {
        path: "/openapi.json",
        caller: Caller::Anyone,
        handler: || get(openapi_document),
        operation: doc::openapi_document,
    },
    ServiceRoute {
        // The release is an operator's: its handler checks the operator token.
        path: "/unique-key/{space}/{value}",
        caller: Caller::Anyone,
        handler: || get(queries::unique_key_holder).delete(queries::release_unique_key),
        operation: doc::unique_key_holder,
    },
    ServiceRoute {
        path: "/compensation/failures",
        caller: Caller::Anyone,
        handler: || get(compensation::list),
        operation: doc::compensation_failures,
    },
    ServiceRoute {
        path: "/compensation/failures/{id}",
        caller: Caller::Anyone,
        handler: || get(compensation::detail),
        operation: doc::compensation_detail,
    },
    ServiceRoute {
        path: "/compensation/failures/{id}/retry",
        caller: Caller::Anyone,
        handler: || post(compensation::retry),
        operation: doc::compensation_retry,
    },
    ServiceRoute {
        path: "/compensation/parked",
        caller: Caller::Anyone,
        handler: || get(compensation::parked),
        operation: doc::compensation_parked,
    },
    ServiceRoute {
        path: "/compensation/failures/{id}/skip",
        caller: Caller::OperatorBearer,
        handler: || post(compensation::skip),
        operation: doc::compensation_skip,
    },
    ServiceRoute {
        path: "/compensation/failures/{id}/retry-spec",
        caller: Caller::OperatorBearer,
        handler: || put(compensation::edit_retry_spec),
        operation: doc::compensation_retry_spec,
    },
    ServiceRoute {
        path: "/compensation/failures/{id}/recoverable",
        caller: Caller::OperatorBearer,
        handler: || put(compensation::edit_recoverable),
        operation: doc::compensation_recoverable,
    },
    ServiceRoute {
        path: "/consumers/{consumer}/redispatch",
        caller: Caller::OperatorBearer,
        handler: || post(consumers::redispatch),
        operation: doc::consumer_redispatch,
    },
    ServiceRoute {
        path: "/metrics",
        caller: Caller::Operator,
        handler: || get(metrics_text),
        operation: doc::metrics_text,
    },
    ServiceRoute {
        path: "/metrics.json",
        caller: Caller::Operator,
        handler: || get(metrics_json),
        operation: doc::metrics_json,
    },
    ServiceRoute {
        path: "/deadlines",
        caller: Caller::Operator,
        handler: || get(queries::pending_deadlines),
        operation: doc::pending_deadlines,
    },
    ServiceRoute {
        path: "/rebuilds",
        caller: Caller::Operator,
        handler: || get(rebuilds::list),
        operation: doc::rebuilds,
    },
    ServiceRoute {
        path: "/rebuilds/{view}",
        caller: Caller::OperatorBearer,
        handler: || post(rebuilds::start),
        operation: doc::rebuild_start,
    },
    ServiceRoute {
        path: "/ui",
        caller: Caller::Operator,
        handler: || get(ui::page),
        operation: doc::ui_page,
    },
    ServiceRoute {
        path: "/ui/app.js",
        caller: Caller::Operator,
        handler: || get(ui::script),
        operation: doc::ui_script,
    },
    ServiceRoute {
        path: "/ui/app.css",
        caller: Caller::Operator,
        handler: || get(ui::style),
        operation: doc::ui_style,
    },
    ServiceRoute {
        path: "/deadlines/{tenant}/{aggregate}/{id}/{name}",
        caller: Caller::OperatorBearer,
        handler: || delete(operator_deadlines::cancel),
        operation: doc::cancel_deadline,
    },
    ServiceRoute {
        path: "/deadlines/{tenant}/{aggregate}/{id}/{name}/fire",
        caller: Caller::OperatorBearer,
        handler: || post(operator_deadlines::fire),
        operation: doc::fire_deadline,
    },
];

/// The service's routes that `caller` may call, on one router (the caller's check is the
/// router's caller's to add).
pub(crate) fn router(caller: Caller) -> Router<HttpState> {
    SERVICE_ROUTES
        .iter()
        .filter(|route| route.caller == caller)
        .fold(Router::new(), |router, route| {
            router.route(route.path, (route.handler)())
        })
}

/// The path items of every service route, for the document.
fn path_items() -> Map<String, Value> {
    SERVICE_ROUTES
        .iter()
        .map(|route| (route.path.to_owned(), (route.operation)()))
        .collect()
}

/// `GET /openapi.json`.
async fn openapi_document(State(state): State<HttpState>) -> Json<Value> {
    Json(openapi::build(&state, path_items()))
}

/// `GET /metrics`: the HTTP counters, the pipeline's and the quarantine's size, each
/// consumer's lag.
async fn metrics_text(State(state): State<HttpState>) -> impl IntoResponse {
    let pipeline = state.gateway().metrics().snapshot();
    let lag = consumer_lag(&state, pipeline.event_backlog).await;
    metrics::render(state.metrics(), &pipeline, state.quarantine().len(), &lag)
}

/// `GET /metrics.json`: the counters of `/metrics`, read at the same moment, as JSON.
async fn metrics_json(State(state): State<HttpState>) -> impl IntoResponse {
    let pipeline = state.gateway().metrics().snapshot();
    let lag = consumer_lag(&state, pipeline.event_backlog).await;
    metrics::render_json(state.metrics(), &pipeline, state.quarantine().len(), &lag)
}

/// Each consumer's lag now (SPEC DS-6); none, logged, when the stores cannot be read.
async fn consumer_lag(state: &HttpState, backlog: u64) -> Vec<lag::ConsumerLag> {
    let now = wow_core::id::now_millis();
    match lag::read(state.compensation(), backlog, now).await {
        Ok(lag) => lag,
        Err(error) => {
            tracing::warn!(%error, "could not read the consumers' lag");
            Vec::new()
        }
    }
}
