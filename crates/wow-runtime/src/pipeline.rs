//! One process running every role: a gateway, a processing node and the event dispatch,
//! joined by in-memory buses. What `wow serve` and tests start from.

use std::sync::Arc;

use std::time::Duration;
use tokio::sync::Notify;

use crate::command::{
    CommandGateway, DefaultCommandHandler, InFlightRequests, WaitCoordinator, WaitFunctions,
    WaitNotifier,
};
use crate::compensation::{CompensationError, CompensationScheduler};
use crate::deadline::DeadlineScheduler;
use crate::event::{catch_up, CatchUpError, CatchUpProgress, EventDispatcher};
use crate::event::{InMemoryDomainEventBus, DEFAULT_PARTITION_CAPACITY};
use crate::eventsourcing::{AggregateCache, SnapshotStrategy, Snapshotter};
use crate::idempotency::{
    BloomIdempotencyCheckerProvider, DefaultRequestIdChecker, EventStoreRequestIdExistenceChecker,
    IdempotencyConfig, NoopRequestIdExistenceChecker, RequestIdChecker, RequestIdExistenceChecker,
};
use crate::metrics::PipelineMetrics;
use wow_core::aggregate::Services;
use wow_core::aggregate::{AggregateRegistry, QuarantinedAggregates};
use wow_core::command::CommandStage;
use wow_core::command::{CommandBus, CommandHandler, InMemoryCommandBus};
use wow_core::compensation::CompensationStore;
use wow_core::compensation::RetrySpec;
use wow_core::deadline::DeadlineStore;
use wow_core::event::{
    ConsumerPositions, DomainEventBus, EventConsumer, InMemoryParkedStreams, ParkedStreams,
};
use wow_core::eventsourcing::{EventStore, SnapshotStore};
use wow_core::id::{Clock, IdGenerator, SystemClock, UuidV7IdGenerator};
use wow_core::saga::DynSaga;
use wow_core::NamedAggregate;

/// Builds a [`LocalPipeline`].
#[derive(Debug)]
pub struct LocalPipelineBuilder {
    registry: AggregateRegistry,
    store: Arc<dyn EventStore>,
    snapshots: Option<(Arc<dyn SnapshotStore>, SnapshotStrategy)>,
    projections: Vec<Arc<dyn EventConsumer>>,
    processors: Vec<Arc<dyn EventConsumer>>,
    sagas: Vec<Arc<dyn DynSaga>>,
    /// Consumers that run elsewhere (on processing nodes), that waits may still name.
    remote_consumers: WaitFunctions,
    idempotency: IdempotencyConfig,
    partitions: usize,
    partition_capacity: usize,
    send_timeout: Duration,
    compensation: Option<(Arc<dyn CompensationStore>, RetrySpec)>,
    parked: Option<Arc<dyn ParkedStreams>>,
    positions: Option<Arc<dyn ConsumerPositions>>,
    deadlines: Option<Arc<dyn DeadlineStore>>,
    services: Services,
    decision_budget: Duration,
    time: TimeAndIds,
    transport: Transport,
}

/// What joins this pipeline to others: by default nothing (every part in this process).
#[derive(Debug, Default)]
struct Transport {
    /// Where the gateway sends; `None`: the in-process bus to this pipeline's node.
    command_bus: Option<Arc<dyn CommandBus>>,
    /// The coordinator of this process's callers; `None`: a new one.
    waits: Option<Arc<WaitCoordinator>>,
    /// Where the node and the consumers signal; `None`: `waits`.
    notifier: Option<Arc<dyn WaitNotifier>>,
    /// The gateway checks request ids against its Bloom filters only (SPEC RQ-3).
    gateway_without_store: bool,
    /// Where the node publishes appended streams instead of the in-process event bus (whose
    /// workers then do not start): a [`FeedWake`](crate::event::FeedWake) when the
    /// consumers follow the store's feed.
    node_events: Option<Arc<dyn DomainEventBus>>,
}

