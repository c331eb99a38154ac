//! # wow-http
//!
//! The HTTP API of DESIGN.md §5, generated from the aggregate registry: no route is written
//! per command. Commands answer with a `CommandResult` as JSON, or one server-sent event per
//! stage; history, state and the outcome look-up (SPEC TO-1) read the event store; bad input
//! is a 4xx with a `CommandResult` that says what is wrong, and records nothing.
//!
//! ```no_run
//! # async fn demo(pipeline: wow_core::pipeline::LocalPipeline) {
//! let app = wow_http::router(wow_http::HttpState::new(&pipeline, None, wow_http::HttpConfig::default()));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await.unwrap();
//! let stop = std::future::pending(); // the service's own stop: Ctrl-C, SIGTERM
//! wow_http::serve(listener, app, wow_http::ServerLimits::default(), stop).await.unwrap();
//! # }
//! ```

mod auth;
mod commands;
mod compensation;
mod config;
mod create_id;
mod fallback;
mod input;
mod metrics;
mod openapi;
mod queries;
mod server;
mod status;
mod strict_json;

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use wow_core::aggregate::AggregateRegistry;
use wow_core::aggregate::QuarantinedAggregates;
use wow_core::command::CommandGateway;
use wow_core::compensation::CompensationScheduler;
use wow_core::eventsourcing::{EventStore, SnapshotStore};
use wow_core::pipeline::LocalPipeline;

pub use auth::{caller_tenant, NoTenant, Tenant};
pub use config::HttpConfig;
pub use create_id::derived_aggregate_id;
pub use fallback::error_fallbacks;
pub use metrics::HttpMetrics;
pub use server::{serve, InvalidLimits, ServerLimits, MAX_READ_TIMEOUT};
pub use status::{status_for, ERROR_CODE_HEADER, REPLAYED_HEADER};

/// What every route reads: the gateway, the stores, the registry, the settings.
#[derive(Debug, Clone)]
pub struct HttpState {
    inner: Arc<Inner>,
    /// Path items of the routes a domain merges into the router, for `/openapi.json`.
    openapi_paths: Arc<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug)]
struct Inner {
    gateway: CommandGateway,
    registry: AggregateRegistry,
    store: Arc<dyn EventStore>,
    snapshots: Option<Arc<dyn SnapshotStore>>,
    config: HttpConfig,
    metrics: HttpMetrics,
    compensation: Option<CompensationScheduler>,
    quarantine: QuarantinedAggregates,
}

impl HttpState {
    /// The state of a service running `pipeline`, reading snapshots from `snapshots`.
    pub fn new(
        pipeline: &LocalPipeline,
        snapshots: Option<Arc<dyn SnapshotStore>>,
        config: HttpConfig,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                gateway: pipeline.gateway.clone(),
                registry: pipeline.gateway.registry().clone(),
                store: pipeline.store().clone(),
                snapshots,
                config,
                metrics: HttpMetrics::default(),
                compensation: pipeline.compensation().ok(),
                quarantine: pipeline.quarantine.clone(),
            }),
            openapi_paths: Arc::default(),
        }
    }

    /// Adds `paths` (an OpenAPI `paths` object) to `/openapi.json`: the routes a domain
    /// merges into the [`router`]. The document completes each operation as it does its own:
    /// every `{param}` of the path not declared is declared (a string; `id` by the rules of an
    /// aggregate id); when auth is on, the bearer requirement and its 401, and no
    /// `Command-Tenant-Id` header (unless the operation says `security: []`); a 500 and a 431.
    /// The domain declares the rest: its headers, its answers and their bodies.
    pub fn with_openapi_paths(mut self, paths: serde_json::Map<String, serde_json::Value>) -> Self {
        let mut all = (*self.openapi_paths).clone();
        all.extend(paths);
        self.openapi_paths = Arc::new(all);
        self
    }

    fn openapi_paths(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.openapi_paths
    }

    fn gateway(&self) -> &CommandGateway {
        &self.inner.gateway
    }

    fn registry(&self) -> &AggregateRegistry {
        &self.inner.registry
    }

    fn store(&self) -> &dyn EventStore {
        self.inner.store.as_ref()
    }

    /// The aggregates the pipeline quarantined (SPEC PX-1), for `/health` and `/metrics`.
    fn quarantine(&self) -> &QuarantinedAggregates {
        &self.inner.quarantine
    }

    fn compensation(&self) -> Option<&CompensationScheduler> {
        self.inner.compensation.as_ref()
    }

    fn snapshots(&self) -> Option<&dyn SnapshotStore> {
        self.inner.snapshots.as_deref()
    }

    /// The settings.
    pub fn config(&self) -> &HttpConfig {
        &self.inner.config
    }

    /// The request counters and latency histograms.
    pub fn metrics(&self) -> &HttpMetrics {
        &self.inner.metrics
    }
}

/// The router of DESIGN.md §5 over `state`. Merge a domain's own read routes into it, then
/// call [`error_fallbacks`] again so that they answer 405 with a code too.
pub fn router(state: HttpState) -> Router {
    let registry = state.registry().clone();
    let routes = Router::new()
        .route("/health", get(queries::health))
        .route("/metrics", get(metrics::render))
        .route("/openapi.json", get(openapi::document))
        .route("/compensation/failures", get(compensation::list))
        .route(
            "/compensation/failures/{id}/retry",
            post(compensation::retry),
        )
        .route("/{aggregate}/{command}", post(commands::create))
        .route("/{aggregate}/{id}/{command}", post(commands::send))
        .route("/{aggregate}/{id}/state", get(queries::state))
        .route(
            "/{aggregate}/{id}/event/{head}/{tail}",
            get(queries::events),
        )
        .route(
            "/{aggregate}/{id}/requests/{request_id}",
            get(queries::outcome),
        )
        .with_state(state);
    error_fallbacks(routes, &registry)
}
