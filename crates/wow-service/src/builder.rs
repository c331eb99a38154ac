//! [`ServiceBuilder`]: what a service runs (aggregates, views, sagas, consumers, routes) and
//! on what store, gathered before anything starts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use axum::Router;
use serde_json::{Map, Value};
use wow_core::aggregate::{Aggregate, AggregateRegistry, RegistrationError};
use wow_core::aggregate::{ServiceNeed, Services};
use wow_core::build::CrateBuild;
use wow_core::command::CommandBody;
use wow_core::event::EventConsumer;
use wow_core::outbox::Outbox;
use wow_core::saga::{DynSaga, FollowedEvents, MultiStream, MultiStreamSaga, Saga};
use wow_core::view::{MultiStreamView, View, ViewInputs};
use wow_core::{NamedAggregate, Stores};
use wow_http::HttpConfig;
use wow_runtime::command::CommandGateway;
use wow_runtime::event::CatchUpProgress;
use wow_runtime::eventsourcing::SnapshotStrategy;
use wow_runtime::outbox::OutboxProcessor;
use wow_runtime::view::{MultiStreamProjection, RebuildableView, ViewGenerations, ViewProjection};

use crate::multi_view_route::{multi_view_openapi, multi_view_routes};
use crate::settings::Settings;
use crate::tasks::{BackgroundContext, TaskFactory};
use crate::view_route::{view_openapi, view_route};

/// Makes a projection or a processor from the service's stores, once they are open.
pub(crate) type ConsumerFactory = Box<dyn FnOnce(&Stores) -> Arc<dyn EventConsumer> + Send>;
/// Makes a view as a rebuild fills it, from the service's stores, once they are open.
pub(crate) type RebuildableFactory = Box<dyn FnOnce(&Stores) -> Arc<dyn RebuildableView> + Send>;
/// Makes routes of the service's own, once its stores and gateway are up.
pub(crate) type RouteFactory = Box<dyn FnOnce(&ServiceContext) -> Router + Send>;

/// The entry point: `Service::builder()`.
#[derive(Debug)]
pub struct Service;

impl Service {
    /// An empty service: no aggregate yet, the default settings, the default store.
    pub fn builder() -> ServiceBuilder {
        ServiceBuilder::default()
    }
}

/// What a route of the service's own ([`ServiceBuilder::routes`]) may use: the stores, the
/// HTTP settings (for [`wow_http::caller_tenant`]) and the gateway.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServiceContext {
    /// Every store of the service, opened.
    pub stores: Stores,
    /// The HTTP settings the built-in routes run with.
    pub http: HttpConfig,
    /// Where commands go in (its registry holds the service's aggregates).
    pub gateway: CommandGateway,
}