/// Where every part of one pipeline takes its time and its ids from: chosen once, by
/// [`LocalPipelineBuilder::clock`] and [`LocalPipelineBuilder::id_generator`].
#[derive(Debug, Clone)]
struct TimeAndIds {
    clock: Arc<dyn Clock>,
    /// `None`: the default generator, and events keep the ids their aggregate gave them.
    ids: Option<Arc<dyn IdGenerator>>,
}

impl TimeAndIds {
    fn ids(&self) -> Arc<dyn IdGenerator> {
        self.ids
            .clone()
            .unwrap_or_else(|| Arc::new(UuidV7IdGenerator))
    }
}

impl LocalPipelineBuilder {
    /// Records every consumer failure in `store` for retries by `retry` (SPEC DS-4); see
    /// [`LocalPipeline::compensation`].
    pub fn compensation(mut self, store: Arc<dyn CompensationStore>, retry: RetrySpec) -> Self {
        self.compensation = Some((store, retry));
        self
    }

    /// Keeps the lanes of parked streams in `lanes` (SPEC DS-5): with a compensation store,
    /// a consumer's later streams of an aggregate wait behind its failed one, in order, until
    /// a retry succeeds. Default: in memory, rebuilt after a restart by catch-up (positions
    /// stop before the failed stream, so it and every later one are delivered again in order).
    pub fn parked_streams(mut self, lanes: Arc<dyn ParkedStreams>) -> Self {
        self.parked = Some(lanes);
        self
    }

    /// Hands `services` to the handlers (SPEC DM-3;
    /// [`Aggregate::decide`](wow_core::aggregate::Aggregate::decide)). Default: none.
    pub fn services(mut self, services: Services) -> Self {
        self.services = services;
        self
    }

    /// How long one decision may take, its service calls included (SPEC DM-3); default
    /// [`DEFAULT_DECISION_BUDGET`](crate::command::DEFAULT_DECISION_BUDGET).
    pub fn decision_budget(mut self, budget: Duration) -> Self {
        self.decision_budget = budget;
        self
    }

    /// Keeps the deadlines sagas schedule in `deadlines`, and has the node refuse a fired
    /// deadline whose schedule is no longer pending there (SPEC DM-2, DM-6; the store of the
    /// pipeline's history, so a deadline an aggregate schedules and one a saga schedules
    /// are fired by one [`DeadlineScheduler`]).
    pub fn deadlines(mut self, deadlines: Arc<dyn DeadlineStore>) -> Self {
        self.deadlines = Some(deadlines);
        self
    }

    /// Keeps every consumer's position in `positions`, so that [`LocalPipeline::catch_up`]
    /// resumes where each consumer stopped.
    pub fn positions(mut self, positions: Arc<dyn ConsumerPositions>) -> Self {
        self.positions = Some(positions);
        self
    }

