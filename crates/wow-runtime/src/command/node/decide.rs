//! Deciding: the checks before the handler, loading the aggregate, and one attempt as a
//! sequence of named steps.

use crate::command::wait::{PROTOCOL_HEADER, PROTOCOL_VERSION};
use crate::eventsourcing::{load_aggregate, recorded_scope, LoadError};
use crate::idempotency::RequestIdCheck;
use crate::trace_context;
use wow_core::aggregate::{
    check_access, check_command, AggregateError, AggregateReads, AggregateState, CommandContext,
};
use wow_core::aggregate::{AggregateRuntime, Decided, DecodedCommand};
use wow_core::command::JsonCommand;
use wow_core::command::{CommandResult, CommandStage, OWNER_ID_HEADER, SPACE_ID_HEADER};
use wow_core::event::DomainEvent;
use wow_core::AggregateId;
use wow_core::ErrorCode;

use super::answers::{decided, quarantined_result};
use super::reads::StoreReads;
use super::{Attempt, DefaultCommandHandler};
use futures::future::BoxFuture;
use tracing::Instrument;

use crate::deadline::{fired_command, is_decided, DEADLINE_HEADER, DEADLINE_OWNER_HEADER};

/// The aggregate's state for one attempt, and whether it came from the cache (else it was
/// rebuilt from its snapshot and later events just now).
pub(super) struct Loaded {
    pub(super) state: AggregateState,
    pub(super) cached: bool,
}

