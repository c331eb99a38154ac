//! The wiring of one run: the real pipeline built from its parts — store, processing nodes,
//! gateway, event bus, dispatcher and its consumers — with the fault decorators in between.
//! The steps run in a fixed order, since some of them draw from the run's random source or
//! start tasks, and a seed must replay the same run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wow_core::aggregate::AggregateRegistry;
use wow_core::compensation::{InMemoryCompensationStore, RetrySpec};
use wow_core::event::{
    InMemoryConsumerPositions, InMemoryParkedStreams, InMemoryProcessedMessages,
};
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::CommandResult;
use wow_runtime::command::{CommandGateway, InFlightRequests, WaitCoordinator};
use wow_runtime::event::{EventDispatcher, EventFeed, InMemoryDomainEventBus};
use wow_runtime::idempotency::{
    BloomIdempotencyCheckerProvider, DefaultRequestIdChecker, EventStoreRequestIdExistenceChecker,
    IdempotencyConfig, NoopRequestIdExistenceChecker, RequestIdExistenceChecker,
};
use wow_runtime::metrics::PipelineMetrics;

use crate::chaos::{Chaos, SimClock};
use crate::consumers::{
    BalanceProjection, Balances, Flaky, FlakySaga, HandledOrder, Outbox, OutboxProcessor,
    Redelivery, WalletSaga,
};
use crate::domain::Wallet;
use crate::nodes::{
    Crashed, FaultyCommandBus, FaultyEventBus, FaultyNotifier, NodeParts, Nodes, SentCommands,
};
use crate::sim_config::SimConfig;
use crate::store::FaultyEventStore;

/// Retries of failed consumers in the quiet phase: fast, and never exhausted.
pub(crate) const RETRY: RetrySpec = RetrySpec {
    max_attempts: 1_000,
    initial_backoff_ms: 100,
    max_backoff_ms: 1_000,
};

/// The running pipeline of one run: what its callers, its quiet phase and its checks use.
/// It holds every part that others hold only weakly (the nodes, the gateway, the
/// dispatcher), so they live as long as it does.
pub(crate) struct Pipeline {
    /// The virtual clock of the Bloom filters.
    pub(crate) clock: Arc<SimClock>,
    /// The store without faults: what the quiet phase and the checks read.
    pub(crate) raw: Arc<InMemoryEventStore>,
    /// The store with faults: what the nodes and the callers use.
    pub(crate) store: Arc<dyn EventStore>,
    /// The idempotency settings of the gateway and the nodes.
    pub(crate) idempotency: IdempotencyConfig,
    /// The gateway's wait handles.
    pub(crate) waits: Arc<WaitCoordinator>,
    /// The processing nodes.
    pub(crate) nodes: Arc<Nodes>,
    /// The gateway the callers send through.
    pub(crate) gateway: CommandGateway,
    /// The dispatcher of the projection, the outbox processor and the saga.
    pub(crate) dispatcher: Arc<EventDispatcher>,
    /// Every consumer failure, recorded for compensation.
    pub(crate) failures: Arc<InMemoryCompensationStore>,
    /// The projection's model.
    pub(crate) balances: Arc<InMemoryProcessedMessages<Balances>>,
    /// The outbox processor's rows.
    pub(crate) outbox: Arc<InMemoryProcessedMessages<Outbox>>,
    /// Every delivery the consumers acknowledged, in order (SPEC DS-5).
    pub(crate) order: HandledOrder,
    /// Every result the gateway reported to the saga as succeeded.
    pub(crate) saga_reported: Arc<Mutex<Vec<CommandResult>>>,
    /// The in-flight registry the gateway shares with the nodes (a monolith), or none.
    pub(crate) in_flight: Option<Arc<InFlightRequests>>,
    /// Whether the gateway shares an in-flight registry with the nodes and asks the store on
    /// a Bloom hit.
    pub(crate) monolith: bool,
}

/// What the nodes, the gateway and the dispatcher all share.
struct Shared {
    clock: Arc<SimClock>,
    raw: Arc<InMemoryEventStore>,
    store: Arc<dyn EventStore>,
    registry: AggregateRegistry,
    idempotency: IdempotencyConfig,
    metrics: Arc<PipelineMetrics>,
    waits: Arc<WaitCoordinator>,
    crashed: Crashed,
    sent: SentCommands,
    notifier: Arc<FaultyNotifier>,
}

