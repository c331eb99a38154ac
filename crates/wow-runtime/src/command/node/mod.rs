//! The processing node's command handler: the request-id check against the node's own
//! store, the aggregate's decision, the append, and the `PROCESSED` signal.
//!
//! # Panics in the aggregate's code (SPEC PX-1)
//!
//! A panic or an arithmetic overflow in a team's handler or `apply` fails one command and
//! never the node, its bus partition or the process:
//!
//! - **Handler.** The command fails with `InternalServerError` at `PROCESSED`. Nothing is
//!   appended and no decision is recorded: a panic is a fault, not a business rejection, so a
//!   resend with the same request id runs the handler again. The aggregate's cached state is
//!   evicted; the next command loads it from history.
//! - **`apply` while loading** (snapshot + later streams). The aggregate is quarantined in the
//!   node's [`QuarantinedAggregates`], recorded for compensation under
//!   [`AGGREGATE_PROCESSOR`], and the command fails with `InternalServerError` and
//!   `result.quarantined`. Every later command to it is answered the same way at once,
//!   without loading its history again. A stream that does not replay at all
//!   (`CorruptHistory`) is treated alike: this code cannot apply that history either.
//! - **`apply` after an append.** History is the truth, and the append stands: the stream is
//!   published to the consumers as any other. The aggregate is quarantined (its state in
//!   memory is half-applied and dropped), and the command is answered with a *failure*
//!   (`InternalServerError`) that carries the appended version in `aggregateVersion`,
//!   `result.recorded: true` and `result.quarantined`, as a failed publication after an
//!   append does (SPEC ST-4). A success would tell the caller that the aggregate moved on
//!   cleanly while its next command is bound to fail; a failure without the version would
//!   hide that the intent took effect. A resend with the same request id is answered with
//!   the original stream (`DuplicateRequestId`, its version), and the look-up says
//!   `APPENDED`.
//!
//! Any other panic while a command is processed (a store, the bus) is caught around the
//! whole command: it fails with `InternalServerError`, saying that whether it was appended
//! is unknown and must be looked up by request id, and the cached state is evicted.

mod answers;
mod decide;
mod reads;
mod record;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use tracing::Instrument;

use crate::command::wait::signal_wanted;
use crate::command::{notify_signal, InFlightRequests, WaitNotifier};
use crate::eventsourcing::AggregateCache;
use crate::idempotency::RequestIdChecker;
use crate::metrics::PipelineMetrics;
use crate::trace_context;
use wow_core::aggregate::Services;
use wow_core::aggregate::{AggregateRegistry, QuarantinedAggregates};
use wow_core::command::{CommandHandler, JsonCommand};
use wow_core::command::{CommandResult, CommandStage};
use wow_core::compensation::CompensationStore;
use wow_core::compensation::RetrySpec;
use wow_core::deadline::DeadlineStore;
use wow_core::event::DomainEventBus;
use wow_core::eventsourcing::{EventStore, SnapshotStore};
use wow_core::id::{Clock, IdGenerator, SystemClock, UuidV7IdGenerator};
use wow_core::panic_message;
use wow_core::ErrorCode;

/// How often a command that pinned no version is re-decided after a version conflict.
pub const DEFAULT_CONFLICT_RETRIES: u32 = 3;

/// The `result` key of an answer about a quarantined aggregate (SPEC PX-1): an object with
/// the `version` that could not be applied, the `message` and `since` (milliseconds).
///
/// Its error code is `InternalServerError` (HTTP 500), not a code of its own: to a caller it
/// is a fault of the service, to be fixed by its operators, like any other 500; no resend
/// helps until then, and nothing was decided on the command, so a resend with the same
/// request id is safe afterwards. A new code would also reach older gateways and clients,
/// which read a code they do not know as a domain's business rule (a 422 and a final
/// decision), which this is not.
pub const QUARANTINED: &str = "quarantined";

/// Handles commands on a processing node (Wow's `DefaultCommandHandler`).
///
/// For each command: the node's own request-id check when it has a [`RequestIdChecker`]
/// (SPEC RQ-2, RQ-8), load the aggregate (cache, else snapshot + later events), the
/// existence and expected-version rules, the handler, the append, publication, and the
/// `PROCESSED` signal. A version conflict is never resolved by bumping the version (SPEC
/// ES-3): a command that pinned no version is re-decided on reloaded state a few times; one
/// that pinned a version fails.
#[derive(Debug)]
pub struct DefaultCommandHandler {
    registry: AggregateRegistry,
    store: Arc<dyn EventStore>,
    snapshots: Option<Arc<dyn SnapshotStore>>,
    checker: Option<Arc<dyn RequestIdChecker>>,
    events: Arc<dyn DomainEventBus>,
    notifier: Arc<dyn WaitNotifier>,
    cache: AggregateCache,
    metrics: Arc<PipelineMetrics>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    /// Whether `ids` also names the events (set by [`DefaultCommandHandlerBuilder::id_generator`]).
    ids_name_events: bool,
    conflict_retries: u32,
    in_flight: Option<Arc<InFlightRequests>>,
    quarantine: QuarantinedAggregates,
    compensation: Option<(Arc<dyn CompensationStore>, RetrySpec)>,
    services: Services,
    decision_budget: Duration,
    deadlines: Option<Arc<dyn DeadlineStore>>,
    deadlines_scheduled: Option<Arc<tokio::sync::Notify>>,
}

