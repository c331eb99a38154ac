//! Starting a gathered service: open the stores, build the pipeline, catch every consumer up,
//! start the compensation scheduler, assemble the router. [`RunningService`] holds it all and
//! stops it.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use wow_core::event::EventConsumer;
use wow_core::CommandStage;
use wow_core::Stores;
use wow_http::{HttpConfig, HttpState, QuerySide};
use wow_runtime::command::WaitFunctions;
use wow_runtime::compensation::CompensationScheduler;
use wow_runtime::event::CatchUpProgress;
use wow_runtime::eventsourcing::SnapshotStrategy;
use wow_runtime::pipeline::LocalPipeline;
use wow_runtime::view::{
    snapshot_view, MaterializedSnapshotStore, MaterializedSnapshots, ViewRebuilds,
};

use crate::build_check::{describe, unchecked_crates, warnings, OverflowChecks};
use crate::builder::{ServiceBuilder, ServiceContext};
use crate::distributed::Distribution;
use crate::settings::Settings;
use crate::store::open_store;
use crate::ServiceError;
use wow_runtime::background::Background;

use crate::tasks::Tasks;
use wow_runtime::deadline::DeadlineScheduler;

/// A started service: its pipeline runs and its consumers are caught up; nothing listens
/// until [`serve_on`](Self::serve_on). Serve its [`router`](Self::router) yourself, or send
/// it requests in a test (`tower::ServiceExt::oneshot`).
///
/// Dropping it stops the compensation scheduler; [`stop`](Self::stop) also writes every
/// consumer position first, so that the next start resumes exactly there.
pub struct RunningService {
    pipeline: LocalPipeline,
    stores: Stores,
    router: Router,
    settings: Settings,
    caught_up: Vec<(String, CatchUpProgress)>,
    deadlines: DeadlineScheduler,
    background: Background,
    distribution: Option<Distribution>,
    tasks: Tasks,
    rebuilds: ViewRebuilds,
}

impl fmt::Debug for RunningService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunningService")
            .field("pipeline", &self.pipeline)
            .field("settings", &self.settings)
            .field("caught_up", &self.caught_up)
            .finish_non_exhaustive()
    }
}