impl DefaultCommandHandler {
    pub(super) async fn decide_and_append(&self, command: &JsonCommand) -> CommandResult {
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
        let runtime = match self.registry.find(&command.aggregate_id.aggregate_name) {
            Ok(runtime) => runtime.clone(),
            Err(unknown) => return fail(unknown.error_code(), unknown.to_string()),
        };
        let decoded = match runtime.decode_command(&command.name, &command.body) {
            Ok(decoded) => decoded,
            Err(error) => {
                return fail(error.error_code(), error.to_string())
                    .with_binding_errors(error.binding_errors())
            }
        };
        // SPEC TN-2: before the request id is looked at, so that a caller of another owner
        // learns nothing of this aggregate's decisions.
        let existed = match self.refused_access(command).await {
            Ok(existed) => existed,
            Err(refused) => return refused,
        };
        let fingerprint = command.json_fingerprint();
        if let Some(checker) = &self.checker {
            let check = checker
                .check(&command.aggregate_id, &command.request_id)
                .await;
            if let RequestIdCheck::Decided(decision) = check {
                return decided(command, &fingerprint, &decision);
            }
        }
        if !command.header.contains_key(DEADLINE_HEADER) {
            self.fire_overdue_first(runtime.as_ref(), command).await;
        }
        for _ in 0..=self.conflict_retries {
            match self
                .attempt(runtime.as_ref(), command, &decoded, &fingerprint, existed)
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

    /// SPEC TN-2, as Wow decides it: a command that names an owner or a space (its caller's
    /// binding) and is for an existing aggregate of another owner or space is refused,
    /// `IllegalAccessOwnerAggregate` / `IllegalAccessSpaceAggregate`, and nothing is recorded.
    /// Reads the aggregate's first stream only, and only for such a command. `Ok(true)` when
    /// the aggregate existed and is the caller's.
    async fn refused_access(&self, command: &JsonCommand) -> Result<bool, CommandResult> {
        let named = |key: &str| command.header.get(key).map(String::as_str);
        let (owner, space) = (named(OWNER_ID_HEADER), named(SPACE_ID_HEADER));
        if owner.unwrap_or_default().is_empty() && space.unwrap_or_default().is_empty() {
            return Ok(false);
        }
        let failure = |code: ErrorCode, message: String| {
            CommandResult::failure(command, CommandStage::Processed, code, message)
        };
        match recorded_scope(self.store.as_ref(), &command.aggregate_id).await {
            Ok(None) => Ok(false),
            Ok(Some(recorded)) => check_access(owner, space, &recorded, &command.aggregate_id)
                .map(|()| true)
                .map_err(|refused| failure(refused.code, refused.message)),
            Err(error) => Err(failure(error.error_code(), error.to_string())),
        }
    }

    /// One attempt at `command`: load, decide, and record the decision. `Retry` when the
    /// decision was made on a state that history has passed. `checked`: the caller's access
    /// to the aggregate was checked on an aggregate that existed.
    async fn attempt(
        &self,
        runtime: &dyn AggregateRuntime,
        command: &JsonCommand,
        decoded: &DecodedCommand,
        fingerprint: &str,
        checked: bool,
    ) -> Attempt {
        let loaded = match self.load_for(runtime, command).await {
            Ok(loaded) => loaded,
            Err(answer) => return answer,
        };
        if !checked && loaded.state.exists() {
            // Created since the check: checked again before anything is decided on it.
            if let Err(refused) = self.refused_access(command).await {
                self.cache.put(&command.aggregate_id, loaded.state);
                return Attempt::from(refused);
            }
        }
        let now = self.clock.now_millis();
        match self.stale_firing(command).await {
            Ok(None) => {}
            Ok(Some(stale)) => {
                let version = loaded.state.version();
                self.cache.put(&command.aggregate_id, loaded.state);
                return self
                    .reject(command, fingerprint, version, &stale, now)
                    .await;
            }
            Err(unavailable) => {
                self.cache.put(&command.aggregate_id, loaded.state);
                return Attempt::from(unavailable);
            }
        }
        let decided = match self
            .run_handler(runtime, command, decoded, &loaded.state, now)
            .await
        {
            Err(error @ AggregateError::HandlerPanicked { .. }) => {
                return self.handler_panicked(command, &error)
            }
            Err(AggregateError::ServiceFailed(failure)) => {
                return self.service_failed(command, loaded, &failure)
            }
            Ok(decided) if !decided.events.is_empty() => decided,
            // SPEC ID-7: a rejection or a result with no events is confirmed against
            // history before it is answered.
            outcome => {
                let outcome = outcome.map(|decided| decided.events);
                return self
                    .confirm_no_append(command, fingerprint, loaded, outcome, now)
                    .await;
            }
        };
        let version = loaded.state.version();
        // SPEC OB-1: the append runs in its own span, a child of the node's; the stream
        // carries the append's context to every consumer (or, with no OpenTelemetry layer,
        // the command's context unchanged).
        let span = trace_context::append_span(command, version + 1);
        let mut stream = self.stream_of(command, fingerprint, version, decided.events, now);
        trace_context::stamp(&span, &mut stream.header);
        if let Some(answer) = self
            .append(command, fingerprint, &stream, &decided.changes)
            .instrument(span)
            .await
        {
            return answer;
        }
        let appended = self
            .apply_appended(runtime, command, loaded.state, &stream)
            .await;
        self.publish(command, stream, appended).await
    }

    /// SPEC DM-6: a command that reaches an aggregate after one of its deadlines came due is
    /// decided after that deadline's command, so the scheduler's lateness never changes an
    /// outcome: each overdue deadline the state holds (by the store's clock when the node runs
    /// on the process's clock) is fired here first, as the scheduler would fire it (its
    /// request id, so a firing by the scheduler as well takes effect once), and its row goes
    /// once decided. A failure here leaves the deadline to the scheduler; the command is
    /// decided either way.
    fn fire_overdue_first<'a>(
        &'a self,
        runtime: &'a dyn AggregateRuntime,
        command: &'a JsonCommand,
    ) -> BoxFuture<'a, ()> {
        // Boxed and declared `Send`: it decides commands through `decide_and_append`, which
        // calls it.
        Box::pin(async move {
            let Some(deadlines) = &self.deadlines else {
                return;
            };
            // Only commands declared #[command(deadline)] can be scheduled: an aggregate with
            // none holds no deadline, and costs nothing here.
            if !runtime.commands().iter().any(|info| info.deadline) {
                return;
            }
            let aggregate_id = &command.aggregate_id;
            if self.quarantine.get(aggregate_id).is_some() {
                return;
            }
            let now = self.clock.now_millis();
            let overdue = match self.load(runtime, aggregate_id).await {
                Ok(loaded) => {
                    let overdue = if loaded.state.belongs_to(&aggregate_id.tenant_id) {
                        runtime.overdue(&loaded.state, now)
                    } else {
                        Vec::new()
                    };
                    self.cache.put(aggregate_id, loaded.state);
                    overdue
                }
                // The attempt meets and answers the same failure.
                Err(_) => return,
            };
            if overdue.is_empty() {
                return;
            }
            let now = if self.clock.is_process_default() {
                match deadlines.now().await {
                    Ok(now) => now,
                    Err(_) => return,
                }
            } else {
                now
            };
            let Ok(rows) = deadlines.pending_for(aggregate_id).await else {
                return;
            };
            let mut due: Vec<_> = rows
                .into_iter()
                .filter(|row| {
                    overdue.contains(&row.schedule.name)
                        && row.schedule.target == *aggregate_id
                        && row.schedule.due_at <= now
                })
                .collect();
            due.sort_by_key(|row| row.schedule.due_at);
            for row in due {
                let fired = fired_command(&row.schedule);
                let result = self.decide_and_append(&fired).await;
                tracing::info!(aggregate_id = %aggregate_id, deadline = row.schedule.name, request_id = row.schedule.request_id, code = %result.error_code, before = command.request_id, "an overdue deadline was decided before the command that arrived after it");
                if result.error_code.is_ok() || is_decided(&result) {
                    if let Err(error) = deadlines.fired(&row.schedule).await {
                        tracing::warn!(%error, deadline = row.schedule.name, "a fired deadline could not be deleted; the scheduler replays it");
                    }
                }
            }
        })
    }