/// How long a decision may take by default, service calls included (SPEC DM-3).
pub const DEFAULT_DECISION_BUDGET: Duration = Duration::from_secs(10);

/// Builds a [`DefaultCommandHandler`].
#[derive(Debug)]
pub struct DefaultCommandHandlerBuilder {
    inner: DefaultCommandHandler,
}

impl DefaultCommandHandlerBuilder {
    /// Runs `checker` before every handler (SPEC RQ-2). Without one, the append is the only
    /// duplicate check (SPEC RQ-8).
    pub fn request_id_checker(mut self, checker: Arc<dyn RequestIdChecker>) -> Self {
        self.inner.checker = Some(checker);
        self
    }

    /// Loads aggregates from snapshots in `store` before replaying later events.
    pub fn snapshot_store(mut self, store: Arc<dyn SnapshotStore>) -> Self {
        self.inner.snapshots = Some(store);
        self
    }

    /// Keeps about `capacity` hot aggregates in memory. Default 100,000; 0 turns it off.
    pub fn cache_capacity(mut self, capacity: usize) -> Self {
        self.inner.cache = AggregateCache::new(capacity);
        self
    }

    /// Keeps its hot aggregates in `cache`, shared with whoever holds a clone of it (to
    /// evict what the node must no longer trust). Replaces [`cache_capacity`](Self::cache_capacity).
    pub fn cache(mut self, cache: AggregateCache) -> Self {
        self.inner.cache = cache;
        self
    }

    /// Re-decides a conflicting command that pinned no version up to `retries` times.
    /// Default 3.
    pub fn conflict_retries(mut self, retries: u32) -> Self {
        self.inner.conflict_retries = retries;
        self
    }

    /// Counts into `metrics`.
    pub fn metrics(mut self, metrics: Arc<PipelineMetrics>) -> Self {
        self.inner.metrics = metrics;
        self
    }

    /// Leaves each command's request in `in_flight` once it is decided: the registry the
    /// gateway in front of this node entered it in (SPEC TO-1).
    pub fn in_flight(mut self, in_flight: Arc<InFlightRequests>) -> Self {
        self.inner.in_flight = Some(in_flight);
        self
    }

    /// Reads time from `clock`.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.inner.clock = clock;
        self
    }

    /// Makes the ids of streams and of their events with `ids` (for example a seeded
    /// generator, so that a simulation replays exactly). By default streams get UUIDv7 ids
    /// and events keep the ones the aggregate runtime gave them.
    pub fn id_generator(mut self, ids: Arc<dyn IdGenerator>) -> Self {
        self.inner.ids = ids;
        self.inner.ids_name_events = true;
        self
    }

    /// Quarantines aggregates whose history cannot be applied in `quarantine` (SPEC PX-1), a
    /// registry others can read (health, metrics). Default: a registry of the node's own.
    pub fn quarantine(mut self, quarantine: QuarantinedAggregates) -> Self {
        self.inner.quarantine = quarantine;
        self
    }

    /// Records every quarantine in `store` as a failed execution of [`AGGREGATE_PROCESSOR`](wow_core::compensation::AGGREGATE_PROCESSOR),
    /// retried as `retry` says. Default: not recorded (only logged and kept in the registry).
    pub fn compensation(mut self, store: Arc<dyn CompensationStore>, retry: RetrySpec) -> Self {
        self.inner.compensation = Some((store, retry));
        self
    }

    /// Hands `services` to every handler (SPEC DM-3; see
    /// [`Aggregate::decide`](wow_core::aggregate::Aggregate::decide)). Default: none.
    pub fn services(mut self, services: Services) -> Self {
        self.inner.services = services;
        self
    }

    /// How long one decision may take, its service calls included: a call still running
    /// then fails as `ServiceFailed`. Default [`DEFAULT_DECISION_BUDGET`].
    pub fn decision_budget(mut self, budget: Duration) -> Self {
        self.inner.decision_budget = budget;
        self
    }

    /// Refuses a command a deadline fired (it carries
    /// [`DEADLINE_HEADER`](crate::deadline::DEADLINE_HEADER)) whose schedule is no longer
    /// `deadlines`' pending row, because a later event moved or cancelled it (SPEC DM-6):
    /// `DeadlineNotPending`, recorded as the decision. Default: not checked.
    pub fn deadlines(mut self, deadlines: Arc<dyn DeadlineStore>) -> Self {
        self.inner.deadlines = Some(deadlines);
        self
    }

    /// Tells `signal` each time an appended decision schedules a deadline, so a deadline
    /// scheduler woken by it looks at the store then. Default: no one is told.
    pub fn deadlines_scheduled(mut self, signal: Arc<tokio::sync::Notify>) -> Self {
        self.inner.deadlines_scheduled = Some(signal);
        self
    }

    /// The handler.
    pub fn build(self) -> DefaultCommandHandler {
        self.inner
    }
}

