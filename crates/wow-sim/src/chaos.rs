//! The one seeded random source of a run, the faults it draws, the run's trace, and the
//! clock and ids the pipeline reads (all derived from the seed and virtual time).
//!
//! Every decision of a run is drawn here, in the order the single-threaded runtime reaches
//! it, so a seed replays the same run.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;
use wow_core::id::{Clock, IdGenerator};
use wow_core::ErrorCode;

/// A kind of fault the simulation injects; each is counted when it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// A command that fails validation (amount 0).
    Validation,
    /// The command bus refuses the send.
    SendRejected,
    /// The send hangs past the gateway's send timeout.
    SendTimeout,
    /// The bus delivered the command but its acknowledgement was lost.
    AckLost,
    /// The bus delivered the command twice.
    CommandRedelivered,
    /// The bus delivered a command that a node had rejected again, later (after other
    /// commands may have changed the state so that the handler would now accept it).
    RejectedRedelivered,
    /// The node crashed after the append, before publishing (and before `PROCESSED`).
    CrashAfterAppend,
    /// The node crashed after publishing, before the `PROCESSED` signal.
    CrashAfterPublish,
    /// A stage signal was lost.
    SignalLost,
    /// A stage signal arrived twice.
    SignalDuplicated,
    /// A processing node restarted (Bloom filters and cache lost).
    NodeRestart,
    /// The Bloom filters' clock jumped a TTL (one or two generations rotated out).
    TtlRotation,
    /// Aggregates moved to another processing node.
    Rebalance,
    /// The event bus delivered a stream twice.
    EventRedelivered,
    /// A consumer crashed after its write, before acknowledging (redelivered later).
    ConsumerCrashAfterWrite,
    /// A consumer was down (failed before writing; redelivered later).
    ConsumerDown,
    /// The saga ran again on a stream it had handled (a compensation retry, or a start-up
    /// catch-up from the beginning).
    SagaRerun,
    /// The event store was unreachable for a while.
    StoreOutage,
    /// One append failed before writing.
    StoreAppendFailed,
    /// One append was written but its answer was lost.
    StoreAppendAckLost,
    /// One rejection record failed before writing.
    RejectionWriteFailed,
    /// One rejection record was written but its answer was lost.
    RejectionWriteAckLost,
    /// One read failed.
    StoreReadFailed,
    /// A caller gave up waiting (its timeout expired).
    CallerTimeout,
    /// A caller sent the same request id twice at once.
    ConcurrentResend,
}

impl FaultKind {
    /// Every kind, in table order.
    pub const ALL: [FaultKind; 25] = [
        FaultKind::Validation,
        FaultKind::SendRejected,
        FaultKind::SendTimeout,
        FaultKind::AckLost,
        FaultKind::CommandRedelivered,
        FaultKind::RejectedRedelivered,
        FaultKind::CrashAfterAppend,
        FaultKind::CrashAfterPublish,
        FaultKind::SignalLost,
        FaultKind::SignalDuplicated,
        FaultKind::NodeRestart,
        FaultKind::TtlRotation,
        FaultKind::Rebalance,
        FaultKind::EventRedelivered,
        FaultKind::ConsumerCrashAfterWrite,
        FaultKind::ConsumerDown,
        FaultKind::SagaRerun,
        FaultKind::StoreOutage,
        FaultKind::StoreAppendFailed,
        FaultKind::StoreAppendAckLost,
        FaultKind::RejectionWriteFailed,
        FaultKind::RejectionWriteAckLost,
        FaultKind::StoreReadFailed,
        FaultKind::CallerTimeout,
        FaultKind::ConcurrentResend,
    ];
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// What the decision log holds about one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Logged {
    /// A stream of the request was appended (the write took effect, whatever its answer).
    Appended {
        /// The stream's version.
        version: u64,
        /// The command that appended it.
        command_id: String,
    },
    /// A node answered a message of the request with a final rejection (SPEC ID-6).
    Rejected {
        /// The rejection's code.
        code: ErrorCode,
        /// The message's command id.
        command_id: String,
        /// Whether the answer replayed a recorded decision.
        replayed: bool,
    },
    /// A caller's look-up answered `NONE` (no decision recorded, not in flight, SPEC TO-1).
    LookedUpNone {
        /// The command ids of the messages the caller had sent for the request by then.
        sent: Vec<String>,
    },
    /// A node answered a message of the request `CommandExpectVersionConflict` (SPEC ES-3):
    /// not a decision, nothing recorded.
    Conflict {
        /// The message's command id.
        command_id: String,
    },
    /// A caller gave up a pinned intent after version conflicts (SPEC ES-3): as far as it
    /// knows, nothing of it is recorded.
    GaveUpConflicted {
        /// The command ids of the messages the caller had sent for the request by then.
        sent: Vec<String>,
    },
}