impl ServiceBuilder {
    /// Starts the service without listening: opens the store (the one given with
    /// [`stores`](Self::stores), else the settings', else [`store`](Self::store)'s), builds
    /// the pipeline, runs every consumer over the history of every aggregate it reads that
    /// it has not handled yet, starts the compensation scheduler (every
    /// `settings.retry_every`) and assembles the router. Must be called inside a tokio
    /// runtime.
    ///
    /// # Errors
    ///
    /// [`ServiceError::DuplicateAggregate`], [`ServiceError::UncheckedBuild`] (a crate built
    /// so that overflows wrap, unless the settings say warn), [`ServiceError::Store`],
    /// [`ServiceError::Rename`], [`ServiceError::CatchUp`], [`ServiceError::Compensation`];
    /// nothing keeps running then.
    pub async fn build(mut self) -> Result<RunningService, ServiceError> {
        self.check_declarations()?;
        let warnings = self.check_builds()?;
        let stores = self.open_stores().await?;
        let (stores, rebuilds, outdated) = self.view_generations(stores).await?;
        for (view, field) in &self.field_indexes {
            stores.views.declare_field_index(view, field).await?;
        }
        let settings = self.settings.clone();
        let stores = if settings.snapshot_queries {
            self.materialize_snapshots(stores).await?
        } else {
            stores
        };
        let mut distribution = Distribution::connect(&settings).await?;
        let runs_consumers = distribution
            .as_ref()
            .is_none_or(Distribution::runs_consumers);
        let remote = if runs_consumers {
            WaitFunctions::new()
        } else {
            self.hand_consumers_to_processors(&stores)
        };
        let pipeline = self.pipeline(&stores, distribution.as_ref(), remote);
        // A monolith catches up before it serves. A processor catches up once it serves its
        // partitions (below): a command a saga sends from the catch-up then finds an owner,
        // this processor or another, instead of waiting for one that cannot exist yet.
        let mut caught_up = if runs_consumers && distribution.is_none() {
            self.catch_up(&pipeline).await?
        } else {
            Vec::new()
        };
        let compensation = pipeline
            .compensation()?
            .with_deadlines(stores.deadlines.clone());
        let http = settings.http_config();
        if !http.auth_tokens.is_empty() && http.operator_tokens.is_empty() {
            tracing::warn!(
                "auth is on and no operator token is set (WOW_OPERATOR_TOKENS): /metrics, /metrics.json and the operations page answer 401 to every request"
            );
        }
        let queries = query_side(&settings, &pipeline, &stores, &compensation)
            .with_warnings(warnings)
            .with_rebuilds(rebuilds.clone());
        let queries = match &distribution {
            Some(distribution) => queries.with_node_status(distribution.status()),
            None => queries,
        };
        let router = self.router(&pipeline, &stores, queries, http);
        if let Some(distribution) = distribution.as_mut() {
            distribution.start(&pipeline, &stores).await?;
            if runs_consumers {
                caught_up = self.catch_up(&pipeline).await?;
            }
        }
        let deadlines = pipeline.deadline_scheduler(stores.deadlines.clone());
        let deadlines = match distribution.as_ref().and_then(Distribution::deadline_owner) {
            Some(owns) => deadlines.owning(owns),
            None => deadlines,
        };
        // Whoever runs the consumers retries them and fires the deadlines (SPEC DS-4, DM-2):
        // in the distributed mode each processor those of its partitions.
        let background = if runs_consumers {
            Background::start(settings.background(), Some(&compensation), Some(&deadlines))
        } else {
            Background::default()
        };
        self.generation_tasks(&rebuilds, outdated, runs_consumers);
        let tasks = Tasks::start(std::mem::take(&mut self.tasks), &pipeline.gateway, &stores);
        Ok(RunningService {
            tasks,
            pipeline,
            stores,
            router,
            settings,
            caught_up,
            deadlines,
            background,
            distribution,
            rebuilds,
        })
    }

    /// What the builder was given must hold together: no aggregate type twice, every
    /// aggregate another one's decisions read served too (SPEC DM-5), and every service an
    /// aggregate needs provided.
    fn check_declarations(&mut self) -> Result<(), ServiceError> {
        if let Some(duplicate) = self.duplicate.take() {
            return Err(duplicate.into());
        }
        if let Some((aggregate, read)) = self.registry.unserved_reads().into_iter().next() {
            return Err(ServiceError::UnservedRead {
                aggregate,
                read: read.aggregate_name,
            });
        }
        match self
            .needs
            .iter()
            .find(|(_, need)| !self.services.provides(need))
        {
            Some((aggregate, need)) => Err(ServiceError::MissingService {
                aggregate,
                service: need.name(),
            }),
            None => Ok(()),
        }
    }

    /// Runs every consumer over the history it has not handled yet (SPEC DS-1), reporting
    /// each step to the progress callback given with the builder, and logs what each did.
    async fn catch_up(
        &mut self,
        pipeline: &LocalPipeline,
    ) -> Result<Vec<(String, CatchUpProgress)>, ServiceError> {
        let aggregates = self.consumed_aggregates();
        let mut progress = self.catch_up_progress.take();
        let mut report = |consumer: &str, step: &CatchUpProgress| {
            if let Some(progress) = progress.as_mut() {
                progress(consumer, step);
            }
        };
        let caught_up = pipeline.catch_up(&aggregates, &mut report).await?;
        for (consumer, done) in &caught_up {
            tracing::info!(
                consumer,
                streams = done.streams_handled,
                aggregates = done.aggregates_done,
                failed = done.aggregates_failed,
                "caught up"
            );
        }
        Ok(caught_up)
    }