/// What one attempt at a command came to.
enum Attempt {
    Finished(Box<CommandResult>),
    Retry,
}

impl From<CommandResult> for Attempt {
    fn from(result: CommandResult) -> Self {
        Attempt::Finished(Box::new(result))
    }
}

impl DefaultCommandHandler {
    /// A builder for a handler of `registry`'s aggregates over `store`, publishing appended
    /// streams on `events` and signalling `notifier`.
    pub fn builder(
        registry: AggregateRegistry,
        store: Arc<dyn EventStore>,
        events: Arc<dyn DomainEventBus>,
        notifier: Arc<dyn WaitNotifier>,
    ) -> DefaultCommandHandlerBuilder {
        DefaultCommandHandlerBuilder {
            inner: DefaultCommandHandler {
                registry,
                store,
                snapshots: None,
                checker: None,
                events,
                notifier,
                cache: AggregateCache::default(),
                metrics: Arc::new(PipelineMetrics::default()),
                clock: Arc::new(SystemClock),
                ids: Arc::new(UuidV7IdGenerator),
                ids_name_events: false,
                conflict_retries: DEFAULT_CONFLICT_RETRIES,
                in_flight: None,
                quarantine: QuarantinedAggregates::new(),
                compensation: None,
                services: Services::new(),
                decision_budget: DEFAULT_DECISION_BUDGET,
                deadlines: None,
                deadlines_scheduled: None,
            },
        }
    }

    /// The aggregates this node quarantined (SPEC PX-1).
    pub fn quarantine(&self) -> &QuarantinedAggregates {
        &self.quarantine
    }

    /// Runs `command` to its `PROCESSED` result (also signalled to the waiting caller).
    ///
    /// A command that names its aggregate by a former name
    /// ([`Aggregate::ALIASES`](wow_core::aggregate::Aggregate::ALIASES)), from a node of
    /// the previous release say, is processed under today's name.
    pub async fn process(&self, command: &JsonCommand) -> CommandResult {
        let mut today = None;
        if self
            .registry
            .is_former_name(&command.aggregate_id.aggregate_name)
        {
            let mut renamed = command.clone();
            self.registry.use_todays_name(&mut renamed.aggregate_id);
            today = Some(renamed);
        }
        let command = today.as_ref().unwrap_or(command);
        // Decided (durably) or failed without a decision, or panicked: no longer in flight,
        // and before the caller hears of it, so that its look-up right after the answer is
        // never IN_FLIGHT.
        let in_flight = LeaveOnDrop(self.in_flight.as_deref(), command);
        // SPEC OB-1: decided in the node's span, a child of the context the command carries.
        let result = self
            .decide_and_append(command)
            .instrument(trace_context::node_span(command))
            .await
            .stamped(self.clock.as_ref(), self.ids.as_ref());
        drop(in_flight);
        if signal_wanted(&command.header, CommandStage::Processed) {
            notify_signal(self.notifier.as_ref(), &command.header, result.clone());
        }
        result
    }
}

#[async_trait]
impl CommandHandler for DefaultCommandHandler {
    async fn handle(&self, mut command: JsonCommand) {
        // A node of the previous release may still send an aggregate's former name.
        self.registry.use_todays_name(&mut command.aggregate_id);
        if command.is_void() {
            // No aggregate handles a void command (SPEC RQ-12): the node logs it, at least
            // once (a resend the gateway let through is logged again). Nothing is recorded or
            // signalled beyond SENT.
            tracing::info!(
                aggregate = %command.aggregate_id,
                command = %command.name,
                request_id = %command.request_id,
                body = %command.body,
                "void command"
            );
            drop(LeaveOnDrop(self.in_flight.as_deref(), &command));
        } else if let Err(payload) = AssertUnwindSafe(self.process(&command))
            .catch_unwind()
            .await
        {
            // SPEC PX-1, the backstop: the aggregate's own code is guarded closer in; this
            // catches whatever else panicked (a store, a bus), so the partition goes on.
            let message = panic_message(payload.as_ref());
            tracing::error!(aggregate_id = %command.aggregate_id, command_id = %command.id, request_id = %command.request_id, panic = %message, "processing a command panicked");
            self.cache.evict(&command.aggregate_id);
            if signal_wanted(&command.header, CommandStage::Processed) {
                notify_signal(
                    self.notifier.as_ref(),
                    &command.header,
                    CommandResult::failure(
                        &command,
                        CommandStage::Processed,
                        ErrorCode::InternalServerError,
                        format!("processing the command panicked ({message}); whether it was appended is unknown: look it up by request id"),
                    )
                    .stamped(self.clock.as_ref(), self.ids.as_ref()),
                );
            }
        }
    }
}

/// Takes a command's request out of the node's in-flight registry when dropped, also when
/// processing unwinds from a panic: each handled message leaves exactly once.
struct LeaveOnDrop<'a>(Option<&'a InFlightRequests>, &'a JsonCommand);

impl Drop for LeaveOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(in_flight) = self.0 {
            in_flight.leave(&self.1.aggregate_id, &self.1.request_id);
        }
    }
}