    /// The clock of every part of the pipeline (the system clock by default): decisions and
    /// streams, results and stage signals, Bloom filter rotation, snapshots, failure records
    /// and retries.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.time.clock = clock;
        self
    }

    /// The ids of every part of the pipeline (UUIDv7 by default): streams, events, results
    /// and stage signals.
    pub fn id_generator(mut self, ids: Arc<dyn IdGenerator>) -> Self {
        self.time.ids = Some(ids);
        self
    }

    /// Loads from and saves snapshots to `store` by `strategy`.
    pub fn snapshots(mut self, store: Arc<dyn SnapshotStore>, strategy: SnapshotStrategy) -> Self {
        self.snapshots = Some((store, strategy));
        self
    }

    /// Adds a projection.
    pub fn projection(mut self, projection: Arc<dyn EventConsumer>) -> Self {
        self.projections.push(projection);
        self
    }

    /// Adds an event processor.
    pub fn event_processor(mut self, processor: Arc<dyn EventConsumer>) -> Self {
        self.processors.push(processor);
        self
    }

    /// Consumers that run on other nodes (a gateway's processing nodes): a wait may name
    /// them (`Command-Wait-Processor`) as it names the pipeline's own.
    pub fn remote_consumers(mut self, consumers: WaitFunctions) -> Self {
        self.remote_consumers = consumers;
        self
    }

    /// Adds a saga.
    pub fn saga(mut self, saga: Arc<dyn DynSaga>) -> Self {
        self.sagas.push(saga);
        self
    }

    /// The `idempotency.*` settings of every Bloom filter (gateway's and node's).
    pub fn idempotency(mut self, config: IdempotencyConfig) -> Self {
        self.idempotency = config;
        self
    }

    /// Bus partitions (workers). Default: 4 per available core.
    pub fn partitions(mut self, partitions: usize) -> Self {
        self.partitions = partitions;
        self
    }

    /// Streams each event-bus partition holds in memory for its consumers; when consumers
    /// fall behind further, the rest is read back from the event store. Default:
    /// [`DEFAULT_PARTITION_CAPACITY`].
    pub fn partition_capacity(mut self, streams: usize) -> Self {
        self.partition_capacity = streams;
        self
    }

    /// How long a send may take. Default 5 s.
    pub fn send_timeout(mut self, timeout: Duration) -> Self {
        self.send_timeout = timeout;
        self
    }

    /// Sends the gateway's commands on `bus` (a distributed bus) instead of to this
    /// pipeline's own node, which then receives only what is handed to it
    /// ([`LocalPipeline::node`]). The gateway keeps no in-flight entries then: its node
    /// is elsewhere.
    pub fn command_bus(mut self, bus: Arc<dyn CommandBus>) -> Self {
        self.transport.command_bus = Some(bus);
        self
    }

    /// The coordinator that this process's callers wait on (share it with whatever delivers
    /// remote signals to it). Default: a new one.
    pub fn wait_coordinator(mut self, waits: Arc<WaitCoordinator>) -> Self {
        self.transport.waits = Some(waits);
        self
    }

    /// Where the node and the consumers send their stage signals (a transport back to the
    /// gateway that took each command). Default: the pipeline's own coordinator.
    pub fn wait_notifier(mut self, notifier: Arc<dyn WaitNotifier>) -> Self {
        self.transport.notifier = Some(notifier);
        self
    }

    /// Makes the gateway check request ids against its Bloom filters alone, as a gateway
    /// with no event store does (SPEC RQ-3): a maybe-seen id is sent on, and the node that
    /// owns the aggregate decides. Look-ups still read the store.
    pub fn gateway_without_store(mut self) -> Self {
        self.transport.gateway_without_store = true;
        self
    }

    /// Makes the node publish appended streams on `events` instead of the in-process event
    /// bus, whose workers then do not run: the consumers are driven from elsewhere (a
    /// [`FeedFollower`](crate::event::FeedFollower) over
    /// [`LocalPipeline::dispatcher`], woken by a
    /// [`FeedWake`](crate::event::FeedWake) given here).
    pub fn node_events(mut self, events: Arc<dyn DomainEventBus>) -> Self {
        self.transport.node_events = Some(events);
        self
    }

    /// Starts the pipeline. Must be called inside a tokio runtime.
    pub fn build(mut self) -> LocalPipeline {
        let metrics = Arc::new(PipelineMetrics::default());
        let waits = self.transport.waits.take().unwrap_or_default();
        let notifier: Arc<dyn WaitNotifier> = match self.transport.notifier.take() {
            Some(notifier) => notifier,
            None => waits.clone(),
        };
        // Ownership runs one way: gateway → command bus → node → event bus → (channel) →
        // workers → dispatcher, which holds the gateway only weakly for its sagas.
        let (event_bus, feed) = InMemoryDomainEventBus::bounded(
            self.partitions,
            self.partition_capacity,
            metrics.clone(),
        );
        let event_bus = Arc::new(event_bus);
        let command_bus = Arc::new(InMemoryCommandBus::new(self.partitions, 1024));
        let in_flight = Arc::new(InFlightRequests::new());
        let gateway = self.gateway(&waits, &metrics, &command_bus, &in_flight);
        let deadlines = self.deadlines.clone();
        let dispatcher = self.dispatcher(&notifier, &gateway);
        let node_events: Arc<dyn DomainEventBus> = match self.transport.node_events.take() {
            Some(events) => events,
            None => {
                feed.start(dispatcher.clone(), self.store.clone());
                event_bus.clone()
            }
        };
        let pipeline = LocalPipeline {
            gateway,
            command_bus,
            event_bus,
            node_events,
            dispatcher,
            waits,
            notifier,
            metrics,
            quarantine: QuarantinedAggregates::new(),
            cache: AggregateCache::default(),
            registry: self.registry,
            store: self.store,
            snapshots: self.snapshots.map(|(store, _)| store),
            idempotency: self.idempotency,
            in_flight,
            time: self.time.clone(),
            services: self.services,
            decision_budget: self.decision_budget,
            deadlines,
            deadlines_scheduled: Arc::new(Notify::new()),
        };
        pipeline.restart_node();
        pipeline
    }
    /// The gateway: its request-id checker, the bus it sends on (this pipeline's own unless
    /// a distributed one was given), and the consumers a caller may wait for.
    fn gateway(
        &mut self,
        waits: &Arc<WaitCoordinator>,
        metrics: &Arc<PipelineMetrics>,
        command_bus: &Arc<InMemoryCommandBus>,
        in_flight: &Arc<InFlightRequests>,
    ) -> CommandGateway {
        let gateway_checker = if self.transport.gateway_without_store {
            bloom_only_checker(&self.idempotency, metrics, &self.time)
        } else {
            checker(&self.idempotency, &self.store, metrics, &self.time)
        };
        let distributed = self.transport.command_bus.is_some();
        let gateway_bus: Arc<dyn CommandBus> = match self.transport.command_bus.take() {
            Some(bus) => bus,
            None => command_bus.clone(),
        };
        let mut gateway = CommandGateway::builder(self.registry.clone(), gateway_bus);
        if !distributed && !self.transport.gateway_without_store {
            gateway = gateway.in_flight(in_flight.clone());
        }
        if distributed {
            // Signals cross the network: one lost with a processor or a NATS restart is
            // found in the store instead of waited out (a gateway that checks request ids by
            // its filters alone still reads the store for look-ups).
            gateway = gateway.look_up_lost_signals(Arc::new(
                EventStoreRequestIdExistenceChecker::new(self.store.clone()),
            ));
        }
        let mut consumers = std::mem::take(&mut self.remote_consumers);
        for projection in &self.projections {
            consumers = consumers.with(CommandStage::Projected, projection.name());
        }
        for processor in &self.processors {
            consumers = consumers.with(CommandStage::EventHandled, processor.name());
        }
        for saga in &self.sagas {
            consumers = consumers.with(CommandStage::SagaHandled, saga.consumer_name());
        }
        gateway
            .wait_functions(consumers)
            .request_id_checker(gateway_checker)
            .idempotency(self.idempotency.clone())
            .clock(self.time.clock.clone())
            .id_generator(self.time.ids())
            .wait_coordinator(waits.clone())
            .send_timeout(self.send_timeout)
            .metrics(metrics.clone())
            .build()
    }

    /// The dispatcher of the registered consumers, its sagas sending through `gateway`.
    fn dispatcher(
        &mut self,
        notifier: &Arc<dyn WaitNotifier>,
        gateway: &CommandGateway,
    ) -> Arc<EventDispatcher> {
        let mut dispatcher = EventDispatcher::builder(notifier.clone())
            .gateway(gateway)
            .event_store(self.store.clone())
            .metrics(gateway.metrics().clone());
        if let Some((snapshots, strategy)) = self
            .snapshots
            .as_ref()
            .filter(|(_, strategy)| *strategy != SnapshotStrategy::Never)
        {
            dispatcher = dispatcher.snapshotter(
                Snapshotter::new(
                    self.registry.clone(),
                    self.store.clone(),
                    snapshots.clone(),
                    *strategy,
                )
                .with_clock(self.time.clock.clone()),
            );
        }
        for projection in std::mem::take(&mut self.projections) {
            dispatcher = dispatcher.projection(projection);
        }
        for processor in std::mem::take(&mut self.processors) {
            dispatcher = dispatcher.event_processor(processor);
        }
        for saga in std::mem::take(&mut self.sagas) {
            dispatcher = dispatcher.saga(saga);
        }
        if let Some((store, retry)) = self.compensation.take() {
            dispatcher = dispatcher.compensation(store, retry).parked_streams(
                self.parked
                    .take()
                    .unwrap_or_else(|| Arc::new(InMemoryParkedStreams::new())),
            );
        }
        if let Some(positions) = self.positions.take() {
            dispatcher = dispatcher.positions(positions);
        }
        if let Some(deadlines) = self.deadlines.take() {
            dispatcher = dispatcher.deadlines(deadlines);
        }
        dispatcher
            .clock(self.time.clock.clone())
            .id_generator(self.time.ids())
            .build()
    }
}

