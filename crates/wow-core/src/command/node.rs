//! The processing node's command handler: the request-id check against the node's own
//! store, the aggregate's decision, the append, and the `PROCESSED` signal.

use std::sync::Arc;

use async_trait::async_trait;

use super::error::duplicate_result;
use super::wait::{signal_wanted, PROTOCOL_HEADER, PROTOCOL_VERSION, RECORDED};
use super::{CommandHandler, CommandKind, CommandResult, CommandStage, JsonCommand, WaitNotifier};
use crate::aggregate::{
    check_command, AggregateError, AggregateRegistry, AggregateRuntime, AggregateState,
    CommandContext,
};
use crate::event::DomainEventBus;
use crate::eventsourcing::{
    load_aggregate, AggregateCache, EventStore, EventStoreError, LoadError, SnapshotStore,
};
use crate::id::{Clock, IdGenerator, SystemClock, UuidV7IdGenerator};
use crate::idempotency::{RequestIdCheck, RequestIdChecker};
use crate::metrics::PipelineMetrics;
use crate::{DomainEventStream, ErrorCode};

/// How often a command that pinned no version is re-decided after a version conflict.
pub const DEFAULT_CONFLICT_RETRIES: u32 = 3;

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
            },
        }
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
            if let RequestIdCheck::Duplicate(record) = check {
                return duplicate_result(command, CommandStage::Processed, &fingerprint, &record);
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
        decoded: &crate::aggregate::DecodedCommand,
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
        let mut state = match self.load(runtime, aggregate_id).await {
            Ok(state) => state,
            Err(error) => return fail(error.error_code(), error.to_string()),
        };
        if state.exists() && !state.belongs_to(&aggregate_id.tenant_id) {
            // Another tenant's aggregate: to this caller it does not exist.
            self.cache.put(aggregate_id, state);
            return Attempt::from(CommandResult::failure(
                command,
                CommandStage::Processed,
                ErrorCode::NotFound,
                format!("aggregate {} does not exist", aggregate_id.id),
            ));
        }
        if let Err(error) = check_command(
            aggregate_id,
            &command.name,
            decoded.kind(),
            state.version(),
            command.aggregate_version,
        ) {
            let version = state.version();
            self.cache.put(aggregate_id, state);
            // The first attempt of this very request may be what moved the aggregate on: a
            // replayed create or a resend that pinned the old version (SPEC ES-4).
            if matches!(
                error,
                AggregateError::AlreadyExists(_) | AggregateError::ExpectedVersionConflict { .. }
            ) {
                match self
                    .store
                    .find_request(aggregate_id, &command.request_id)
                    .await
                {
                    Ok(Some(record)) => {
                        self.metrics.record_duplicate_by_store();
                        return Attempt::from(duplicate_result(
                            command,
                            CommandStage::Processed,
                            fingerprint,
                            &record,
                        ));
                    }
                    Ok(None) => {}
                    // Unknown whether this very request made the conflict: saying
                    // `DuplicateAggregateId` would reject an intent that may have been
                    // applied (found by wow-sim, seed 6). The caller looks it up.
                    Err(lookup) => {
                        return fail(
                            lookup.error_code(),
                            format!(
                                "{error}, and whether request id `{}` made it is unknown: {lookup}; look it up",
                                command.request_id
                            ),
                        );
                    }
                }
            }
            return Attempt::from(aggregate_failure(command, &error).with_version(version));
        }
        let now = self.clock.now_millis();
        let ctx = CommandContext {
            aggregate_id,
            version: state.version(),
            command_id: &command.id,
            request_id: &command.request_id,
            now,
        };
        self.metrics.record_handler_run();
        let mut events = match runtime.handle(&state, decoded, &ctx) {
            Ok(events) => events,
            Err(error) => {
                let version = state.version();
                self.cache.put(aggregate_id, state);
                return Attempt::from(aggregate_failure(command, &error).with_version(version));
            }
        };
        if events.is_empty() {
            let version = state.version();
            self.cache.put(aggregate_id, state);
            return Attempt::from(
                CommandResult::success(command, CommandStage::Processed)
                    .with_version(version)
                    .with_result(RECORDED, false),
            );
        }
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
                self.cache.evict(aggregate_id);
                self.metrics.record_duplicate_by_append();
                return Attempt::from(self.duplicate(command, fingerprint).await);
            }
            Err(
                EventStoreError::EventVersionConflict(_) | EventStoreError::DuplicateAggregateId(_),
            ) if command.aggregate_version.is_none() && decoded.kind() != CommandKind::Create => {
                self.cache.evict(aggregate_id);
                return Attempt::Retry;
            }
            Err(error) => {
                self.cache.evict(aggregate_id);
                return fail(error.error_code(), error.to_string());
            }
        }
        let version = stream.version;
        match runtime.apply(&mut state, &stream) {
            Ok(()) => self.cache.put(aggregate_id, state),
            Err(error) => {
                tracing::error!(%aggregate_id, %error, "appended stream does not apply; state evicted");
                self.cache.evict(aggregate_id);
            }
        }
        let appended = CommandResult::success(command, CommandStage::Processed)
            .with_version(version)
            .with_result(RECORDED, true);
        match self.events.publish(Arc::new(stream)).await {
            Ok(()) => Attempt::from(appended),
            // SPEC ST-4: the append happened; the failure says so, with the version.
            Err(error) => Attempt::from(
                CommandResult::failure(
                    command,
                    CommandStage::Processed,
                    ErrorCode::ServiceUnavailable,
                    format!("appended at version {version}, but publishing failed: {error}"),
                )
                .with_version(version)
                .with_result(RECORDED, true),
            ),
        }
    }

    /// The original outcome of a request id the append found taken (SPEC ES-4).
    async fn duplicate(&self, command: &JsonCommand, fingerprint: &str) -> CommandResult {
        match self
            .store
            .find_request(&command.aggregate_id, &command.request_id)
            .await
        {
            Ok(Some(record)) => {
                duplicate_result(command, CommandStage::Processed, fingerprint, &record)
            }
            Ok(None) | Err(_) => CommandResult::failure(
                command,
                CommandStage::Processed,
                ErrorCode::DuplicateRequestId,
                format!("request id `{}` was recorded before", command.request_id),
            ),
        }
    }

    /// The aggregate's state: cached, or rebuilt from its snapshot and later events.
    async fn load(
        &self,
        runtime: &dyn AggregateRuntime,
        aggregate_id: &crate::AggregateId,
    ) -> Result<AggregateState, LoadError> {
        if let Some(state) = self.cache.take(aggregate_id) {
            return Ok(state);
        }
        load_aggregate(
            runtime,
            self.store.as_ref(),
            self.snapshots.as_deref(),
            aggregate_id,
        )
        .await
    }
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
            return;
        }
        self.process(&command).await;
    }
}