/// The downstream side before its dispatcher exists: the consumers' state and the event bus
/// the nodes publish on, each flaky.
struct Downstream {
    redelivery: Arc<Redelivery>,
    balances: Arc<InMemoryProcessedMessages<Balances>>,
    outbox: Arc<InMemoryProcessedMessages<Outbox>>,
    order: HandledOrder,
    saga_reported: Arc<Mutex<Vec<CommandResult>>>,
    failures: Arc<InMemoryCompensationStore>,
    events: Arc<FaultyEventBus>,
}

/// The processing nodes with the in-flight registry they may share with the gateway.
struct Started {
    monolith: bool,
    in_flight: Option<Arc<InFlightRequests>>,
    nodes: Arc<Nodes>,
}

/// Builds and starts the whole pipeline of a run, in the order that makes a seed replay:
/// shared parts, the downstream side, the nodes, the gateway, then the dispatcher, which
/// starts consuming the event bus.
pub(crate) fn wire(config: SimConfig, chaos: &Arc<Chaos>) -> Pipeline {
    let shared = shared_parts(config, chaos);
    let (downstream, feed) = downstream_parts(chaos, shared.crashed.clone());
    let started = start_nodes(config, chaos, &shared, &downstream.events);
    let gateway = build_gateway(chaos, &shared, &started);
    let dispatcher = start_dispatcher(chaos, &shared, &gateway, &downstream, feed);
    Pipeline {
        clock: shared.clock,
        raw: shared.raw,
        store: shared.store,
        idempotency: shared.idempotency,
        waits: shared.waits,
        nodes: started.nodes,
        gateway,
        dispatcher,
        failures: downstream.failures,
        balances: downstream.balances,
        outbox: downstream.outbox,
        order: downstream.order,
        saga_reported: downstream.saga_reported,
        in_flight: started.in_flight,
        monolith: started.monolith,
    }
}

/// The store (faulty over the raw one, forgetting rejections under the mutation), the
/// registry, the idempotency settings, metrics, the wait coordinator and its faulty notifier.
fn shared_parts(config: SimConfig, chaos: &Arc<Chaos>) -> Shared {
    let clock = Arc::new(SimClock::new());
    let raw = Arc::new(InMemoryEventStore::new());
    let store: Arc<dyn EventStore> = Arc::new(FaultyEventStore::new(
        raw.clone(),
        chaos.clone(),
        config.forget_rejections,
    ));
    if config.forget_rejections {
        chaos.note("MUTATION: the store records no rejection".to_owned());
    }
    let mut registry = AggregateRegistry::new();
    if let Err(error) = registry.register::<Wallet>() {
        chaos.note(format!("registry: {error}"));
    }
    let idempotency = IdempotencyConfig {
        expected_insertions: 10_000,
        ..IdempotencyConfig::default()
    };
    let metrics = Arc::new(PipelineMetrics::default());
    let waits = WaitCoordinator::new();
    let crashed: Crashed = Arc::new(Mutex::new(BTreeSet::new()));
    let sent: SentCommands = Arc::new(Mutex::new(BTreeMap::new()));
    let notifier = Arc::new(FaultyNotifier::new(
        waits.clone(),
        chaos.clone(),
        crashed.clone(),
        sent.clone(),
    ));
    Shared {
        clock,
        raw,
        store,
        registry,
        idempotency,
        metrics,
        waits,
        crashed,
        sent,
        notifier,
    }
}

/// The projection's, outbox processor's and saga's state, the compensation store, and the
/// faulty event bus with the feed its dispatcher will consume.
fn downstream_parts(chaos: &Arc<Chaos>, crashed: Crashed) -> (Downstream, EventFeed) {
    let redelivery = Arc::new(Redelivery::new(chaos.clone()));
    let balances = Arc::new(InMemoryProcessedMessages::new(Balances::default()));
    let outbox = Arc::new(InMemoryProcessedMessages::new(Vec::new()));
    let saga_reported = Arc::new(Mutex::new(Vec::new()));
    // Every consumer failure is recorded for compensation, and every success moves the
    // consumer's position: the quiet phase catches up from the positions and retries the
    // records, as a restarted service does.
    let failures = Arc::new(InMemoryCompensationStore::new());
    let (event_bus, feed) = InMemoryDomainEventBus::channel(1);
    let events = Arc::new(FaultyEventBus::new(
        Arc::new(event_bus),
        chaos.clone(),
        crashed,
    ));
    let downstream = Downstream {
        redelivery,
        balances,
        outbox,
        order: HandledOrder::default(),
        saga_reported,
        failures,
        events,
    };
    (downstream, feed)
}

