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

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt;
use serde_json::json;

use crate::contracts::command::{CommandHandler, JsonCommand};
use crate::contracts::compensation::RetrySpec;
use crate::contracts::compensation::{CompensationStore, FailedExecution, AGGREGATE_PROCESSOR};
use crate::contracts::event::{ConsumerError, DomainEventBus};
use crate::contracts::eventsourcing::{EventStore, EventStoreError, SnapshotStore};
use crate::model::aggregate::{check_command, AggregateError, AggregateState, CommandContext};
use crate::model::aggregate_id::AggregateId;
use crate::model::command::decided_result;
use crate::model::command::CommandStage as Stage;
use crate::model::command::{CommandResult, CommandStage};
use crate::model::error_code::ErrorCode;
use crate::model::event::DomainEventStream;
use crate::model::eventsourcing::{is_recorded_rejection, RejectionRecord};
use crate::model::id::{Clock, IdGenerator, SystemClock, UuidV7IdGenerator};
use crate::model::panic::panic_message;
use crate::runtime::aggregate::{
    AggregateRegistry, AggregateRuntime, QuarantinedAggregate, QuarantinedAggregates,
};
use crate::runtime::command::wait::{signal_wanted, PROTOCOL_HEADER, PROTOCOL_VERSION, RECORDED};
use crate::runtime::command::{InFlightRequests, WaitNotifier};
use crate::runtime::eventsourcing::{load_aggregate, AggregateCache, LoadError};
use crate::runtime::idempotency::{RequestIdCheck, RequestIdChecker};
use crate::runtime::metrics::PipelineMetrics;

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
}

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

    /// Records every quarantine in `store` as a failed execution of [`AGGREGATE_PROCESSOR`],
    /// retried as `retry` says. Default: not recorded (only logged and kept in the registry).
    pub fn compensation(mut self, store: Arc<dyn CompensationStore>, retry: RetrySpec) -> Self {
        self.inner.compensation = Some((store, retry));
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
                cache: AggregateCache::new(100_000),
                metrics: Arc::new(PipelineMetrics::default()),
                clock: Arc::new(SystemClock),
                ids: Arc::new(UuidV7IdGenerator),
                ids_name_events: false,
                conflict_retries: DEFAULT_CONFLICT_RETRIES,
                in_flight: None,
                quarantine: QuarantinedAggregates::new(),
                compensation: None,
            },
        }
    }

    /// The aggregates this node quarantined (SPEC PX-1).
    pub fn quarantine(&self) -> &QuarantinedAggregates {
        &self.quarantine
    }

    /// Runs `command` to its `PROCESSED` result (also signalled to the waiting caller).
    pub async fn process(&self, command: &JsonCommand) -> CommandResult {
        let result = self.decide_and_append(command).await;
        if signal_wanted(&command.header, CommandStage::Processed) {
            self.notifier.notify(result.clone());
        }
        result
    }

    async fn decide_and_append(&self, command: &JsonCommand) -> CommandResult {
        let fail = |code: ErrorCode, message: String| {
            CommandResult::failure(command, CommandStage::Processed, code, message)
        };
        let protocol = command
            .header
            .get(PROTOCOL_HEADER)
            .map_or(Ok(0), |v| v.parse::<u32>());
        if !matches!(protocol, Ok(version) if version <= PROTOCOL_VERSION) {
            return fail(
                ErrorCode::IllegalState,
                format!(
                    "the command speaks wire protocol {:?}; this node speaks up to {PROTOCOL_VERSION}: upgrade processing nodes before gateways",
                    command.header.get(PROTOCOL_HEADER)
                ),
            );
        }
        let Some(runtime) = self
            .registry
            .get(&command.aggregate_id.aggregate_name)
            .cloned()
        else {
            return fail(
                ErrorCode::NotFound,
                format!(
                    "no aggregate named `{}`",
                    command.aggregate_id.aggregate_name
                ),
            );
        };
        let decoded = match runtime.decode_command(&command.name, &command.body) {
            Ok(decoded) => decoded,
            Err(error) => {
                return fail(error.error_code(), error.to_string())
                    .with_binding_errors(error.binding_errors())
            }
        };
        let fingerprint = command.json_fingerprint();
        if let Some(checker) = &self.checker {
            let check = checker
                .check(&command.aggregate_id, &command.request_id)
                .await;
            if let RequestIdCheck::Decided(decision) = check {
                return decided_result(command, CommandStage::Processed, &fingerprint, &decision);
            }
        }
        for _ in 0..=self.conflict_retries {
            match self
                .attempt(runtime.as_ref(), command, &decoded, &fingerprint)
                .await
            {
                Attempt::Finished(result) => return *result,
                Attempt::Retry => continue,
            }
        }
        fail(
            ErrorCode::EventVersionConflict,
            format!(
                "aggregate {} kept changing under the command; gave up after {} retries",
                command.aggregate_id, self.conflict_retries
            ),
        )
    }

    async fn attempt(
        &self,
        runtime: &dyn AggregateRuntime,
        command: &JsonCommand,
        decoded: &crate::runtime::aggregate::DecodedCommand,
        fingerprint: &str,
    ) -> Attempt {
        let fail = |code: ErrorCode, message: String| {
            Attempt::from(CommandResult::failure(
                command,
                CommandStage::Processed,
                code,
                message,
            ))
        };
        let aggregate_id = &command.aggregate_id;
        if let Some(quarantined) = self.quarantine.get(aggregate_id) {
            // SPEC PX-1: answered at once; loading a history known not to apply again for
            // every command is the loop the clause forbids.
            return Attempt::from(quarantined_result(command, &quarantined));
        }
        let (mut state, cached) = match self.load(runtime, aggregate_id).await {
            Ok(loaded) => loaded,
            Err(error) => {
                if let LoadError::Aggregate(failed) = &error {
                    if let Some((owner, version, message)) = failed.unappliable_history() {
                        let quarantined = self.quarantine_on(owner, version, message, None).await;
                        return Attempt::from(quarantined_result(command, &quarantined));
                    }
                }
                return fail(error.error_code(), error.to_string());
            }
        };
        if state.exists() && !state.belongs_to(&aggregate_id.tenant_id) {
            // Another tenant's aggregate: to this caller it does not exist. Not recorded: the
            // key is the other tenant's.
            self.cache.put(aggregate_id, state);
            return Attempt::from(CommandResult::failure(
                command,
                CommandStage::Processed,
                ErrorCode::NotFound,
                format!("aggregate {} does not exist", aggregate_id.id),
            ));
        }
        let now = self.clock.now_millis();
        let decided = check_command(
            aggregate_id,
            &command.name,
            decoded.kind(),
            state.version(),
            command.aggregate_version,
        )
        .and_then(|()| {
            self.metrics.record_handler_run();
            runtime.handle(
                &state,
                decoded,
                &CommandContext {
                    aggregate_id,
                    version: state.version(),
                    command_id: &command.id,
                    request_id: &command.request_id,
                    now,
                },
            )
        });
        if let Err(error @ AggregateError::HandlerPanicked { .. }) = &decided {
            // SPEC PX-1: a fault, not a decision. Nothing is recorded (a resend runs the
            // handler again), and the state it ran on stays out of the cache.
            self.cache.evict(aggregate_id);
            return fail(
                ErrorCode::InternalServerError,
                format!("{error}; nothing was recorded: a resend with the same request id runs the handler again"),
            );
        }
        let mut events = match decided {
            Ok(events) if !events.is_empty() => events,
            // SPEC ID-7: a rejection or a result with no events is confirmed against
            // history before it is answered.
            outcome => {
                if cached && self.history_moved_on(aggregate_id, state.version()).await {
                    // Decided on a cached state that history has passed (another process
                    // appended): decide again on fresh state.
                    return Attempt::Retry;
                }
                return match outcome {
                    Ok(_) => self.nothing_recorded(command, fingerprint, state).await,
                    Err(error) => {
                        // A rejection never puts state back into the cache.
                        self.reject(command, fingerprint, state.version(), &error, now)
                            .await
                    }
                };
            }
        };
        if self.ids_name_events {
            for event in &mut events {
                event.id = self.ids.next_id();
            }
        }
        let stream = DomainEventStream {
            id: self.ids.next_id(),
            request_id: command.request_id.clone(),
            command_id: command.id.clone(),
            aggregate_id: aggregate_id.clone(),
            version: state.version() + 1,
            create_time: now,
            fingerprint: fingerprint.to_owned(),
            header: command.header.clone(),
            body: events,
        };
        match self.store.append(&stream).await {
            Ok(()) => {}
            Err(EventStoreError::DuplicateRequestId(_)) => {
                self.metrics.record_duplicate_by_append();
                return Attempt::from(self.duplicate(command, fingerprint).await);
            }
            // The decision used a state that history has passed (SPEC ES-3, ID-7): decide
            // again on reloaded state; a pinned version or a create then meets its rule.
            Err(
                EventStoreError::EventVersionConflict(_) | EventStoreError::DuplicateAggregateId(_),
            ) => return Attempt::Retry,
            Err(error) => return fail(error.error_code(), error.to_string()),
        }
        let version = stream.version;
        let mut appended = CommandResult::success(command, CommandStage::Processed)
            .with_version(version)
            .with_result(RECORDED, true);
        match runtime.apply(&mut state, &stream) {
            Ok(()) => self.cache.put(aggregate_id, state),
            Err(error) => match error.unappliable_history() {
                Some((owner, failed_version, message)) => {
                    // SPEC PX-1: the append stands (history is the truth) and is published;
                    // the half-applied state is dropped and the aggregate quarantined. The
                    // answer is a failure that says the intent was appended, at which version.
                    let quarantined = self
                        .quarantine_on(owner, failed_version, message, Some(&stream))
                        .await;
                    appended = quarantined_result(command, &quarantined)
                        .with_version(version)
                        .with_result(RECORDED, true);
                    appended.error_msg = format!(
                        "appended at version {version}, but the aggregate cannot apply it ({}); the aggregate is quarantined",
                        quarantined.message
                    );
                }
                None => {
                    tracing::error!(%aggregate_id, %error, "appended stream does not apply; state evicted");
                }
            },
        }
        match self.events.publish(Arc::new(stream)).await {
            Ok(()) => Attempt::from(appended),
            // SPEC ST-4: the append happened; the failure says so, with the version.
            Err(error) => {
                let mut failed = CommandResult::failure(
                    command,
                    CommandStage::Processed,
                    ErrorCode::ServiceUnavailable,
                    format!("appended at version {version}, but publishing failed: {error}"),
                )
                .with_version(version)
                .with_result(RECORDED, true);
                if let Some(quarantined) = appended.result.remove(QUARANTINED) {
                    failed.result.insert(QUARANTINED.to_owned(), quarantined);
                }
                Attempt::from(failed)
            }
        }
    }

    /// Quarantines `aggregate_id`, whose stream at `version` cannot be applied for the reason
    /// `message` (SPEC PX-1), and records it for compensation. `stream` is the failing stream
    /// when it is at hand (after an append); else it is read back from the store, and when
    /// that read fails the record names the stream `{aggregate_id}#{version}` instead of by
    /// its id (a retry reloads the aggregate and needs no stream). A record that cannot be
    /// written is logged: the quarantine holds all the same, and the next process records it
    /// again on the aggregate's first command.
    async fn quarantine_on(
        &self,
        aggregate_id: &AggregateId,
        version: u64,
        message: &str,
        stream: Option<&DomainEventStream>,
    ) -> QuarantinedAggregate {
        self.cache.evict(aggregate_id);
        let now = self.clock.now_millis();
        let quarantined = self
            .quarantine
            .quarantine(aggregate_id, version, message, now);
        tracing::error!(%aggregate_id, version, error = %quarantined.message, "aggregate quarantined: its history cannot be applied");
        let Some((store, retry)) = &self.compensation else {
            return quarantined;
        };
        let read;
        let stream = match stream {
            Some(stream) => Some(stream),
            None => {
                read = self.store.load(aggregate_id, version, version).await;
                read.as_ref().ok().and_then(|streams| streams.first())
            }
        };
        let failure_error = ConsumerError::internal(quarantined.message.clone());
        let failure = match stream {
            Some(stream) => {
                FailedExecution::of(AGGREGATE_PROCESSOR, Stage::Processed, stream, failure_error)
            }
            None => FailedExecution {
                consumer: AGGREGATE_PROCESSOR.to_owned(),
                stage: Stage::Processed,
                aggregate_id: aggregate_id.clone(),
                version,
                stream_id: format!("{aggregate_id}#{version}"),
                event_ids: Vec::new(),
                error: failure_error,
            },
        };
        if let Err(error) = store.record_failure(&failure, retry, now).await {
            tracing::error!(%aggregate_id, version, %error, "could not record the quarantine for compensation");
        }
        quarantined
    }

    /// Whether history holds streams after `version` of `aggregate_id`; a failed read counts
    /// as "moved on", so the decision is made again on a fresh load.
    async fn history_moved_on(
        &self,
        aggregate_id: &crate::model::aggregate_id::AggregateId,
        version: u64,
    ) -> bool {
        match self.store.load(aggregate_id, version + 1, u64::MAX).await {
            Ok(newer) => !newer.is_empty(),
            Err(error) => {
                tracing::warn!(%aggregate_id, %error, "cannot confirm a cached state; reloading");
                true
            }
        }
    }

    /// `Ok` with no events (SPEC RQ-13), unless history already holds a decision on this
    /// request id (SPEC ID-7): then that decision is the answer.
    async fn nothing_recorded(
        &self,
        command: &JsonCommand,
        fingerprint: &str,
        state: AggregateState,
    ) -> Attempt {
        let version = state.version();
        self.cache.put(&command.aggregate_id, state);
        match self
            .store
            .find_decision(&command.aggregate_id, &command.request_id)
            .await
        {
            Ok(Some(decision)) => {
                self.metrics.record_duplicate_by_store();
                Attempt::from(decided_result(
                    command,
                    CommandStage::Processed,
                    fingerprint,
                    &decision,
                ))
            }
            Ok(None) => Attempt::from(
                CommandResult::success(command, CommandStage::Processed)
                    .with_version(version)
                    .with_result(RECORDED, false),
            ),
            Err(error) => Attempt::from(CommandResult::failure(
                command,
                CommandStage::Processed,
                error.error_code(),
                format!(
                    "the command recorded nothing, and whether request id `{}` was decided before is unknown: {error}; look it up",
                    command.request_id
                ),
            )),
        }
    }

    /// Answers a rejection decided on a state at `version` (SPEC ID-6, ID-7): a final one is
    /// recorded under the request id's key first, and when that key already holds a decision
    /// (the intent was appended or rejected before) that decision is the answer. A rejection
    /// that cannot be recorded is answered as unavailable, never as final.
    async fn reject(
        &self,
        command: &JsonCommand,
        fingerprint: &str,
        version: u64,
        error: &AggregateError,
        now: i64,
    ) -> Attempt {
        let rejected = aggregate_failure(command, error).with_version(version);
        let passed_pin = match error {
            AggregateError::ExpectedVersionConflict {
                expected, actual, ..
            } => expected < actual,
            _ => true,
        };
        if !is_recorded_rejection(&rejected.error_code) || !passed_pin {
            return Attempt::from(rejected);
        }
        let record = RejectionRecord {
            command_id: command.id.clone(),
            fingerprint: fingerprint.to_owned(),
            error_code: rejected.error_code.clone(),
            error_msg: rejected.error_msg.clone(),
            version,
            create_time: now,
        };
        match self
            .store
            .record_rejection(&command.aggregate_id, &command.request_id, &record)
            .await
        {
            Ok(()) => Attempt::from(rejected),
            Err(EventStoreError::DuplicateRequestId(_)) => {
                self.metrics.record_duplicate_by_store();
                Attempt::from(self.duplicate(command, fingerprint).await)
            }
            Err(store) => Attempt::from(
                CommandResult::failure(
                    command,
                    CommandStage::Processed,
                    store.error_code(),
                    format!(
                        "rejected with {} ({}), but the decision could not be recorded: {store}; resend with the same request id",
                        rejected.error_code, rejected.error_msg
                    ),
                )
                .with_version(version),
            ),
        }
    }

    /// The original decision on a request id whose key was found taken (SPEC ES-4, ID-6).
    async fn duplicate(&self, command: &JsonCommand, fingerprint: &str) -> CommandResult {
        match self
            .store
            .find_decision(&command.aggregate_id, &command.request_id)
            .await
        {
            Ok(Some(decision)) => {
                decided_result(command, CommandStage::Processed, fingerprint, &decision)
            }
            Ok(None) => CommandResult::failure(
                command,
                CommandStage::Processed,
                ErrorCode::DuplicateRequestId,
                format!("request id `{}` was recorded before", command.request_id),
            ),
            // Unknown which decision holds the key: saying `DuplicateRequestId` could hide a
            // rejection, saying a rejection could hide an append (found by wow-sim, seed 6).
            Err(error) => CommandResult::failure(
                command,
                CommandStage::Processed,
                error.error_code(),
                format!(
                    "request id `{}` was decided before, and the decision cannot be read: {error}; look it up",
                    command.request_id
                ),
            ),
        }
    }

    /// The aggregate's state, and whether it came from the cache (else it was rebuilt from
    /// its snapshot and later events just now).
    async fn load(
        &self,
        runtime: &dyn AggregateRuntime,
        aggregate_id: &crate::model::aggregate_id::AggregateId,
    ) -> Result<(AggregateState, bool), LoadError> {
        if let Some(state) = self.cache.take(aggregate_id) {
            return Ok((state, true));
        }
        load_aggregate(
            runtime,
            self.store.as_ref(),
            self.snapshots.as_deref(),
            aggregate_id,
        )
        .await
        .map(|state| (state, false))
    }
}

