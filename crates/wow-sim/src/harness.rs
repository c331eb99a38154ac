//! One run: the real pipeline wired from its parts with fault decorators in between, callers
//! with scripts drawn from the seed, a background of node restarts, TTL rotations,
//! rebalances and store outages, then quiet, catch-up and the checks.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wow_core::aggregate::AggregateRegistry;
use wow_core::command::{CommandGateway, InFlightRequests, WaitCoordinator};
use wow_core::compensation::{
    CompensationScheduler, CompensationStore, ExecutionFailedStatus, FailureQuery,
    InMemoryCompensationStore, RetrySpec,
};
use wow_core::event::{
    catch_up, EventDispatcher, InMemoryConsumerPositions, InMemoryDomainEventBus,
    InMemoryProcessedMessages,
};
use wow_core::eventsourcing::{EventStore, InMemoryEventStore, RequestDecision};
use wow_core::idempotency::{
    BloomIdempotencyCheckerProvider, DefaultRequestIdChecker, EventStoreRequestIdExistenceChecker,
    IdempotencyConfig, NoopRequestIdExistenceChecker, RequestIdExistenceChecker,
};
use wow_core::metrics::PipelineMetrics;
use wow_core::{AggregateId, NamedAggregate};

use crate::chaos::{Chaos, FaultKind, SimClock};
use crate::client::{Client, Intent};
use crate::consumers::{
    BalanceProjection, Balances, Flaky, FlakySaga, OutboxProcessor, Redelivery, WalletSaga, SAGA,
};
use crate::domain::{Amount, Open, Transfer, Wallet, WalletCommand, REWARDS};
use crate::invariants::{check, read_history, IntentTally, Observed};
use crate::nodes::{
    FaultyCommandBus, FaultyEventBus, FaultyNotifier, NodeParts, Nodes, SentCommands,
};
use crate::store::FaultyEventStore;

/// The size of a run. Small on purpose: many short runs find more than a few long ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// Concurrent callers.
    pub clients: usize,
    /// Intents per caller.
    pub intents_per_client: usize,
    /// Wallets the callers use (besides the rewards wallet the saga credits); at least 2
    /// are used, since a transfer needs two.
    pub wallets: usize,
    /// Processing nodes.
    pub nodes: usize,
    /// The mutation of the mutation test: the store answers `Ok` to every rejection record
    /// and records nothing (SPEC ID-6 switched off). The campaign must then find violations;
    /// `false` in every real run.
    pub forget_rejections: bool,
}

impl Default for SimConfig {
    /// 3 callers × 8 intents over 3 wallets and 2 nodes, the store intact.
    fn default() -> Self {
        Self {
            clients: 3,
            intents_per_client: 8,
            wallets: 3,
            nodes: 2,
            forget_rejections: false,
        }
    }
}

/// What one run did and whether it held.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The seed that replays it.
    pub seed: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<FaultKind, u64>,
    /// How the callers' intents ended.
    pub tally: IntentTally,
    /// Streams in history at the end.
    pub streams: usize,
    /// Every invariant broken; empty when the run held.
    pub violations: Vec<String>,
    /// The run's steps and faults, in virtual time.
    pub trace: Vec<String>,
}

impl RunReport {
    /// Whether every invariant held.
    pub fn held(&self) -> bool {
        self.violations.is_empty()
    }

    /// The seed, the violations and the whole trace, for a failure message.
    pub fn explain(&self) -> String {
        let mut text = format!(
            "seed {} broke {} invariant(s) (replay: WOW_SIM_SEED={} cargo test -p wow-sim):\n",
            self.seed,
            self.violations.len(),
            self.seed
        );
        for violation in &self.violations {
            text.push_str(&format!("  - {violation}\n"));
        }
        text.push_str("trace:\n");
        for line in &self.trace {
            text.push_str(&format!("  {line}\n"));
        }
        text
    }
}

/// How much virtual time one run may take before it counts as a runaway.
const RUN_LIMIT: Duration = Duration::from_secs(6 * 3600);

/// Runs seed `seed` with `config` on a fresh single-threaded runtime whose time is virtual,
/// so the same seed replays the same run.
pub fn run_seed(seed: u64, config: SimConfig) -> RunReport {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(async {
            let chaos = Arc::new(Chaos::new(seed));
            match tokio::time::timeout(RUN_LIMIT, simulate(seed, config, chaos.clone())).await {
                Ok(report) => report,
                Err(_) => RunReport {
                    seed,
                    faults: chaos.counts(),
                    tally: IntentTally::default(),
                    streams: 0,
                    violations: vec![format!(
                        "the run did not go quiet within {RUN_LIMIT:?} of virtual time"
                    )],
                    trace: chaos.trace(),
                },
            }
        }),
        Err(error) => RunReport {
            seed,
            faults: BTreeMap::new(),
            tally: IntentTally::default(),
            streams: 0,
            violations: vec![format!("no runtime: {error}")],
            trace: Vec::new(),
        },
    }
}