/// A [`DefaultRequestIdChecker`] with its own Bloom filters, backed by `store`.
pub fn store_checker(
    idempotency: &IdempotencyConfig,
    store: &Arc<dyn EventStore>,
    metrics: &Arc<PipelineMetrics>,
) -> Arc<dyn RequestIdChecker> {
    let time = TimeAndIds {
        clock: Arc::new(SystemClock),
        ids: None,
    };
    checker(idempotency, store, metrics, &time)
}

/// A checker of Bloom filters alone, for a gateway with no store (SPEC RQ-3).
fn bloom_only_checker(
    idempotency: &IdempotencyConfig,
    metrics: &Arc<PipelineMetrics>,
    time: &TimeAndIds,
) -> Arc<dyn RequestIdChecker> {
    filters_before(
        Arc::new(NoopRequestIdExistenceChecker),
        idempotency,
        metrics,
        time,
    )
}

/// [`store_checker`] with filters that rotate by the pipeline's clock.
fn checker(
    idempotency: &IdempotencyConfig,
    store: &Arc<dyn EventStore>,
    metrics: &Arc<PipelineMetrics>,
    time: &TimeAndIds,
) -> Arc<dyn RequestIdChecker> {
    filters_before(
        Arc::new(EventStoreRequestIdExistenceChecker::new(store.clone())),
        idempotency,
        metrics,
        time,
    )
}