/// The answer to `command` for an aggregate in quarantine: `InternalServerError`, with the
/// quarantine under [`QUARANTINED`]. Nothing was decided on the command.
fn quarantined_result(command: &JsonCommand, quarantined: &QuarantinedAggregate) -> CommandResult {
    CommandResult::failure(
        command,
        CommandStage::Processed,
        ErrorCode::InternalServerError,
        format!(
            "aggregate {} is quarantined: its stream at version {} cannot be applied ({}); nothing was recorded for this command",
            quarantined.aggregate_id, quarantined.version, quarantined.message
        ),
    )
    .with_result(
        QUARANTINED,
        json!({
            "version": quarantined.version,
            "message": quarantined.message,
            "since": quarantined.since,
        }),
    )
}

fn aggregate_failure(command: &JsonCommand, error: &AggregateError) -> CommandResult {
    CommandResult::failure(
        command,
        CommandStage::Processed,
        error.error_code(),
        error.to_string(),
    )
    .with_binding_errors(error.binding_errors())
}

#[async_trait]
impl CommandHandler for DefaultCommandHandler {
    async fn handle(&self, command: JsonCommand) {
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
                self.notifier.notify(CommandResult::failure(
                    &command,
                    CommandStage::Processed,
                    ErrorCode::InternalServerError,
                    format!("processing the command panicked ({message}); whether it was appended is unknown: look it up by request id"),
                ));
            }
        }
        // Decided (durably) or failed without a decision: either way no longer in flight.
        if let Some(in_flight) = &self.in_flight {
            in_flight.leave(&command.aggregate_id, &command.request_id);
        }
    }
}