    /// SPEC DM-6: a command a deadline fired is decided only while its schedule is the
    /// owner's pending row (same name, same request id). `Ok(Some(_))` is the rejection to
    /// record when a later event moved or cancelled it; `Err` when the rows cannot be read
    /// (transient, nothing recorded).
    async fn stale_firing(
        &self,
        command: &JsonCommand,
    ) -> Result<Option<AggregateError>, CommandResult> {
        let (Some(deadlines), Some(name)) = (&self.deadlines, command.header.get(DEADLINE_HEADER))
        else {
            return Ok(None);
        };
        let mut owner = command.aggregate_id.clone();
        if let Some((aggregate_name, id)) = command
            .header
            .get(DEADLINE_OWNER_HEADER)
            .and_then(|owner| owner.split_once('/'))
        {
            aggregate_name.clone_into(&mut owner.aggregate_name);
            id.clone_into(&mut owner.id);
        }
        let rows = deadlines.pending_for(&owner).await.map_err(|error| {
            CommandResult::failure(
                command,
                CommandStage::Processed,
                error.error_code(),
                format!("the pending deadlines of {owner} cannot be read ({error}); nothing was recorded"),
            )
        })?;
        let pending = rows
            .iter()
            .any(|row| &row.schedule.name == name && row.schedule.request_id == command.request_id);
        Ok((!pending).then(|| AggregateError::Rejected {
            code: ErrorCode::DeadlineNotPending,
            message: format!(
                "deadline `{name}` of {owner} is no longer pending under request id {}: a later event moved or cancelled it",
                command.request_id
            ),
            detail: serde_json::Map::new(),
        }))
    }

    /// The aggregate's state for `command`, or the answer when there is none to decide on:
    /// the aggregate is quarantined (SPEC PX-1), cannot be loaded, or is another tenant's.
    async fn load_for(
        &self,
        runtime: &dyn AggregateRuntime,
        command: &JsonCommand,
    ) -> Result<Loaded, Attempt> {
        let aggregate_id = &command.aggregate_id;
        if let Some(quarantined) = self.quarantine.get(aggregate_id) {
            // SPEC PX-1: answered at once; loading a history known not to apply again for
            // every command is the loop the clause forbids.
            return Err(Attempt::from(quarantined_result(command, &quarantined)));
        }
        let loaded = match self.load(runtime, aggregate_id).await {
            Ok(loaded) => loaded,
            Err(error) => {
                if let LoadError::Aggregate(failed) = &error {
                    if let Some((owner, version, message)) = failed.unappliable_history() {
                        let quarantined = self.quarantine_on(owner, version, message, None).await;
                        return Err(Attempt::from(quarantined_result(command, &quarantined)));
                    }
                }
                return Err(Attempt::from(CommandResult::failure(
                    command,
                    CommandStage::Processed,
                    error.error_code(),
                    error.to_string(),
                )));
            }
        };
        if loaded.state.exists() && !loaded.state.belongs_to(&aggregate_id.tenant_id) {
            // Another tenant's aggregate: to this caller it does not exist. Not recorded: the
            // key is the other tenant's.
            self.cache.put(aggregate_id, loaded.state);
            return Err(Attempt::from(CommandResult::failure(
                command,
                CommandStage::Processed,
                ErrorCode::NotFound,
                format!("aggregate {} does not exist", aggregate_id.id),
            )));
        }
        Ok(loaded)
    }