/// Bloom filters rotating by the pipeline's clock, asking `existence` on a maybe-seen id.
fn filters_before(
    existence: Arc<dyn RequestIdExistenceChecker>,
    idempotency: &IdempotencyConfig,
    metrics: &Arc<PipelineMetrics>,
    time: &TimeAndIds,
) -> Arc<dyn RequestIdChecker> {
    Arc::new(
        DefaultRequestIdChecker::new(
            Arc::new(BloomIdempotencyCheckerProvider::with_clock(
                idempotency.clone(),
                time.clock.clone(),
            )),
            existence,
        )
        .with_metrics(metrics.clone()),
    )
}

/// Hands each command to the node subscribed to the in-process bus now.
#[derive(Debug)]
struct CurrentNode(Arc<InMemoryCommandBus>);

#[async_trait::async_trait]
impl CommandHandler for CurrentNode {
    async fn handle(&self, command: wow_core::command::JsonCommand) {
        match self.0.subscriber() {
            Some(node) => node.handle(command).await,
            None => {
                tracing::warn!(command_id = %command.id, "no processing node runs; the command is dropped unanswered")
            }
        }
    }
}

/// Gateway, processing node and event dispatch in one process (the `monolith` role).
///
/// The gateway and the node each keep their own Bloom filters per aggregate type (SPEC
/// RQ-5), both backed by the event store.
#[derive(Debug)]
pub struct LocalPipeline {
    /// Where commands go in.
    pub gateway: CommandGateway,
    /// The bus between the gateway and the node.
    pub command_bus: Arc<InMemoryCommandBus>,
    /// The bus between the node and the dispatcher.
    pub event_bus: Arc<InMemoryDomainEventBus>,
    /// Where the node publishes: `event_bus`, unless the builder was given other
    /// [`node_events`](LocalPipelineBuilder::node_events).
    node_events: Arc<dyn DomainEventBus>,
    /// Runs the consumers.
    pub dispatcher: Arc<EventDispatcher>,
    /// Routes stage signals to waiting callers.
    pub waits: Arc<WaitCoordinator>,
    /// Where the node and the consumers send stage signals: `waits`, unless the builder
    /// was given a transport.
    pub notifier: Arc<dyn WaitNotifier>,
    /// The counters of the whole pipeline.
    pub metrics: Arc<PipelineMetrics>,
    /// The aggregates the processing node quarantined because their history cannot be
    /// applied (SPEC PX-1), for health and metrics. Lifted by [`restart_node`](Self::restart_node)
    /// (as by a process restart) and by a successful retry of the quarantine's compensation
    /// record.
    pub quarantine: QuarantinedAggregates,
    cache: AggregateCache,
    registry: AggregateRegistry,
    store: Arc<dyn EventStore>,
    snapshots: Option<Arc<dyn SnapshotStore>>,
    idempotency: IdempotencyConfig,
    in_flight: Arc<InFlightRequests>,
    time: TimeAndIds,
    services: Services,
    decision_budget: Duration,
    deadlines: Option<Arc<dyn DeadlineStore>>,
    /// Told by the node each time a decision schedules a deadline; wakes the schedulers of
    /// [`deadline_scheduler`](Self::deadline_scheduler) for a look at the store.
    deadlines_scheduled: Arc<Notify>,
}