/// Gathers a service: call the registration methods in any order, then
/// [`run`](ServiceBuilder::run) (a whole `main`), [`serve`](ServiceBuilder::serve) (in your
/// own runtime) or [`build`](ServiceBuilder::build) (for tests: no socket).
///
/// Nothing starts and no store opens before one of those three; a registration that cannot
/// hold (two aggregates of one name) is reported by them.
pub struct ServiceBuilder {
    pub(crate) registry: AggregateRegistry,
    pub(crate) duplicate: Option<RegistrationError>,
    /// Aggregates whose history consumers read, besides the registered ones.
    pub(crate) consumed: BTreeSet<NamedAggregate>,
    /// Former name → today's, of every aggregate the service runs or reads
    /// ([`Aggregate::ALIASES`]): re-keyed in the store on start.
    pub(crate) renames: BTreeMap<String, String>,
    pub(crate) projections: Vec<ConsumerFactory>,
    pub(crate) processors: Vec<ConsumerFactory>,
    pub(crate) sagas: Vec<Arc<dyn DynSaga>>,
    pub(crate) routes: Vec<RouteFactory>,
    pub(crate) openapi: Map<String, Value>,
    pub(crate) store: Option<String>,
    pub(crate) stores: Option<Stores>,
    pub(crate) settings: Settings,
    pub(crate) snapshots: SnapshotStrategy,
    pub(crate) catch_up_progress: Option<CatchUpReport>,
    /// What the handlers consult (SPEC DM-3).
    pub(crate) services: Services,
    /// Each registered aggregate's [`Aggregate::required_services`], by aggregate name.
    pub(crate) needs: Vec<(&'static str, ServiceNeed)>,
    /// Each registered aggregate's name and how to measure its crate's build (its command
    /// enum's [`CommandBody::crate_build`]), checked at start (SPEC PX-1).
    pub(crate) builds: Vec<(&'static str, MeasureBuild)>,
    /// (view, field) of every field a view over several types indexes (SPEC DM-4),
    /// declared on the view store at start.
    pub(crate) field_indexes: Vec<(&'static str, &'static str)>,
    /// The team's own background tasks, by name, started once the service serves.
    pub(crate) tasks: Vec<(&'static str, TaskFactory)>,
    /// Which generation of each view is active, shared by its projection, its readers and
    /// its rebuilds.
    pub(crate) generations: Arc<ViewGenerations>,
    /// The views a rebuild can fill a generation of.
    pub(crate) rebuildable: Vec<RebuildableFactory>,
}

/// Measures how an aggregate's crate was built ([`CommandBody::crate_build`]).
pub(crate) type MeasureBuild = fn() -> Option<CrateBuild>;

/// What the start tells of its catch-up: the consumer's name and how far it is.
pub(crate) type CatchUpReport = Box<dyn FnMut(&str, &CatchUpProgress) + Send>;

impl Default for ServiceBuilder {
    fn default() -> Self {
        Self {
            registry: AggregateRegistry::new(),
            duplicate: None,
            consumed: BTreeSet::new(),
            renames: BTreeMap::new(),
            projections: Vec::new(),
            processors: Vec::new(),
            sagas: Vec::new(),
            routes: Vec::new(),
            openapi: Map::new(),
            store: None,
            stores: None,
            settings: Settings::default(),
            snapshots: SnapshotStrategy::Every(10),
            catch_up_progress: None,
            services: Services::new(),
            needs: Vec::new(),
            builds: Vec::new(),
            field_indexes: Vec::new(),
            tasks: Vec::new(),
            generations: Arc::new(ViewGenerations::new()),
            rebuildable: Vec::new(),
        }
    }
}

impl fmt::Debug for ServiceBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let aggregates: Vec<_> = self
            .registry
            .iter()
            .map(|runtime| runtime.named_aggregate().aggregate_name.clone())
            .collect();
        f.debug_struct("ServiceBuilder")
            .field("aggregates", &aggregates)
            .field("projections", &self.projections.len())
            .field("processors", &self.processors.len())
            .field("sagas", &self.sagas)
            .field("routes", &self.openapi.keys().collect::<Vec<_>>())
            .field("store", &self.store)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl ServiceBuilder {
    /// Serves the aggregate `A`: its commands as `POST` routes, its history and state as
    /// `GET` routes, all in `/openapi.json`. A second aggregate of the same name makes the
    /// start fail with [`ServiceError::DuplicateAggregate`](crate::ServiceError::DuplicateAggregate).
    ///
    /// The start checks how `A`'s crate was compiled, through its command enum
    /// ([`CommandBody::crate_build`]): one built so that an arithmetic overflow wraps is
    /// refused with [`ServiceError::UncheckedBuild`](crate::ServiceError::UncheckedBuild)
    /// (SPEC PX-1; [`OverflowChecks`](crate::OverflowChecks) says how to start anyway).
    ///
    /// A renamed aggregate declares its former names in [`Aggregate::ALIASES`]: the start
    /// re-keys what the store holds under them (once, in one transaction) before anything
    /// reads it, and the routes of a former name reach `A`.
    pub fn aggregate<A: Aggregate>(mut self) -> Self {
        if let Err(duplicate) = self.registry.register::<A>() {
            self.duplicate.get_or_insert(duplicate);
        }
        self.note_aliases::<A>();
        self.needs.extend(
            A::required_services()
                .into_iter()
                .map(|need| (A::AGGREGATE_NAME, need)),
        );
        self.builds
            .push((A::AGGREGATE_NAME, <A::Command as CommandBody>::crate_build));
        self
    }

    /// Hands `service` to every handler that consults one of its type (SPEC DM-3;
    /// [`Aggregate::decide`]): a pricing client, say, or a fake of it in a test. A second
    /// value of one type replaces the first. Starting without a service an aggregate
    /// requires ([`Aggregate::required_services`]) is refused.
    pub fn service<T: Send + Sync + 'static>(mut self, service: T) -> Self {
        self.services.insert(service);
        self
    }

    /// Notes `A`'s former names, to re-key on start.
    fn note_aliases<A: Aggregate>(&mut self) {
        for alias in A::ALIASES {
            self.renames
                .insert((*alias).to_owned(), A::AGGREGATE_NAME.to_owned());
        }
    }

    /// Runs the view `V` as a projection into the store's view store
    /// ([`ViewProjection`]), and serves one row of it at
    /// `GET /{aggregate}/{id}/view/{V::NAME}` in the caller's tenant, with its entry (the
    /// state's JSON Schema) in `/openapi.json`. The start catches it up with the history of
    /// `V::Aggregate`, and a stream that failed once never holds the later streams of its
    /// aggregate back: they fill the gap from history.
    pub fn view<V: View>(mut self) -> Self
    where
        V::State: schemars::JsonSchema,
    {
        self.consumed.insert(V::Aggregate::named_aggregate());
        self.note_aliases::<V::Aggregate>();
        let generations = self.generations.clone();
        self.projections.push(Box::new(move |stores: &Stores| {
            Arc::new(
                ViewProjection::<V>::new(stores.views.clone())
                    .with_history(stores.events.clone())
                    .with_generations(generations),
            ) as Arc<dyn EventConsumer>
        }));
        self.rebuildable.push(Box::new(|stores: &Stores| {
            Arc::new(
                ViewProjection::<V>::new(stores.views.clone()).with_history(stores.events.clone()),
            ) as Arc<dyn RebuildableView>
        }));
        self.openapi.extend(view_openapi::<V>());
        self.routes.push(Box::new(|cx: &ServiceContext| {
            view_route::<V>(
                cx.stores.views.clone(),
                cx.stores.events.clone(),
                cx.http.clone(),
            )
        }));
        self
    }

    /// Runs the view `V` over the aggregate types it declares (SPEC DM-4) as a projection
    /// ([`MultiStreamProjection`]) into the store's view store, and serves it:
    /// `GET /views/{V::NAME}/{row}` answers one row in the caller's tenant, and
    /// `GET /views/{V::NAME}?field=value` its rows whose indexed fields
    /// ([`MultiStreamView::INDEXED`], each kept in an index at start) equal the values, a
    /// page at a time; both are in `/openapi.json`. A wait for `PROJECTED` (or for `V` by
    /// name) covers it whichever input the command wrote. The start catches it up with the
    /// history of every type it follows; emptied (`stores.views.clear(V::NAME)` and
    /// `stores.positions.reset(V::NAME)`) it is rebuilt from history by the next start.
    pub fn multi_stream_view<V: MultiStreamView>(mut self) -> Self
    where
        V::State: schemars::JsonSchema,
    {
        self.consumed
            .extend(V::inputs(ViewInputs::new()).aggregates());
        self.field_indexes
            .extend(V::INDEXED.iter().map(|field| (V::NAME, *field)));
        let generations = self.generations.clone();
        self.projections.push(Box::new(move |stores: &Stores| {
            Arc::new(
                MultiStreamProjection::<V>::new(stores.views.clone()).with_generations(generations),
            ) as Arc<dyn EventConsumer>
        }));
        self.rebuildable.push(Box::new(|stores: &Stores| {
            Arc::new(MultiStreamProjection::<V>::new(stores.views.clone()))
                as Arc<dyn RebuildableView>
        }));
        self.openapi.extend(multi_view_openapi::<V>());
        self.routes.push(Box::new(|cx: &ServiceContext| {
            let fresh = crate::fresh_consumer::ConsumerReads {
                events: cx.stores.events.clone(),
                positions: cx.stores.positions.clone(),
            };
            multi_view_routes::<V>(cx.stores.views.clone(), fresh, cx.http.clone())
        }));
        self
    }

    /// Runs `saga` on the events of its aggregate. The start catches it up with that
    /// aggregate's history.
    pub fn saga<S: Saga>(mut self, saga: S) -> Self {
        self.consumed
            .insert(<S::Aggregate as Aggregate>::named_aggregate());
        self.note_aliases::<S::Aggregate>();
        self.sagas.push(Arc::new(saga));
        self
    }

    /// Runs `saga` on the events of every aggregate type it follows (SPEC DM-4,
    /// [`MultiStreamSaga`]). The start catches it up with the history of each.
    pub fn multi_stream_saga<S: MultiStreamSaga>(mut self, saga: S) -> Self {
        self.consumed
            .extend(<S::Events as FollowedEvents>::aggregates());
        self.sagas.push(Arc::new(MultiStream(saga)));
        self
    }

    /// Runs `task` beside the service: started once the service has caught up (every
    /// process of it, in the distributed mode), given a [`BackgroundContext`] (the gateway,
    /// the stores, and the shutdown signal), and awaited on shutdown: a task returns soon
    /// after [`BackgroundContext::shutdown`] resolves, or is cut off 10 s later. A task that
    /// panics is logged and stops alone; the service goes on. For work that is not a
    /// consumer of events: a poller of another system, a periodic report.
    ///
    /// ```ignore
    /// Service::builder().background_task("poll-bank-feed", |ctx| async move {
    ///     loop {
    ///         tokio::select! {
    ///             _ = ctx.shutdown() => return,
    ///             _ = tokio::time::sleep(Duration::from_secs(30)) => poll(&ctx.gateway).await,
    ///         }
    ///     }
    /// })
    /// ```
    pub fn background_task<F, Fut>(mut self, name: &'static str, task: F) -> Self
    where
        F: FnOnce(BackgroundContext) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        self.tasks
            .push((name, Box::new(move |context| Box::pin(task(context)))));
        self
    }

    /// Tells `progress` how the start's catch-up goes (the consumer's name and how far it
    /// is), for a progress bar.
    pub fn on_catch_up(
        mut self,
        progress: impl FnMut(&str, &CatchUpProgress) + Send + 'static,
    ) -> Self {
        self.catch_up_progress = Some(Box::new(progress));
        self
    }

    /// Records the rows of the outbox `O` in the store's view store, each once, with its
    /// processed-message record ([`OutboxProcessor`], stage `EVENT_HANDLED`). The start
    /// catches it up with the history of `O::Aggregate`. Its rows are sent by an
    /// [`OutboxDelivery`](wow_runtime::outbox::OutboxDelivery) over the same stores.
    pub fn outbox<O: Outbox>(mut self) -> Self {
        self.consumed.insert(O::Aggregate::named_aggregate());
        self.note_aliases::<O::Aggregate>();
        self.processors.push(Box::new(|stores: &Stores| {
            Arc::new(OutboxProcessor::<O>::new(stores.views.clone())) as Arc<dyn EventConsumer>
        }));
        self
    }

    /// Adds a projection (stage `PROJECTED`), made by `make` from the opened stores: one
    /// over `stores.views`, say, so that its rows commit with its processed-message records.
    /// The start catches it up with the history of the registered aggregates (and of those
    /// the views and sagas read).
    pub fn projection(
        mut self,
        make: impl FnOnce(&Stores) -> Arc<dyn EventConsumer> + Send + 'static,
    ) -> Self {
        self.projections.push(Box::new(make));
        self
    }

    /// Adds an event processor (stage `EVENT_HANDLED`), made by `make` from the opened
    /// stores: one over `stores.effects` or `stores.views` (an outbox), say. It is caught up
    /// as a projection is.
    pub fn processor(
        mut self,
        make: impl FnOnce(&Stores) -> Arc<dyn EventConsumer> + Send + 'static,
    ) -> Self {
        self.processors.push(Box::new(make));
        self
    }

    /// Merges the routes `make` builds into the router, and `openapi_paths` (an OpenAPI
    /// `paths` object) into `/openapi.json`, which completes each operation as
    /// [`HttpState::with_openapi_paths`](wow_http::HttpState::with_openapi_paths) says.
    /// Unknown methods on them answer 405 with a code, as the built-in routes do.
    pub fn routes(
        mut self,
        make: impl FnOnce(&ServiceContext) -> Router + Send + 'static,
        openapi_paths: Map<String, Value>,
    ) -> Self {
        self.routes.push(Box::new(make));
        self.openapi.extend(openapi_paths);
        self
    }

    /// A read route of the domain's own, `GET path` (the path holds one `{id}`), answering
    /// what `read` finds for the caller's tenant and the path's id as JSON, and documented in
    /// `/openapi.json` from `T`'s JSON Schema under `operation_id`: 200 with the value, 404
    /// `NotFound` when `read` finds none, 400 `IllegalArgument` for an id that breaks the id
    /// rules, 503 `ServiceUnavailable` when `read` fails. It is an owner's and space's access
    /// boundary as every route naming an aggregate and an id is (SPEC TN-2).
    pub fn read_route<T, F, Fut>(
        self,
        operation_id: &str,
        path: &'static str,
        summary: &str,
        read: F,
    ) -> Self
    where
        T: serde::Serialize + schemars::JsonSchema + Send + 'static,
        F: Fn(crate::ReadRequest) -> Fut + Clone + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Option<T>, wow_core::BoxError>> + Send + 'static,
    {
        let openapi = crate::read_route::read_openapi::<T>(operation_id, path, summary);
        self.routes(
            move |cx| crate::read_route::read_route(cx.stores.clone(), cx.http.clone(), path, read),
            openapi,
        )
    }

    /// Opens the store `url` names (`memory://`, `sqlite://PATH`, `postgres://...`) unless
    /// the settings name one (`--store`, `WOW_STORE`, `store` in the file). Default:
    /// [`DEFAULT_STORE`](crate::DEFAULT_STORE).
    pub fn store(mut self, url: impl Into<String>) -> Self {
        self.store = Some(url.into());
        self
    }

    /// Runs on `stores`, whatever the settings say of the store: for tests, and for stores
    /// wrapped by the caller.
    pub fn stores(mut self, stores: Stores) -> Self {
        self.stores = Some(stores);
        self
    }

    /// Runs with `settings` (default: [`Settings::default`]). [`run`](Self::run) reads its
    /// own from the command line instead.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Saves aggregate snapshots by `strategy` when snapshot queries are off. Default: every
    /// 10 versions. With snapshot queries on (the default), the materialized snapshots are
    /// the aggregates' snapshots: loads read them and this strategy is not used.
    pub fn snapshots(mut self, strategy: SnapshotStrategy) -> Self {
        self.snapshots = strategy;
        self
    }

    /// Every aggregate whose history the consumers read: the registered ones and those of
    /// the views and sagas, once each, in name order.
    pub(crate) fn consumed_aggregates(&self) -> Vec<NamedAggregate> {
        let mut all = self.consumed.clone();
        all.extend(
            self.registry
                .iter()
                .map(|runtime| runtime.named_aggregate().clone()),
        );
        all.into_iter().collect()
    }
}