    /// The existence and expected-version rules, then the aggregate's handler, with the
    /// node's services and the command's deadline (SPEC DM-3).
    async fn run_handler(
        &self,
        runtime: &dyn AggregateRuntime,
        command: &JsonCommand,
        decoded: &DecodedCommand,
        state: &AggregateState,
        now: i64,
    ) -> Result<Decided, AggregateError> {
        let aggregate_id = &command.aggregate_id;
        check_command(
            aggregate_id,
            &command.name,
            decoded.kind(),
            state.version(),
            command.aggregate_version,
        )?;
        self.metrics.record_handler_run();
        let reader = StoreReads { node: self };
        let reads = AggregateReads::new(&reader, runtime.reads());
        let ctx = CommandContext {
            aggregate_id,
            version: state.version(),
            command_id: &command.id,
            request_id: &command.request_id,
            now,
            services: &self.services,
            deadline: Some(std::time::Instant::now() + self.decision_budget),
            reads: Some(&reads),
        };
        let mut decided = runtime.handle(state, decoded, &ctx).await?;
        if !decided.events.is_empty() {
            // SPEC DM-5: the append holds only while what the decision read stands, and an
            // aggregate others read excludes their checks while it appends.
            decided.changes.conditions = reads.conditions_for(aggregate_id);
            decided.changes.read_by_others = self
                .registry
                .is_read_by_others(&aggregate_id.aggregate_name);
        }
        Ok(decided)
    }

    /// SPEC DM-3: a service the handler consulted failed. A transient failure, not a
    /// decision: nothing is recorded (ID-6), the state it ran on is as it was, and the resend
    /// with the same request id decides again.
    fn service_failed(
        &self,
        command: &JsonCommand,
        loaded: Loaded,
        failure: &wow_core::aggregate::ServiceFailure,
    ) -> Attempt {
        tracing::warn!(aggregate_id = %command.aggregate_id, command = command.name, request_id = command.request_id, service = failure.service, timed_out = failure.timed_out, message = failure.message, "a service the handler consulted failed; nothing was recorded");
        self.cache.put(&command.aggregate_id, loaded.state);
        Attempt::from(CommandResult::failure(
            command,
            CommandStage::Processed,
            ErrorCode::ServiceFailed,
            format!(
                "{failure}; nothing was recorded: a resend with the same request id decides again"
            ),
        ))
    }

    /// SPEC PX-1: a panicking handler is a fault, not a decision. Nothing is recorded (a
    /// resend runs the handler again), and the state it ran on stays out of the cache.
    fn handler_panicked(&self, command: &JsonCommand, error: &AggregateError) -> Attempt {
        self.cache.evict(&command.aggregate_id);
        Attempt::from(CommandResult::failure(
            command,
            CommandStage::Processed,
            ErrorCode::InternalServerError,
            format!("{error}; nothing was recorded: a resend with the same request id runs the handler again"),
        ))
    }

    /// A decision that appends nothing (a rejection, or no events): decided again when it
    /// was made on a cached state that history has passed (another process appended), else
    /// answered, a rejection recorded first (SPEC ID-6, ID-7).
    async fn confirm_no_append(
        &self,
        command: &JsonCommand,
        fingerprint: &str,
        loaded: Loaded,
        outcome: Result<Vec<DomainEvent>, AggregateError>,
        now: i64,
    ) -> Attempt {
        let version = loaded.state.version();
        if loaded.cached && self.history_moved_on(&command.aggregate_id, version).await {
            return Attempt::Retry;
        }
        match outcome {
            Ok(_) => {
                self.nothing_recorded(command, fingerprint, loaded.state)
                    .await
            }
            // A rejection never puts state back into the cache.
            Err(error) => {
                self.reject(command, fingerprint, version, &error, now)
                    .await
            }
        }
    }

    /// Whether history holds streams after `version` of `aggregate_id`; a failed read counts
    /// as "moved on", so the decision is made again on a fresh load.
    async fn history_moved_on(&self, aggregate_id: &AggregateId, version: u64) -> bool {
        match self.store.load(aggregate_id, version + 1, u64::MAX).await {
            Ok(newer) => !newer.is_empty(),
            Err(error) => {
                tracing::warn!(%aggregate_id, %error, "cannot confirm a cached state; reloading");
                true
            }
        }
    }

    /// The aggregate's state, and whether it came from the cache (else it was rebuilt from
    /// its snapshot and later events just now).
    async fn load(
        &self,
        runtime: &dyn AggregateRuntime,
        aggregate_id: &AggregateId,
    ) -> Result<Loaded, LoadError> {
        if let Some(state) = self.cache.take(aggregate_id) {
            return Ok(Loaded {
                state,
                cached: true,
            });
        }
        load_aggregate(
            runtime,
            self.store.as_ref(),
            self.snapshots.as_deref(),
            aggregate_id,
        )
        .await
        .map(|state| Loaded {
            state,
            cached: false,
        })
    }
}