impl LocalPipeline {
    /// A builder for `registry`'s aggregates over `store`.
    pub fn builder(
        registry: AggregateRegistry,
        store: Arc<dyn EventStore>,
    ) -> LocalPipelineBuilder {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        LocalPipelineBuilder {
            registry,
            store,
            snapshots: None,
            projections: Vec::new(),
            processors: Vec::new(),
            sagas: Vec::new(),
            remote_consumers: WaitFunctions::new(),
            idempotency: IdempotencyConfig::default(),
            partitions: cores * 4,
            partition_capacity: DEFAULT_PARTITION_CAPACITY,
            send_timeout: crate::command::DEFAULT_SEND_TIMEOUT,
            compensation: None,
            parked: None,
            positions: None,
            deadlines: None,
            services: Services::new(),
            decision_budget: crate::command::DEFAULT_DECISION_BUDGET,
            time: TimeAndIds {
                clock: Arc::new(SystemClock),
                ids: None,
            },
            transport: Transport::default(),
        }
    }

    /// Replaces the processing node with a fresh one: new Bloom filters, empty cache, no
    /// quarantined aggregates, same store, as after a process restart (SPEC RQ-4, PX-1).
    pub fn restart_node(&self) -> Arc<DefaultCommandHandler> {
        self.quarantine.clear();
        self.cache.clear();
        let mut node = DefaultCommandHandler::builder(
            self.registry.clone(),
            self.store.clone(),
            self.node_events.clone(),
            self.notifier.clone(),
        )
        .request_id_checker(checker(
            &self.idempotency,
            &self.store,
            &self.metrics,
            &self.time,
        ))
        .clock(self.time.clock.clone())
        .in_flight(self.in_flight.clone())
        .metrics(self.metrics.clone())
        .cache(self.cache.clone())
        .quarantine(self.quarantine.clone())
        .services(self.services.clone())
        .decision_budget(self.decision_budget);
        if let Some(ids) = &self.time.ids {
            node = node.id_generator(ids.clone());
        }
        if let Some(snapshots) = &self.snapshots {
            node = node.snapshot_store(snapshots.clone());
        }
        if let Some(deadlines) = &self.deadlines {
            node = node.deadlines(deadlines.clone());
        }
        node = node.deadlines_scheduled(self.deadlines_scheduled.clone());
        if let Some((failures, retry)) = self.dispatcher.compensation() {
            node = node.compensation(failures.clone(), *retry);
        }
        let node = Arc::new(node.build());
        self.command_bus.subscribe(node.clone());
        node
    }