    /// SPEC PX-1: every crate the service runs code of must have been compiled so that an
    /// arithmetic overflow panics (see the `build_check` module). A crate that wraps stops
    /// the start; under [`OverflowChecks::Warn`] it is logged as an error and returned, for
    /// `/health`.
    fn check_builds(&self) -> Result<Vec<String>, ServiceError> {
        let measured: Vec<_> = self
            .builds
            .iter()
            .map(|(aggregate, measure)| (*aggregate, measure()))
            .collect();
        let crates = unchecked_crates(&measured);
        if crates.is_empty() {
            return Ok(Vec::new());
        }
        if self.settings.overflow_checks == OverflowChecks::Require {
            return Err(ServiceError::UncheckedBuild { crates });
        }
        tracing::error!(
            crates = %crates.iter().map(|c| c.build.package).collect::<Vec<_>>().join(", "),
            "starting anyway, as WOW_OVERFLOW_CHECKS=warn says: {}",
            describe(&crates)
        );
        Ok(warnings(&crates))
    }

    /// The stores given with [`stores`](Self::stores), else those of the settings' (or
    /// [`store`](Self::store)'s) URL, with the aggregates renamed that the builder renames.
    async fn open_stores(&mut self) -> Result<Stores, ServiceError> {
        let stores = match self.stores.take() {
            Some(stores) => stores,
            None => {
                let url = self.settings.store_url(self.store.as_deref());
                tracing::info!(store = url, "opening the store");
                open_store(url).await?
            }
        };
        for (from, to) in &self.renames {
            let renamed = stores
                .renames
                .rename_aggregate(wow_core::eventsourcing::AggregateRename::new(from, to))
                .await?;
            if !renamed.is_empty() {
                tracing::info!(from, to, %renamed, "renamed an aggregate in the store");
            }
        }
        Ok(stores)
    }

    /// Wow's snapshot queries read every aggregate's latest state from these documents: their
    /// query indexes declared, and the projection that keeps them first among the consumers.
    /// The stores answered read the documents as the aggregates' snapshots.
    async fn materialize_snapshots(&mut self, stores: Stores) -> Result<Stores, ServiceError> {
        for runtime in self.registry.iter().filter(|runtime| runtime.query_index()) {
            let view = snapshot_view(&runtime.named_aggregate().aggregate_name);
            stores.views.declare_query_index(&view).await?;
        }
        let registry = self.registry.clone();
        self.projections.insert(
            0,
            Box::new(move |stores: &Stores| {
                Arc::new(MaterializedSnapshots::new(
                    registry,
                    stores.events.clone(),
                    stores.views.clone(),
                )) as Arc<dyn EventConsumer>
            }),
        );
        // The documents are the aggregates' snapshots: loads read them, none is saved twice.
        self.snapshots = SnapshotStrategy::Never;
        Ok(Stores {
            snapshots: Arc::new(MaterializedSnapshotStore::new(stores.views.clone())),
            ..stores
        })
    }

    /// A gateway's consumers: the processors run them and retry their failures, so this
    /// process makes none; waits may still name them, by the functions returned.
    fn hand_consumers_to_processors(&mut self, stores: &Stores) -> WaitFunctions {
        let mut remote = WaitFunctions::new();
        for make in self.projections.drain(..) {
            remote = remote.with(CommandStage::Projected, make(stores).name());
        }
        for make in self.processors.drain(..) {
            remote = remote.with(CommandStage::EventHandled, make(stores).name());
        }
        for saga in self.sagas.drain(..) {
            remote = remote.with(CommandStage::SagaHandled, saga.consumer_name());
        }
        remote
    }

    /// The router: the API over `queries`, with the domain's own routes merged in (and gated,
    /// SPEC TN-2) and the error fallbacks over all of them.
    fn router(
        &mut self,
        pipeline: &LocalPipeline,
        stores: &Stores,
        queries: QuerySide,
        http: HttpConfig,
    ) -> Router {
        let state = HttpState::for_gateway(pipeline.gateway.clone(), queries, http.clone())
            .with_openapi_paths(std::mem::take(&mut self.openapi));
        let gate = state.clone();
        let context = ServiceContext {
            stores: stores.clone(),
            http,
            gateway: pipeline.gateway.clone(),
        };
        let router = self
            .routes
            .drain(..)
            .fold(wow_http::routes(state), |router, make| {
                // SPEC TN-2: a domain's route naming an aggregate and an id is gated too.
                router.merge(wow_http::gated(make(&context), &gate))
            });
        wow_http::error_fallbacks(router, pipeline.gateway.registry())
    }