/// One line of the decision log: the appends that took effect, the final rejections the
/// nodes answered, the look-ups that answered `NONE` and the pinned intents given up after
/// conflicts, in the order they happened.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LogEntry {
    /// The wallet.
    pub(crate) aggregate: String,
    /// The request id.
    pub(crate) request_id: String,
    /// What happened.
    pub(crate) what: Logged,
}

/// How likely each fault is in one run: drawn from the seed, so runs differ in what they
/// stress. A kind left out never happens.
#[derive(Debug, Clone)]
pub(crate) struct FaultProfile {
    rates: BTreeMap<FaultKind, f64>,
}

impl FaultProfile {
    fn draw(rng: &mut ChaCha8Rng) -> Self {
        let mut rates = BTreeMap::new();
        for kind in FaultKind::ALL {
            if rng.random_bool(0.75) {
                rates.insert(kind, rng.random_range(0.02..0.15));
            }
        }
        Self { rates }
    }

    fn rate(&self, kind: FaultKind) -> f64 {
        self.rates.get(&kind).copied().unwrap_or(0.0)
    }
}

/// The seeded source of every decision of one run, with its fault counts and trace.
#[derive(Debug)]
pub(crate) struct Chaos {
    rng: Mutex<ChaCha8Rng>,
    profile: FaultProfile,
    faults_on: AtomicBool,
    counts: Mutex<BTreeMap<FaultKind, u64>>,
    trace: Mutex<Vec<String>>,
    start: Instant,
    store_down_until: Mutex<Option<Instant>>,
    next_id: AtomicU64,
    aliases: Mutex<BTreeMap<String, String>>,
    log: Mutex<Vec<LogEntry>>,
    pending: AtomicUsize,
}

impl Chaos {
    /// A run's chaos from `seed`; must be made inside the run's runtime (it reads its time).
    pub(crate) fn new(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let profile = FaultProfile::draw(&mut rng);
        Self {
            rng: Mutex::new(rng),
            profile,
            faults_on: AtomicBool::new(true),
            counts: Mutex::new(BTreeMap::new()),
            trace: Mutex::new(Vec::new()),
            start: Instant::now(),
            store_down_until: Mutex::new(None),
            next_id: AtomicU64::new(0),
            aliases: Mutex::new(BTreeMap::new()),
            log: Mutex::new(Vec::new()),
            pending: AtomicUsize::new(0),
        }
    }

    /// Names `request_id` by `alias` in the trace: saga request ids derive from event ids,
    /// which are time-based UUIDs that differ between replays.
    pub(crate) fn alias(&self, request_id: String, alias: String) {
        self.aliases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(request_id, alias);
    }

    /// `request_id` as the trace shows it: its alias if it has one.
    pub(crate) fn show(&self, request_id: &str) -> String {
        self.aliases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(request_id)
            .cloned()
            .unwrap_or_else(|| request_id.to_owned())
    }

    /// Appends `what` about `request_id` of the wallet `aggregate` to the decision log.
    pub(crate) fn log(&self, aggregate: &str, request_id: &str, what: Logged) {
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(LogEntry {
                aggregate: aggregate.to_owned(),
                request_id: request_id.to_owned(),
                what,
            });
    }

    /// The decision log so far, in the order things happened.
    pub(crate) fn logged(&self) -> Vec<LogEntry> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Notes that a delayed delivery (a redelivery, a saga re-run) is scheduled.
    pub(crate) fn begin_pending(&self) {
        self.pending.fetch_add(1, Ordering::SeqCst);
    }

    /// Notes that a delayed delivery of [`Chaos::begin_pending`] has run.
    pub(crate) fn end_pending(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }

    /// Delayed deliveries scheduled and not yet run.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    fn rng(&self) -> std::sync::MutexGuard<'_, ChaCha8Rng> {
        self.rng.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Virtual milliseconds since the run started.
    pub(crate) fn elapsed_millis(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether faults may still happen (off once the run winds down to quiet).
    pub(crate) fn faults_on(&self) -> bool {
        self.faults_on.load(Ordering::SeqCst)
    }

    /// Stops every fault: the system may now become quiet.
    pub(crate) fn calm(&self) {
        self.faults_on.store(false, Ordering::SeqCst);
        *self
            .store_down_until
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
        self.note("faults off; winding down to quiet".to_owned());
    }

    /// Draws whether `kind` happens now; when it does, counts it and traces `detail`.
    pub(crate) fn inject(&self, kind: FaultKind, detail: impl FnOnce() -> String) -> bool {
        let rate = self.profile.rate(kind);
        if !self.faults_on() || rate <= 0.0 {
            return false;
        }
        if !self.rng().random_bool(rate) {
            return false;
        }
        self.record(kind, detail());
        true
    }

    /// Whether `kind` may happen in this run (its profile has it, and faults are on).
    pub(crate) fn enabled(&self, kind: FaultKind) -> bool {
        self.faults_on() && self.profile.rate(kind) > 0.0
    }

    /// Counts and traces a fault that happened (one drawn elsewhere).
    pub(crate) fn record(&self, kind: FaultKind, detail: String) {
        *self
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(kind)
            .or_default() += 1;
        self.note(format!("FAULT {kind}: {detail}"));
    }

    /// A draw in `low..high` (`low` when the range is empty).
    pub(crate) fn range(&self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        self.rng().random_range(low..high)
    }

    /// A plain coin with probability `p` (not a fault).
    pub(crate) fn chance(&self, p: f64) -> bool {
        self.rng().random_bool(p.clamp(0.0, 1.0))
    }

    /// Adds a line to the trace, stamped with virtual time.
    pub(crate) fn note(&self, line: String) {
        let stamp = self.elapsed_millis();
        self.trace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("{stamp:>7}ms {line}"));
    }

    /// The trace so far.
    pub(crate) fn trace(&self) -> Vec<String> {
        self.trace.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The faults injected so far, by kind.
    pub(crate) fn counts(&self) -> BTreeMap<FaultKind, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Takes the store down for `millis` of virtual time.
    pub(crate) fn store_down_for(&self, millis: u64) {
        *self
            .store_down_until
            .lock()
            .unwrap_or_else(|p| p.into_inner()) =
            Some(Instant::now() + std::time::Duration::from_millis(millis));
    }

    /// Whether the store is in an outage now.
    pub(crate) fn store_down(&self) -> bool {
        self.store_down_until
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|until| Instant::now() < until)
    }

    /// A fresh, deterministic id with `prefix` (`prefix-17`).
    pub(crate) fn next_id(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.next_id.fetch_add(1, Ordering::SeqCst))
    }
}

/// The wall clock the pipeline reads in a run: a fixed epoch plus virtual time plus the skew
/// the simulation adds to rotate Bloom filters.
#[derive(Debug)]
pub(crate) struct SimClock {
    start: Instant,
    skew: AtomicI64,
}

/// 2025-01-01T00:00:00Z: where every run's wall clock starts.
const EPOCH_MILLIS: i64 = 1_735_689_600_000;

impl SimClock {
    /// A clock at the epoch now; must be made inside the run's runtime.
    pub(crate) fn new() -> Self {
        Self {
            start: Instant::now(),
            skew: AtomicI64::new(0),
        }
    }

    /// Jumps the clock forward by `millis`.
    pub(crate) fn jump(&self, millis: i64) {
        self.skew.fetch_add(millis, Ordering::SeqCst);
    }
}

impl Clock for SimClock {
    fn now_millis(&self) -> i64 {
        let elapsed = i64::try_from(self.start.elapsed().as_millis()).unwrap_or(i64::MAX);
        EPOCH_MILLIS + elapsed + self.skew.load(Ordering::SeqCst)
    }
}

/// Stream ids from the run's counter, so traces and stores replay the same.
#[derive(Debug)]
pub(crate) struct SimIds(pub(crate) std::sync::Arc<Chaos>);

impl IdGenerator for SimIds {
    fn next_id(&self) -> String {
        self.0.next_id("stream")
    }
}