/// The callers' wallets of a run: `w0..w<n>`.
fn wallet_count(config: SimConfig) -> usize {
    config.wallets.max(2)
}

fn wallet_id(name: &str) -> AggregateId {
    AggregateId::new("sim", "wallet", name, "t1")
}

/// The callers' scripts: opens, deposits (some invalid), withdrawals and transfers (to a
/// wallet that may not be open yet), on a few wallets.
fn scripts(chaos: &Chaos, config: SimConfig) -> Vec<Vec<Intent>> {
    let wallets = wallet_count(config) as u64;
    (0..config.clients)
        .map(|client| {
            (0..config.intents_per_client)
                .map(|n| {
                    let from = chaos.range(0, wallets);
                    let wallet = format!("w{from}");
                    let label = format!("c{client}#{n}");
                    let command = match chaos.range(0, 10) {
                        0 | 1 => WalletCommand::Open(Open {
                            initial: chaos.range(0, 100),
                        }),
                        2..=4 => {
                            let invalid = chaos
                                .inject(FaultKind::Validation, || format!("{label} deposits 0"));
                            let amount = if invalid { 0 } else { chaos.range(1, 100) };
                            WalletCommand::Deposit(Amount { amount })
                        }
                        5 | 6 => WalletCommand::Withdraw(Amount {
                            amount: chaos.range(1, 80),
                        }),
                        _ => WalletCommand::Transfer(Transfer {
                            to: format!("w{}", (from + chaos.range(1, wallets)) % wallets),
                            amount: chaos.range(1, 60),
                        }),
                    };
                    Intent {
                        request_id: format!("req-{label}"),
                        label,
                        aggregate: wallet_id(&wallet),
                        command,
                    }
                })
                .collect()
        })
        .collect()
}

/// Restarts, TTL rotations, rebalances and outages at random times until `done`.
async fn background_faults(
    chaos: Arc<Chaos>,
    nodes: Arc<Nodes>,
    clocks: Arc<SimClock>,
    ttl: Duration,
    done: Arc<AtomicBool>,
) {
    while !done.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(chaos.range(20, 250))).await;
        if chaos.inject(FaultKind::NodeRestart, || {
            "a processing node restarts".to_owned()
        }) {
            nodes.restart(chaos.range(0, nodes.len() as u64) as usize);
        }
        if chaos.inject(FaultKind::TtlRotation, || "Bloom clock jumps".to_owned()) {
            let generations = chaos.range(1, 3) as i64;
            let millis = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
            chaos.note(format!("  by {generations} TTL(s)"));
            clocks.jump(millis.saturating_mul(generations) + 1);
        }
        if chaos.inject(FaultKind::Rebalance, || {
            "aggregates move to the next node".to_owned()
        }) {
            nodes.rebalance();
        }
        if !chaos.store_down() {
            let length = chaos.range(50, 1500);
            if chaos.inject(FaultKind::StoreOutage, || {
                format!("store down for {length}ms")
            }) {
                chaos.store_down_for(length);
            }
        }
    }
}

