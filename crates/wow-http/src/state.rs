//! What every route reads: the command side (a [`CommandGateway`]), the query side
//! ([`QuerySide`]), the settings and the counters.
//!
//! The state holds no processing node and no event dispatch: a process that only runs a
//! gateway (the node elsewhere, behind a bus) serves the same router, with a query side over
//! the shared event store, no compensation scheduler and an empty quarantine.

use std::sync::Arc;

use wow_core::aggregate::{AggregateRegistry, QuarantinedAggregates};
use wow_core::eventsourcing::{EventStore, SnapshotStore};
use wow_runtime::command::CommandGateway;
use wow_runtime::compensation::CompensationScheduler;
use wow_runtime::pipeline::LocalPipeline;

use crate::config::HttpConfig;
use crate::metrics::HttpMetrics;
use crate::reads::gate::ReadGate;

/// What the read routes answer from: history and request outcomes (the event store),
/// states (with snapshots when there are some), the compensation routes (when this process
/// runs the consumers) and the quarantine `/health` and `/metrics` report.
///
/// Plain values; clones share the stores.
#[derive(Debug, Clone)]
pub struct QuerySide {
    /// History, request ids and rejection records: `/event`, `/state`, `/requests`.
    pub events: Arc<dyn EventStore>,
    /// Snapshots `/state` starts from; `None` replays the whole history.
    pub snapshots: Option<Arc<dyn SnapshotStore>>,
    /// The retrier of recorded consumer failures behind `/compensation/failures`; `None`
    /// answers those routes 404 (this process runs no consumers).
    pub compensation: Option<CompensationScheduler>,
    /// The aggregates the processing node quarantined (SPEC PX-1); empty in a process
    /// without a node.
    pub quarantine: QuarantinedAggregates,
    /// What `/health` says of this node's place in a deployment (role, partitions, transport);
    /// `None` for a single process.
    pub node: Option<Arc<dyn NodeStatus>>,
    /// The materialized snapshots behind `/{aggregate}/snapshot/...` (Wow's query DSL);
    /// `None` answers those routes 404.
    pub views: Option<Arc<dyn wow_core::view::ViewStore>>,
    /// The pending deadlines behind `/{aggregate}/{id}/deadlines` and `/deadlines` (SPEC
    /// DM-2); `None` answers those routes 404.
    pub deadlines: Option<Arc<dyn wow_core::deadline::DeadlineStore>>,
    /// What the service warned of at start and goes on warning of, each a sentence for
    /// operators (a crate built so that overflows wrap, SPEC PX-1): `/health` lists them in
    /// `details.warnings`, which is absent when there are none.
    pub warnings: Vec<String>,
    /// What the store says of itself in `/health` (`details.store`); `None` leaves it out.
    pub store_health: Option<Arc<dyn wow_core::eventsourcing::StoreHealth>>,
    /// The rebuilds of the service's views behind `/rebuilds` (SPEC DS-6); `None` answers
    /// those routes 404.
    pub rebuilds: Option<wow_runtime::view::ViewRebuilds>,
}

/// This node's place in a deployment, as `/health` reports it under `details.node`.
pub trait NodeStatus: Send + Sync + std::fmt::Debug {
    /// A JSON object describing the node now, e.g. `{"role": "processor", "partitions":
    /// [0, 3], "nats": "CONNECTED"}`.
    fn status(&self) -> serde_json::Value;
}

impl QuerySide {
    /// The query side over `events` alone: no snapshots, no compensation, no quarantine.
    pub fn new(events: Arc<dyn EventStore>) -> Self {
        Self {
            events,
            snapshots: None,
            compensation: None,
            quarantine: QuarantinedAggregates::new(),
            node: None,
            views: None,
            deadlines: None,
            warnings: Vec::new(),
            store_health: None,
            rebuilds: None,
        }
    }

    /// The query side of a whole `pipeline`: its event store, its compensation scheduler
    /// (when it was built with a compensation store) and its quarantine; no snapshots.
    pub fn of_pipeline(pipeline: &LocalPipeline) -> Self {
        Self {
            events: pipeline.store().clone(),
            snapshots: None,
            compensation: pipeline.compensation().ok(),
            quarantine: pipeline.quarantine.clone(),
            node: None,
            views: None,
            deadlines: None,
            warnings: Vec::new(),
            store_health: None,
            rebuilds: None,
        }
    }

    /// Reads states from `snapshots` too (`None`: replay the whole history).
    pub fn with_snapshots(mut self, snapshots: Option<Arc<dyn SnapshotStore>>) -> Self {
        self.snapshots = snapshots;
        self
    }

    /// Serves `/compensation/failures` with `scheduler`.
    pub fn with_compensation(mut self, scheduler: CompensationScheduler) -> Self {
        self.compensation = Some(scheduler);
        self
    }

    /// Serves Wow's snapshot queries (`/{aggregate}/snapshot/...`) from the materialized
    /// snapshots in `views` ([`MaterializedSnapshots`](wow_runtime::view::MaterializedSnapshots)).
    pub fn with_views(mut self, views: Arc<dyn wow_core::view::ViewStore>) -> Self {
        self.views = Some(views);
        self
    }

    /// Serves the pending deadlines of `deadlines` (`/{aggregate}/{id}/deadlines`,
    /// `/deadlines`).
    pub fn with_deadlines(mut self, deadlines: Arc<dyn wow_core::deadline::DeadlineStore>) -> Self {
        self.deadlines = Some(deadlines);
        self
    }