    /// The pipeline over `stores`, with every registered consumer made.
    fn pipeline(
        &mut self,
        stores: &Stores,
        distribution: Option<&Distribution>,
        remote: WaitFunctions,
    ) -> LocalPipeline {
        let mut builder = LocalPipeline::builder(self.registry.clone(), stores.events.clone())
            .remote_consumers(remote)
            .idempotency(self.settings.idempotency.clone())
            .compensation(stores.compensation.clone(), self.settings.retry)
            .parked_streams(stores.parked.clone())
            .positions(stores.positions.clone())
            .deadlines(stores.deadlines.clone())
            .services(self.services.clone())
            .snapshots(stores.snapshots.clone(), self.snapshots);
        for make in self.projections.drain(..) {
            builder = builder.projection(make(stores));
        }
        for make in self.processors.drain(..) {
            builder = builder.event_processor(make(stores));
        }
        for saga in self.sagas.drain(..) {
            builder = builder.saga(saga);
        }
        if let Some(distribution) = distribution {
            builder = distribution.apply(builder);
        }
        builder.build()
    }
}

impl RunningService {
    /// The whole HTTP API: the built-in routes, each view's, the service's own.
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// The gateway, node and event dispatch.
    pub fn pipeline(&self) -> &LocalPipeline {
        &self.pipeline
    }

    /// The stores it runs on.
    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The rebuilds of the service's views beside themselves (SPEC DS-6): start one, follow
    /// its progress.
    pub fn rebuilds(&self) -> &ViewRebuilds {
        &self.rebuilds
    }

    /// What the start-up catch-up did, per consumer (its name and how far it got).
    pub fn caught_up(&self) -> &[(String, CatchUpProgress)] {
        &self.caught_up
    }

    /// Serves the router on `listener` within the settings' server limits until `stop`
    /// completes, lets the requests taken finish (see [`wow_http::serve`]), then
    /// [`stop`](Self::stop)s.
    ///
    /// # Errors
    ///
    /// [`ServiceError::Serve`] when the server cannot serve (the positions are written all
    /// the same).
    pub async fn serve_on(
        self,
        listener: TcpListener,
        stop: impl Future<Output = ()>,
    ) -> Result<(), ServiceError> {
        let served = wow_http::serve(
            listener,
            self.router.clone(),
            self.settings.server_limits,
            stop,
        )
        .await;
        self.stop().await;
        served.map_err(ServiceError::Serve)
    }

    /// The scheduler of the store's deadlines (SPEC DM-2), as this service fires them: for a
    /// pass by hand ([`DeadlineScheduler::fire_due`]) in a test or a tool.
    pub fn deadline_scheduler(&self) -> &DeadlineScheduler {
        &self.deadlines
    }

    /// Stops: asks the team's background tasks to stop and waits for them (10 s at most),
    /// writes every consumer position recorded so far, then stops the compensation
    /// scheduler, the deadline scheduler and the pipeline.
    pub async fn stop(mut self) {
        self.tasks.stop().await;
        self.background.stop_deadlines();
        if let Some(distribution) = self.distribution.take() {
            distribution.stop().await;
        }
        self.pipeline.dispatcher.flush_positions().await;
        self.background.stop();
        tracing::info!("stopped");
    }
}

/// The read side the router serves: history, snapshots, failures, quarantine, deadlines,
/// the views when snapshot queries are on, and the store's health.
fn query_side(
    settings: &Settings,
    pipeline: &LocalPipeline,
    stores: &Stores,
    compensation: &CompensationScheduler,
) -> QuerySide {
    let queries = QuerySide::new(stores.events.clone())
        .with_snapshots(Some(stores.snapshots.clone()))
        .with_compensation(compensation.clone())
        .with_quarantine(pipeline.quarantine.clone())
        .with_deadlines(stores.deadlines.clone());
    let queries = if settings.snapshot_queries {
        queries.with_views(stores.views.clone())
    } else {
        queries
    };
    match &stores.health {
        Some(health) => queries.with_store_health(health.clone()),
        None => queries,
    }
}