async fn simulate(seed: u64, config: SimConfig, chaos: Arc<Chaos>) -> RunReport {
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
    let crashed = Arc::new(Mutex::new(BTreeSet::new()));
    let sent: SentCommands = Arc::new(Mutex::new(BTreeMap::new()));
    let notifier = Arc::new(FaultyNotifier::new(
        waits.clone(),
        chaos.clone(),
        crashed.clone(),
        sent.clone(),
    ));

    // Downstream: projection, outbox processor, saga, each flaky.
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

    // Processing nodes and the gateway. Half the runs: a monolith, whose gateway asks the
    // store on a Bloom hit and shares its in-flight registry with the nodes (SPEC TO-1);
    // half: a gateway-only service (SPEC RQ-3), whose Bloom hits the processing node decides.
    let monolith = chaos.chance(0.5);
    let in_flight = monolith.then(|| Arc::new(InFlightRequests::new()));
    let nodes = Arc::new(Nodes::start(
        chaos.clone(),
        NodeParts {
            registry: registry.clone(),
            store: store.clone(),
            events: events.clone(),
            notifier: notifier.clone(),
            clock: clock.clone(),
            idempotency: idempotency.clone(),
            metrics: metrics.clone(),
            in_flight: in_flight.clone(),
        },
        config.nodes,
    ));
    events.set_nodes(&nodes);
    notifier.set_nodes(&nodes);
    let existence: Arc<dyn RequestIdExistenceChecker> = if monolith {
        chaos.note("monolith: the gateway asks the store on a Bloom hit".to_owned());
        Arc::new(EventStoreRequestIdExistenceChecker::new(store.clone()))
    } else {
        chaos.note("gateway-only: the node decides Bloom hits".to_owned());
        Arc::new(NoopRequestIdExistenceChecker)
    };
    let gateway_checker = DefaultRequestIdChecker::new(
        Arc::new(BloomIdempotencyCheckerProvider::with_clock(
            idempotency.clone(),
            clock.clone(),
        )),
        existence,
    )
    .with_metrics(metrics.clone());
    let mut gateway = CommandGateway::builder(
        registry,
        Arc::new(FaultyCommandBus::new(nodes.clone(), chaos.clone(), sent)),
    )
    .request_id_checker(Arc::new(gateway_checker))
    .wait_coordinator(waits.clone())
    .send_timeout(Duration::from_secs(1))
    .metrics(metrics);
    if let Some(in_flight) = &in_flight {
        gateway = gateway.in_flight(in_flight.clone());
    }
    let gateway = gateway.build();
    let dispatcher = EventDispatcher::builder(notifier.clone())
        .gateway(&gateway)
        .compensation(failures.clone(), RETRY)
        .positions(Arc::new(InMemoryConsumerPositions::new()))
        .clock(clock.clone())
        .projection(Arc::new(Flaky {
            inner: BalanceProjection {
                model: balances.clone(),
            },
            chaos: chaos.clone(),
            redelivery: redelivery.clone(),
        }))
        .event_processor(Arc::new(Flaky {
            inner: OutboxProcessor {
                outbox: outbox.clone(),
            },
            chaos: chaos.clone(),
            redelivery: redelivery.clone(),
        }))
        .saga(Arc::new(FlakySaga {
            inner: WalletSaga {
                chaos: chaos.clone(),
                reported: saga_reported.clone(),
            },
            chaos: chaos.clone(),
            redelivery: redelivery.clone(),
        }))
        .build();
    redelivery.set_dispatcher(&dispatcher);
    feed.start(dispatcher.clone());

    // The run.
    let scripts = scripts(&chaos, config);
    let done = Arc::new(AtomicBool::new(false));
    let background = tokio::spawn(background_faults(
        chaos.clone(),
        nodes.clone(),
        clock.clone(),
        idempotency.ttl,
        done.clone(),
    ));
    let callers: Vec<_> = scripts
        .into_iter()
        .map(|script| {
            let client = Client {
                gateway: gateway.clone(),
                store: store.clone(),
                chaos: chaos.clone(),
            };
            tokio::spawn(client.run(script))
        })
        .collect();
    let mut intents = Vec::new();
    for caller in callers {
        match caller.await {
            Ok(records) => intents.extend(records),
            Err(error) => chaos.note(format!("a caller panicked: {error}")),
        }
    }
    done.store(true, Ordering::SeqCst);
    let _ = background.await;
    // Some runs restart the saga's service with its positions lost: it catches up from the
    // start of history, after every wallet the callers open is open.
    // Half the runs that re-run sagas do this once.
    let rerun_all = chaos.enabled(FaultKind::SagaRerun) && chaos.chance(0.5);
    if rerun_all {
        chaos.record(
            FaultKind::SagaRerun,
            "the saga catches up from the start of history once quiet".to_owned(),
        );
    }

    // Quiet: faults off, everything in flight lands, then consumers catch up from the store.
    chaos.calm();
    let mut aggregates: Vec<AggregateId> = (0..wallet_count(config))
        .map(|w| wallet_id(&format!("w{w}")))
        .collect();
    aggregates.push(wallet_id(REWARDS));
    let mut violations = Vec::new();
    let mut last_count = usize::MAX;
    let named = [NamedAggregate::new("sim", "wallet")];
    let scheduler = CompensationScheduler::new(dispatcher.clone(), raw.clone());
    for round in 0..8 {
        wait_quiet(&chaos).await;
        let history = match read_history(raw.as_ref(), &aggregates).await {
            Ok(history) => history,
            Err(error) => {
                violations.push(error);
                break;
            }
        };
        if round == 0 && rerun_all {
            rerun_saga_over(&dispatcher, &history).await;
        }
        let count: usize = history.values().map(Vec::len).sum();
        let mut handled = 0;
        for consumer in dispatcher.consumer_names() {
            match catch_up(&dispatcher, &consumer, raw.as_ref(), &named, &mut |_| {}).await {
                Ok(done) => handled += done.streams_handled,
                Err(error) => violations.push(format!("catch-up of {consumer} failed: {error}")),
            }
        }
        let before = violations.len();
        let retried = match &scheduler {
            Ok(scheduler) => retry_until_settled(scheduler, &failures, &mut violations).await,
            Err(error) => {
                violations.push(format!("no compensation scheduler: {error}"));
                0
            }
        };
        chaos.note(format!(
            "catch-up round {round}: {count} streams, {handled} caught up, {retried} retried"
        ));
        if violations.len() > before {
            // Compensation cannot settle: more rounds would only repeat it.
            break;
        }
        if count == last_count && handled == 0 && retried == 0 {
            break;
        }
        last_count = count;
    }
    let open = failures
        .list(&FailureQuery {
            limit: usize::MAX,
            ..FailureQuery::default()
        })
        .await
        .map(|records| {
            records
                .into_iter()
                .filter(|record| record.status != ExecutionFailedStatus::Succeeded)
                .map(|record| {
                    format!(
                        "{}@v{} by {}",
                        record.aggregate_id.id, record.version, record.consumer
                    )
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    if !open.is_empty() {
        violations.push(format!(
            "compensation records left open once quiet: {open:?}"
        ));
    }
    wait_quiet(&chaos).await;

    // The checks.
    let history = match read_history(raw.as_ref(), &aggregates).await {
        Ok(history) => history,
        Err(error) => {
            violations.push(error);
            BTreeMap::new()
        }
    };
    let streams = history.values().map(Vec::len).sum();
    let saga_reported = saga_reported
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    // The decision the store holds on each caller's request (SPEC ID-6).
    let mut rejections = BTreeMap::new();
    for record in &intents {
        let intent = &record.intent;
        match raw
            .find_decision(&intent.aggregate, &intent.request_id)
            .await
        {
            Ok(Some(RequestDecision::Rejected(rejection))) => {
                rejections.insert(
                    (intent.aggregate.id.clone(), intent.request_id.clone()),
                    rejection.error_code,
                );
            }
            Ok(_) => {}
            Err(error) => violations.push(format!(
                "TO-1: the decision on {} is unreadable without faults: {error}",
                intent.label
            )),
        }
    }
    let observed = Observed {
        history,
        intents: &intents,
        saga_reported: &saga_reported,
        balances: balances.read(Clone::clone),
        outbox: outbox.read(Clone::clone),
        waiting: waits.waiting(),
        rewards_wallet: REWARDS,
        log: chaos.logged(),
        rejections,
        in_flight: in_flight.as_ref().map_or(0, |in_flight| in_flight.len()),
        monolith,
    };
    let (found, tally) = check(&observed);
    violations.extend(found);
    nodes.shutdown();
    RunReport {
        seed,
        faults: chaos.counts(),
        tally,
        streams,
        violations,
        trace: chaos.trace(),
    }
}

/// Retries of failed consumers in the quiet phase: fast, and never exhausted.
const RETRY: RetrySpec = RetrySpec {
    max_attempts: 1_000,
    initial_backoff_ms: 100,
    max_backoff_ms: 1_000,
};

/// Runs the compensation scheduler in virtual time until no record is `FAILED`; the number
/// of records retried.
async fn retry_until_settled(
    scheduler: &CompensationScheduler,
    failures: &InMemoryCompensationStore,
    violations: &mut Vec<String>,
) -> usize {
    let mut retried = 0;
    for _ in 0..100 {
        let failed = FailureQuery {
            status: Some(ExecutionFailedStatus::Failed),
            limit: 1,
            ..FailureQuery::default()
        };
        match failures.list(&failed).await {
            Ok(records) if records.is_empty() => return retried,
            Ok(_) => {}
            Err(error) => {
                violations.push(format!("compensation records unreadable: {error}"));
                return retried;
            }
        }
        tokio::time::sleep(Duration::from_millis(RETRY.max_backoff_ms)).await;
        match scheduler.run_due(1_000).await {
            Ok(pass) => retried += pass.retried,
            Err(error) => {
                violations.push(format!("a compensation pass failed: {error}"));
                return retried;
            }
        }
    }
    violations.push("compensation did not settle in 100 passes".to_owned());
    retried
}

/// Lets virtual time run until nothing is in flight: every wait (30 s at most), send,
/// redelivery and saga re-run has ended.
async fn wait_quiet(chaos: &Chaos) {
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(60)).await;
        if chaos.pending() == 0 {
            return;
        }
    }
}

/// Runs the saga again on every stream of `history`, in order, as a saga service that lost
/// its positions does when it starts (the saga's failures are recorded for compensation).
async fn rerun_saga_over(
    dispatcher: &EventDispatcher,
    history: &BTreeMap<String, Vec<wow_core::DomainEventStream>>,
) {
    let Some(saga) = dispatcher.consumer(SAGA) else {
        return;
    };
    for stream in history.values().flatten() {
        let _ = dispatcher.run_consumer(&saga, stream).await;
    }
}