    /// Reports `warnings` in `/health` (`details.warnings`).
    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings = warnings;
        self
    }

    /// Answers `/rebuilds` with `rebuilds` (SPEC DS-6).
    pub fn with_rebuilds(mut self, rebuilds: wow_runtime::view::ViewRebuilds) -> Self {
        self.rebuilds = Some(rebuilds);
        self
    }

    /// Reports the store's check in `/health` (`details.store`).
    pub fn with_store_health(
        mut self,
        health: Arc<dyn wow_core::eventsourcing::StoreHealth>,
    ) -> Self {
        self.store_health = Some(health);
        self
    }

    /// Reports `node` in `/health`.
    pub fn with_node_status(mut self, node: Arc<dyn NodeStatus>) -> Self {
        self.node = Some(node);
        self
    }

    /// Reports `quarantine` in `/health` and `/metrics`.
    pub fn with_quarantine(mut self, quarantine: QuarantinedAggregates) -> Self {
        self.quarantine = quarantine;
        self
    }
}

/// What every route reads: the gateway, the query side, the registry, the settings.
/// Clones share all of it.
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
    queries: QuerySide,
    config: HttpConfig,
    metrics: HttpMetrics,
    reads: ReadGate,
}

impl HttpState {
    /// The state of a service that sends commands through `gateway` and answers reads from
    /// `queries`. The routes are those of `gateway`'s registry.
    pub fn for_gateway(gateway: CommandGateway, queries: QuerySide, config: HttpConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                registry: gateway.registry().clone(),
                gateway,
                queries,
                reads: ReadGate::new(config.reads),
                config,
                metrics: HttpMetrics::default(),
            }),
            openapi_paths: Arc::default(),
        }
    }

    /// The state of a service running the whole `pipeline` in this process, reading
    /// snapshots from `snapshots`: [`HttpState::for_gateway`] with its gateway and
    /// [`QuerySide::of_pipeline`].
    pub fn new(
        pipeline: &LocalPipeline,
        snapshots: Option<Arc<dyn SnapshotStore>>,
        config: HttpConfig,
    ) -> Self {
        Self::for_gateway(
            pipeline.gateway.clone(),
            QuerySide::of_pipeline(pipeline).with_snapshots(snapshots),
            config,
        )
    }

    /// Adds `paths` (an OpenAPI `paths` object) to `/openapi.json`: the routes a domain
    /// merges into the [`router`](crate::router). The document completes each operation as
    /// it does its own: every `{param}` of the path not declared is declared (a string; `id`
    /// by the rules of an aggregate id); when auth is on, the bearer requirement and its 401,
    /// and no `Command-Tenant-Id` header (unless the operation says `security: []`); a 500
    /// and a 431. The domain declares the rest: its headers, its answers and their bodies.
    pub fn with_openapi_paths(mut self, paths: serde_json::Map<String, serde_json::Value>) -> Self {
        let mut all = (*self.openapi_paths).clone();
        all.extend(paths);
        self.openapi_paths = Arc::new(all);
        self
    }

    /// The path items a domain added to `/openapi.json`.
    pub(crate) fn openapi_paths(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.openapi_paths
    }

    /// Where commands are sent.
    pub(crate) fn gateway(&self) -> &CommandGateway {
        &self.inner.gateway
    }

    /// The aggregates the routes serve (the gateway's registry).
    pub fn registry(&self) -> &AggregateRegistry {
        &self.inner.registry
    }

    /// History, request ids and rejection records.
    pub(crate) fn store(&self) -> &dyn EventStore {
        self.inner.queries.events.as_ref()
    }

    /// What `/health` reports of this node's place in a deployment; `None` for a single
    /// process.
    pub(crate) fn node_status(&self) -> Option<serde_json::Value> {
        self.inner.queries.node.as_ref().map(|node| node.status())
    }

    /// What `/health` asks the store of itself; `None` when it asks nothing.
    pub(crate) fn store_health(&self) -> Option<&Arc<dyn wow_core::eventsourcing::StoreHealth>> {
        self.inner.queries.store_health.as_ref()
    }

    /// What the service warns of, for `/health`.
    pub(crate) fn warnings(&self) -> &[String] {
        &self.inner.queries.warnings
    }

    /// The aggregates the pipeline quarantined (SPEC PX-1), for `/health` and `/metrics`.
    pub(crate) fn quarantine(&self) -> &QuarantinedAggregates {
        &self.inner.queries.quarantine
    }

    /// The retrier of recorded consumer failures, when this process runs the consumers.
    pub(crate) fn compensation(&self) -> Option<&CompensationScheduler> {
        self.inner.queries.compensation.as_ref()
    }

    /// The materialized snapshots, when snapshot queries are on.
    pub(crate) fn views(&self) -> Option<&Arc<dyn wow_core::view::ViewStore>> {
        self.inner.queries.views.as_ref()
    }

    /// The rebuilds of the service's views, when it has any.
    pub(crate) fn rebuilds(&self) -> Option<&wow_runtime::view::ViewRebuilds> {
        self.inner.queries.rebuilds.as_ref()
    }

    /// The pending deadlines, when the service keeps them.
    pub(crate) fn deadlines(&self) -> Option<&Arc<dyn wow_core::deadline::DeadlineStore>> {
        self.inner.queries.deadlines.as_ref()
    }

    /// The snapshots a state read starts from, if any.
    pub(crate) fn snapshots(&self) -> Option<&dyn SnapshotStore> {
        self.inner.queries.snapshots.as_deref()
    }

    /// The settings.
    pub fn config(&self) -> &HttpConfig {
        &self.inner.config
    }

    /// The shares the heavy reads hold places in.
    pub(crate) fn reads(&self) -> &ReadGate {
        &self.inner.reads
    }

    /// The request counters and latency histograms.
    pub fn metrics(&self) -> &HttpMetrics {
        &self.inner.metrics
    }
}
