//! One run: the real pipeline wired from its parts with fault decorators in between, callers
//! with scripts drawn from the seed, a background of node restarts, TTL rotations,
//! rebalances and store outages, then quiet, catch-up and the checks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wow_core::eventsourcing::{InMemoryEventStore, RequestDecision, RequestLog};

use wow_core::{AggregateId, ErrorCode};

use crate::chaos::{Chaos, FaultKind, SimClock};
use crate::client::{Client, Intent, IntentRecord, SeenVersions, MAX_CONFLICT_RETRIES};
use crate::domain::{Amount, Open, Transfer, WalletCommand, REWARDS};
use crate::invariants::{check, read_history, IntentTally, Observed};
use crate::nodes::Nodes;
use crate::quiet::{bring_to_quiet, draw_saga_rerun};
pub use crate::sim_config::SimConfig;
use crate::wiring::{wire, Pipeline};

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
/// wallet that may not be open yet), on a few wallets. A share of the intents that are not
/// opens, drawn per run (none, a quarter, half or three quarters), pin the version their
/// caller last saw (SPEC ES-3).
fn scripts(chaos: &Chaos, config: SimConfig) -> Vec<Vec<Intent>> {
    let wallets = wallet_count(config) as u64;
    let pinned_quarters = chaos.range(0, 4);
    chaos.note(format!(
        "{pinned_quarters}/4 of the intents past an open are pinned"
    ));
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
                    let pinned = !matches!(command, WalletCommand::Open(_))
                        && chaos.range(0, 4) < pinned_quarters;
                    Intent {
                        pinned,
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

/// One run, as a sequence: wire the pipeline, run the callers against a background of
/// faults, bring the system to quiet, then check what it left behind.
async fn simulate(seed: u64, config: SimConfig, chaos: Arc<Chaos>) -> RunReport {
    let pipeline = wire(config, &chaos);
    let intents = run_callers(config, &chaos, &pipeline).await;
    let rerun_all = draw_saga_rerun(&chaos);
    let aggregates = aggregates(config);
    let mut violations = bring_to_quiet(&pipeline, &chaos, &aggregates, rerun_all).await;
    let (streams, tally) = judge(&pipeline, &chaos, &aggregates, &intents, &mut violations).await;
    pipeline.nodes.shutdown();
    RunReport {
        seed,
        faults: chaos.counts(),
        tally,
        streams,
        violations,
        trace: chaos.trace(),
    }
}

/// Runs the callers' scripts (drawn from the seed) concurrently through the gateway while
/// [`background_faults`] strikes, until every caller is done; every intent's record, in
/// caller order. A caller that panicked is noted in the trace.
async fn run_callers(
    config: SimConfig,
    chaos: &Arc<Chaos>,
    pipeline: &Pipeline,
) -> Vec<IntentRecord> {
    let scripts = scripts(chaos, config);
    // How many times the callers resend a pinned intent after conflicts (0: give up at the
    // first), drawn per run.
    let conflict_retries = chaos.range(0, MAX_CONFLICT_RETRIES + 1);
    chaos.note(format!(
        "callers resend a conflicted intent up to {conflict_retries} times"
    ));
    let conflict_retries = u32::try_from(conflict_retries).unwrap_or(u32::MAX);
    let done = Arc::new(AtomicBool::new(false));
    let background = tokio::spawn(background_faults(
        chaos.clone(),
        pipeline.nodes.clone(),
        pipeline.clock.clone(),
        pipeline.idempotency.ttl,
        done.clone(),
    ));
    let callers: Vec<_> = scripts
        .into_iter()
        .map(|script| {
            let client = Client {
                gateway: pipeline.gateway.clone(),
                store: pipeline.store.clone(),
                chaos: chaos.clone(),
                seen: Arc::new(SeenVersions::default()),
                conflict_retries,
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
    intents
}

/// Every wallet of a run: the callers' and the rewards wallet.
fn aggregates(config: SimConfig) -> Vec<AggregateId> {
    let mut aggregates: Vec<AggregateId> = (0..wallet_count(config))
        .map(|w| wallet_id(&format!("w{w}")))
        .collect();
    aggregates.push(wallet_id(REWARDS));
    aggregates
}

/// Reads what the quiet run left behind — history, the saga's reports, the store's
/// decisions, the consumers' state, the wait handles — and checks every invariant on it;
/// adds the violations to `violations` and returns the number of streams in history and how
/// the intents ended.
async fn judge(
    pipeline: &Pipeline,
    chaos: &Chaos,
    aggregates: &[AggregateId],
    intents: &[IntentRecord],
    violations: &mut Vec<String>,
) -> (usize, IntentTally) {
    let history = match read_history(pipeline.raw.as_ref(), aggregates).await {
        Ok(history) => history,
        Err(error) => {
            violations.push(error);
            BTreeMap::new()
        }
    };
    let streams = history.values().map(Vec::len).sum();
    let saga_reported = pipeline
        .saga_reported
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let rejections = recorded_rejections(pipeline.raw.as_ref(), intents, violations).await;
    let observed = Observed {
        history,
        intents,
        saga_reported: &saga_reported,
        balances: pipeline.balances.read(Clone::clone),
        outbox: pipeline.outbox.read(Clone::clone),
        handled_order: pipeline
            .order
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
        waiting: pipeline.waits.waiting(),
        rewards_wallet: REWARDS,
        log: chaos.logged(),
        rejections,
        in_flight: pipeline
            .in_flight
            .as_ref()
            .map_or(0, |in_flight| in_flight.len()),
        monolith: pipeline.monolith,
    };
    let (found, tally) = check(&observed);
    violations.extend(found);
    (streams, tally)
}

/// The decision the store holds on each caller's request (SPEC ID-6): the rejections, with
/// their codes, by (aggregate id, request id). A decision that cannot be read is a
/// violation (TO-1: no faults remain).
async fn recorded_rejections(
    raw: &InMemoryEventStore,
    intents: &[IntentRecord],
    violations: &mut Vec<String>,
) -> BTreeMap<(String, String), ErrorCode> {
    let mut rejections = BTreeMap::new();
    for record in intents {
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
    rejections
}