    /// The processing node's cache of aggregate states, shared with it: a transport whose
    /// node can lose an aggregate to another process and get it back (a partition taken over)
    /// evicts what it must no longer trust.
    pub fn aggregate_cache(&self) -> &AggregateCache {
        &self.cache
    }

    /// The processing node as a [`CommandHandler`], for a transport that delivers commands
    /// from elsewhere (see [`LocalPipelineBuilder::command_bus`]): each command goes to the
    /// node running at that moment, the one [`restart_node`](Self::restart_node) made last.
    pub fn node(&self) -> Arc<dyn CommandHandler> {
        Arc::new(CurrentNode(self.command_bus.clone()))
    }

    /// What happened to `request_id` of `aggregate_id` (SPEC TO-1).
    pub async fn look_up_request(
        &self,
        aggregate_id: &wow_core::AggregateId,
        request_id: &str,
    ) -> crate::command::RequestOutcome {
        crate::command::look_up_request(
            &self.gateway,
            self.store.as_ref(),
            aggregate_id,
            request_id,
        )
        .await
    }

    /// The event store.
    pub fn store(&self) -> &Arc<dyn EventStore> {
        &self.store
    }

    /// The retrier of recorded consumer failures (SPEC DS-4) and of quarantined aggregates
    /// (SPEC PX-1); `NotConfigured` unless the pipeline was built with a compensation store.
    pub fn compensation(&self) -> Result<CompensationScheduler, CompensationError> {
        Ok(
            CompensationScheduler::new(self.dispatcher.clone(), self.store.clone())?
                .with_quarantine(
                    self.registry.clone(),
                    self.snapshots.clone(),
                    self.quarantine.clone(),
                ),
        )
    }

    /// The scheduler of `deadlines`' due commands (SPEC DM-2), firing through this pipeline's
    /// gateway by its clock; run it with [`DeadlineScheduler::run`] or pass by pass with
    /// [`DeadlineScheduler::fire_due`].
    ///
    /// A row that fails as often as the scheduler allows is recorded in the pipeline's
    /// compensation store, when it has one (SPEC DM-6). A running scheduler is woken each time
    /// this pipeline's node schedules a deadline, so a row due sooner than the scheduler's
    /// next look is fired on time.
    pub fn deadline_scheduler(&self, deadlines: Arc<dyn DeadlineStore>) -> DeadlineScheduler {
        let scheduler =
            DeadlineScheduler::new(deadlines, self.gateway.clone(), self.time.clock.clone())
                .woken_by(self.deadlines_scheduled.clone());
        match self.dispatcher.compensation() {
            Some((failures, _)) => scheduler.with_compensation(failures.clone()),
            None => scheduler,
        }
    }

    /// Runs every consumer over the history of `aggregates` it has not handled yet, one
    /// consumer after another (see [`catch_up`]); `progress` is told the consumer's name and
    /// how far it is.
    pub async fn catch_up(
        &self,
        aggregates: &[NamedAggregate],
        progress: &mut (dyn FnMut(&str, &CatchUpProgress) + Send),
    ) -> Result<Vec<(String, CatchUpProgress)>, CatchUpError> {
        let mut report = Vec::new();
        for name in self.dispatcher.consumer_names() {
            let done = catch_up(
                &self.dispatcher,
                &name,
                self.store.as_ref(),
                aggregates,
                &mut |step| progress(&name, step),
            )
            .await?;
            report.push((name, done));
        }
        Ok(report)
    }
}