/// Draws whether the run is a monolith and starts the processing nodes. Half the runs: a
/// monolith, whose gateway asks the store on a Bloom hit and shares its in-flight registry
/// with the nodes (SPEC TO-1); half: a gateway-only service (SPEC RQ-3), whose Bloom hits
/// the processing node decides.
fn start_nodes(
    config: SimConfig,
    chaos: &Arc<Chaos>,
    shared: &Shared,
    events: &Arc<FaultyEventBus>,
) -> Started {
    let monolith = chaos.chance(0.5);
    let in_flight = monolith.then(|| Arc::new(InFlightRequests::new()));
    let nodes = Arc::new(Nodes::start(
        chaos.clone(),
        NodeParts {
            registry: shared.registry.clone(),
            store: shared.store.clone(),
            events: events.clone(),
            notifier: shared.notifier.clone(),
            clock: shared.clock.clone(),
            idempotency: shared.idempotency.clone(),
            metrics: shared.metrics.clone(),
            in_flight: in_flight.clone(),
        },
        config.nodes,
    ));
    events.set_nodes(&nodes);
    shared.notifier.set_nodes(&nodes);
    Started {
        monolith,
        in_flight,
        nodes,
    }
}

/// The gateway over the faulty command bus to the nodes, with its Bloom request-id checker
/// (asking the store on a hit in a monolith, asking no one otherwise).
fn build_gateway(chaos: &Arc<Chaos>, shared: &Shared, started: &Started) -> CommandGateway {
    let existence: Arc<dyn RequestIdExistenceChecker> = if started.monolith {
        chaos.note("monolith: the gateway asks the store on a Bloom hit".to_owned());
        Arc::new(EventStoreRequestIdExistenceChecker::new(
            shared.store.clone(),
        ))
    } else {
        chaos.note("gateway-only: the node decides Bloom hits".to_owned());
        Arc::new(NoopRequestIdExistenceChecker)
    };
    let gateway_checker = DefaultRequestIdChecker::new(
        Arc::new(BloomIdempotencyCheckerProvider::with_clock(
            shared.idempotency.clone(),
            shared.clock.clone(),
        )),
        existence,
    )
    .with_metrics(shared.metrics.clone());
    let mut gateway = CommandGateway::builder(
        shared.registry.clone(),
        Arc::new(FaultyCommandBus::new(
            started.nodes.clone(),
            chaos.clone(),
            shared.sent.clone(),
        )),
    )
    .request_id_checker(Arc::new(gateway_checker))
    .wait_coordinator(shared.waits.clone())
    .send_timeout(Duration::from_secs(1))
    .clock(shared.clock.clone())
    .metrics(shared.metrics.clone());
    if let Some(in_flight) = &started.in_flight {
        gateway = gateway.in_flight(in_flight.clone());
    }
    gateway.build()
}

/// The dispatcher of the flaky projection, outbox processor and saga, recording failures for
/// compensation; it is handed to the redelivery and starts consuming the event bus.
fn start_dispatcher(
    chaos: &Arc<Chaos>,
    shared: &Shared,
    gateway: &CommandGateway,
    downstream: &Downstream,
    feed: EventFeed,
) -> Arc<EventDispatcher> {
    let dispatcher = EventDispatcher::builder(shared.notifier.clone())
        .gateway(gateway)
        .compensation(downstream.failures.clone(), RETRY)
        // SPEC DS-5: a failed stream holds its aggregate's later ones back, for each consumer.
        .parked_streams(Arc::new(InMemoryParkedStreams::new()))
        .event_store(shared.raw.clone())
        .positions(Arc::new(InMemoryConsumerPositions::new()))
        .clock(shared.clock.clone())
        .projection(Arc::new(Flaky {
            inner: BalanceProjection {
                model: downstream.balances.clone(),
            },
            chaos: chaos.clone(),
            redelivery: downstream.redelivery.clone(),
            order: downstream.order.clone(),
        }))
        .event_processor(Arc::new(Flaky {
            inner: OutboxProcessor {
                outbox: downstream.outbox.clone(),
            },
            chaos: chaos.clone(),
            redelivery: downstream.redelivery.clone(),
            order: downstream.order.clone(),
        }))
        .saga(Arc::new(FlakySaga {
            inner: WalletSaga {
                chaos: chaos.clone(),
                reported: downstream.saga_reported.clone(),
            },
            chaos: chaos.clone(),
            redelivery: downstream.redelivery.clone(),
            order: downstream.order.clone(),
        }))
        .build();
    downstream.redelivery.set_dispatcher(&dispatcher);
    // Streams that overflow the bus are read back from the store without faults.
    feed.start(dispatcher.clone(), shared.raw.clone());
    dispatcher
}
