//! Fires what is due: each due row's command through the gateway, with the request id the
//! schedule derived, then the row deleted; a failed firing waits (exponential backoff, kept in
//! the row) and, after a number of attempts, is held and recorded for compensation.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;
use tracing::Instrument;
use wow_core::command::JsonCommand;
use wow_core::command::{
    CommandKind, CommandResultError, CommandStage, OWNER_ID_HEADER, SPACE_ID_HEADER,
};
use wow_core::compensation::{CompensationStore, FailedExecution, RetrySpec};
use wow_core::deadline::{
    backoff, DeadlineStore, DueQuery, FailedFiring, PartitionFilter, PendingDeadline,
    ScheduledCommand,
};
use wow_core::event::ConsumerError;
use wow_core::eventsourcing::{is_recorded_rejection, EventStoreError};
use wow_core::id::Clock;
use wow_core::{AggregateId, CommandMessage, CommandResult, ErrorCode};

use crate::command::{CommandGateway, WaitPlan};
use crate::trace_context;

/// The partitions this process fires the deadlines of, read at each pass: in distributed mode
/// the partitions it holds at that moment; `None` on one node (all of them).
pub type DeadlinePartitions = Arc<dyn Fn() -> Option<PartitionFilter> + Send + Sync>;

/// The header a fired command carries: the name of the deadline that sent it.
pub const DEADLINE_HEADER: &str = "wow-deadline";

/// The header a fired command carries: the aggregate that owns the deadline's row, as
/// `{aggregate name}/{id}` (its tenant and context are the command's). The node checks that
/// this owner's row still carries the command's request id before deciding (SPEC DM-6).
pub const DEADLINE_OWNER_HEADER: &str = "wow-deadline-owner";

/// The consumer name of the compensation records of deadlines that failed as often as the
/// scheduler allows (SPEC DM-6): their aggregate is the row's owner, their stream id the
/// row's request id, and their one event id the deadline's name. Retrying one fires the
/// deadline again.
pub const DEADLINE_SCHEDULER: &str = "wow.deadline_scheduler";

/// The shortest pause between two passes when no row is due yet: rows due and not fired never
/// keep a scheduler busy.
const MIN_PAUSE: Duration = Duration::from_millis(10);

/// How long a woken scheduler gathers further wakes before its pass: at most one pass per
/// this much time however many decisions schedule deadlines.
const WAKE_COALESCE: Duration = Duration::from_millis(50);

/// How the scheduler paces itself.
#[derive(Debug, Clone, Copy)]
pub struct SchedulerConfig {
    /// The longest it sleeps between two looks at the store, when nothing woke it sooner: it
    /// sleeps until the next row comes due when the store can tell that, and is woken when
    /// its pipeline's node schedules a deadline. Default 1 s.
    pub poll_every: Duration,
    /// The most rows one pass fires. Default 256.
    pub batch: usize,
    /// The most rows of one tenant one pass fires, so one tenant's backlog shares each pass
    /// with every other tenant's rows. Default 64.
    pub per_tenant: usize,
    /// How many commands one pass has in flight at once; rows of one target aggregate are
    /// fired one after another, in due order. Default 32.
    pub concurrency: usize,
    /// How long a row whose command failed transiently waits before its first retry; each
    /// later retry waits twice as long as the one before, up to `max_retry_after`. Default
    /// 1 s.
    pub retry_after: Duration,
    /// The longest wait between two retries. Default 5 min.
    pub max_retry_after: Duration,
    /// Failed firings after which a row is held (no longer fired by the scheduler) and
    /// recorded for compensation, where an operator sees it and can retry it. Default 10.
    pub max_attempts: u32,
    /// How long one fired command may take to be decided. Default 30 s.
    pub command_timeout: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            poll_every: Duration::from_secs(1),
            batch: 256,
            per_tenant: 64,
            concurrency: 32,
            retry_after: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(300),
            max_attempts: 10,
            command_timeout: Duration::from_secs(30),
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FirePass {
    /// Rows whose command was decided (accepted, replayed, or rejected for good) and which
    /// are deleted.
    pub fired: usize,
    /// Rows whose command failed transiently; they wait out their retry delay in the store.
    pub deferred: usize,
    /// Of the deferred rows, those that failed as often as allowed: held and recorded for
    /// compensation.
    pub held: usize,
    /// Due rows read but not fired: their partition moved away since the read.
    pub skipped: usize,
}

/// What firing one row came to.
enum Fired {
    Decided,
    Deferred,
    Held,
    Skipped,
}

/// Fires due deadlines through a gateway (SPEC DM-2, DM-6).
///
/// A row is fired with the request id its schedule derived, and deleted only once the command
/// was decided: a crash between the two fires it again, and the second firing replays the
/// first decision instead of taking effect twice. A transient failure (the store, a service,
/// a timeout) counts an attempt in the row and makes it due again after an exponential
/// backoff; after [`max_attempts`](SchedulerConfig::max_attempts) the row is held and
/// recorded for compensation ([`DEADLINE_SCHEDULER`]). After a restart the first pass fires
/// what came due while the process was down.
///
/// Each pass reads only what this process may fire: due rows of its own partitions, shared
/// across tenants, by the store's clock (the database server's on PostgreSQL) unless the
/// scheduler was given a clock of its own. So a stuck row, one partition's backlog or one
/// tenant's flood never delays another's rows, and a process whose clock runs ahead never
/// fires early. Rows are fired concurrently, up to [`concurrency`](SchedulerConfig::concurrency),
/// one target aggregate's rows one after another.
#[derive(Clone)]
pub struct DeadlineScheduler {
    deadlines: Arc<dyn DeadlineStore>,
    gateway: CommandGateway,
    clock: Arc<dyn Clock>,
    by_store_clock: bool,
    config: SchedulerConfig,
    owned: DeadlinePartitions,
    compensation: Option<Arc<dyn CompensationStore>>,
    wake: Arc<Notify>,
}

impl std::fmt::Debug for DeadlineScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadlineScheduler")
            .field("config", &self.config)
            .field("by_store_clock", &self.by_store_clock)
            .finish_non_exhaustive()
    }
}

impl DeadlineScheduler {
    /// A scheduler firing `deadlines`' due rows through `gateway`. "Due" is judged by the
    /// store's clock when `clock` is the process's default clock, else by `clock` (a test's
    /// clock, say); [`judged_by_store_clock`](Self::judged_by_store_clock) overrides it.
    pub fn new(
        deadlines: Arc<dyn DeadlineStore>,
        gateway: CommandGateway,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            by_store_clock: clock.is_process_default(),
            deadlines,
            gateway,
            clock,
            config: SchedulerConfig::default(),
            owned: Arc::new(|| None),
            compensation: None,
            wake: Arc::new(Notify::new()),
        }
    }

    /// Paces it by `config`.
    pub fn with_config(mut self, config: SchedulerConfig) -> Self {
        self.config = config;
        self
    }

    /// Judges "due" by the store's clock whatever clock it was given (SPEC DM-6).
    pub fn judged_by_store_clock(mut self) -> Self {
        self.by_store_clock = true;
        self
    }

    /// Fires only the rows of the partitions `owned` names at each pass (a processor's).
    pub fn owning(mut self, owned: DeadlinePartitions) -> Self {
        self.owned = owned;
        self
    }

    /// Records the rows that failed [`max_attempts`](SchedulerConfig::max_attempts) times in
    /// `store` (consumer [`DEADLINE_SCHEDULER`]). Without it such rows are held and logged.
    pub fn with_compensation(mut self, store: Arc<dyn CompensationStore>) -> Self {
        self.compensation = Some(store);
        self
    }

    /// The store it reads.
    pub fn deadlines(&self) -> &Arc<dyn DeadlineStore> {
        &self.deadlines
    }

    /// Wakes on `signal` too (a pipeline's node tells it when a decision schedules a
    /// deadline), as [`wake`](Self::wake) does.
    pub fn woken_by(mut self, signal: Arc<Notify>) -> Self {
        self.wake = signal;
        self
    }

    /// Wakes a running scheduler for a pass now (say, after a clock moved in a test).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// One pass: fires the due rows this process owns, up to the batch (shared across
    /// tenants), concurrently.
    ///
    /// # Errors
    ///
    /// The store's, when the due rows cannot be read; a row's own failure defers that row.
    pub async fn fire_due(&self) -> Result<FirePass, EventStoreError> {
        let partitions = (self.owned)();
        if matches!(&partitions, Some(filter) if filter.owned.is_empty()) {
            return Ok(FirePass::default());
        }
        let query = DueQuery {
            at: (!self.by_store_clock).then(|| self.clock.now_millis()),
            limit: self.config.batch,
            per_tenant: self.config.per_tenant,
            partitions,
        };
        let due = self.deadlines.due_rows(&query).await?;
        // One target's rows one after another, in due order; targets concurrently.
        let mut by_target: BTreeMap<AggregateId, Vec<PendingDeadline>> = BTreeMap::new();
        for row in due {
            by_target
                .entry(row.schedule.target.clone())
                .or_default()
                .push(row);
        }
        let outcomes: Vec<Vec<Fired>> = futures::stream::iter(by_target.into_values())
            .map(|rows| async move {
                let mut outcomes = Vec::with_capacity(rows.len());
                for row in rows {
                    outcomes.push(self.fire_owned(&row).await);
                }
                outcomes
            })
            .buffer_unordered(self.config.concurrency.max(1))
            .collect()
            .await;
        let mut pass = FirePass::default();
        for outcome in outcomes.into_iter().flatten() {
            match outcome {
                Fired::Decided => pass.fired += 1,
                Fired::Deferred => pass.deferred += 1,
                Fired::Held => {
                    pass.deferred += 1;
                    pass.held += 1;
                }
                Fired::Skipped => pass.skipped += 1,
            }
        }
        Ok(pass)
    }

    /// Runs passes until `stop` completes: at once (what came due while the process was
    /// down), then when the next row comes due, when `poll_every` passed, or 50 ms after it
    /// was woken (the wakes of those 50 ms make one pass).
    pub async fn run(self, stop: impl std::future::Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        loop {
            match self.fire_due().await {
                Ok(pass) if pass.fired + pass.deferred > 0 => {
                    tracing::debug!(
                        fired = pass.fired,
                        deferred = pass.deferred,
                        held = pass.held,
                        "deadline pass"
                    );
                    if pass.fired + pass.deferred >= self.config.batch.min(self.config.per_tenant) {
                        // A full share: more may be due now.
                        continue;
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "the due deadlines cannot be read; trying again later")
                }
            }
            let pause = self.pause().await;
            tokio::select! {
                () = &mut stop => return,
                () = self.wake.notified() => {
                    // The wakes of a burst (a flood of decisions that schedule) make one pass.
                    tokio::select! {
                        () = &mut stop => return,
                        () = tokio::time::sleep(WAKE_COALESCE) => {}
                    }
                }
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// How long to sleep before the next pass when nothing wakes it: until the next row of
    /// its partitions comes due, as the store tells, and no longer than
    /// [`poll_every`](SchedulerConfig::poll_every); 10 ms at least, so that rows due
    /// and not fired (their partition moved away) never keep it busy.
    async fn pause(&self) -> Duration {
        let poll = self.config.poll_every;
        let partitions = (self.owned)();
        match self.deadlines.next_fire_at(partitions.as_ref()).await {
            Ok(Some(next)) => {
                let until = next.saturating_sub(self.clock.now_millis());
                Duration::from_millis(u64::try_from(until).unwrap_or(0))
                    .clamp(MIN_PAUSE, poll.max(MIN_PAUSE))
            }
            Ok(None) => poll,
            Err(error) => {
                tracing::debug!(%error, "the next firing time cannot be read; polling");
                poll
            }
        }
    }

    /// Fires `row` unless its partition moved away since it was read.
    async fn fire_owned(&self, row: &PendingDeadline) -> Fired {
        if let Some(filter) = (self.owned)() {
            if !filter.contains(&row.schedule.owner) {
                return Fired::Skipped;
            }
        }
        self.fire(row).await
    }

    /// Sends `row`'s command and deletes the row once it was decided; a transient failure
    /// counts an attempt and makes the row wait.
    async fn fire(&self, row: &PendingDeadline) -> Fired {
        let schedule = &row.schedule;
        let mut command = fired_command(schedule);
        // SPEC OB-1: a firing is a trace of its own (see `trace_context::deadline_span`).
        let span = trace_context::deadline_span(schedule);
        trace_context::stamp(&span, &mut command.header);
        let outcome = self
            .gateway
            .send_and_wait(
                command,
                WaitPlan::processed().with_timeout(self.config.command_timeout),
            )
            .instrument(span)
            .await;
        let decided = match &outcome {
            Ok(_) => true,
            Err(CommandResultError::Failed(result)) => is_decided(result),
            Err(_) => false,
        };
        if !decided {
            let (code, message) = match &outcome {
                Err(CommandResultError::Failed(result)) => {
                    (result.error_code.clone(), result.error_msg.clone())
                }
                Err(other) => (ErrorCode::InternalServerError, other.to_string()),
                Ok(_) => (ErrorCode::InternalServerError, String::new()),
            };
            return self.failed(row, ConsumerError::new(code, message)).await;
        }
        if let Err(CommandResultError::Failed(result)) = &outcome {
            tracing::info!(owner = %schedule.owner, deadline = schedule.name, code = %result.error_code, "a due deadline's command was refused");
        }
        match self.deadlines.fired(schedule).await {
            Ok(_) => Fired::Decided,
            Err(error) => {
                // Decided, not deleted: the next pass fires it again and replays the decision.
                tracing::warn!(owner = %schedule.owner, deadline = schedule.name, %error, "a fired deadline could not be deleted");
                Fired::Deferred
            }
        }
    }

    /// A firing of `row` failed transiently: one attempt more, and due again after the
    /// backoff, or held and recorded once it failed `max_attempts` times.
    async fn failed(&self, row: &PendingDeadline, error: ConsumerError) -> Fired {
        let schedule = &row.schedule;
        let attempts = row.attempts.saturating_add(1);
        let exhausted = attempts >= self.config.max_attempts.max(1);
        let after = (!exhausted).then(|| {
            backoff(
                self.config.retry_after,
                self.config.max_retry_after,
                attempts,
            )
        });
        tracing::warn!(owner = %schedule.owner, deadline = schedule.name, request_id = schedule.request_id, attempts, held = exhausted, code = %error.code, error = error.message, "a due deadline's command failed");
        if let Err(store_error) = self
            .deadlines
            .retry_later(FailedFiring {
                owner: &schedule.owner,
                name: &schedule.name,
                request_id: &schedule.request_id,
                after,
                from: (!self.by_store_clock).then(|| self.clock.now_millis()),
            })
            .await
        {
            tracing::warn!(owner = %schedule.owner, deadline = schedule.name, error = %store_error, "a failed deadline's retry could not be recorded; it is due again at once");
            return Fired::Deferred;
        }
        if !exhausted {
            return Fired::Deferred;
        }
        if let Some(compensation) = &self.compensation {
            let failure = FailedExecution {
                consumer: DEADLINE_SCHEDULER.to_owned(),
                stage: CommandStage::Processed,
                aggregate_id: schedule.owner.clone(),
                version: 0,
                stream_id: schedule.request_id.clone(),
                event_ids: vec![schedule.name.clone()],
                error,
            };
            // One attempt: the record's retry is an operator's (or the compensation
            // scheduler's) re-fire, which the scheduler then runs as any due row.
            let retry = RetrySpec {
                max_attempts: 1,
                ..RetrySpec::default()
            };
            if let Err(error) = compensation
                .record_failure(&failure, &retry, self.clock.now_millis())
                .await
            {
                tracing::error!(owner = %schedule.owner, deadline = schedule.name, %error, "a held deadline could not be recorded for compensation");
            }
        }
        Fired::Held
    }
}

/// The command `schedule` fires: its target, command and body, with the request id the
/// schedule derived and the headers naming the deadline and its owner, which the node checks
/// against the pending row (SPEC DM-6).
///
/// A saga's deadline held to an owner and space ([`ScheduledCommand::held_to`]) names them, as
/// the saga's commands sent at once do (SPEC TN-2): the node refuses it for an aggregate of
/// another owner or space.
pub fn fired_command(schedule: &ScheduledCommand) -> JsonCommand {
    let mut command = CommandMessage::new(
        schedule.target.clone(),
        schedule.command.clone(),
        CommandKind::Normal,
        schedule.body.clone(),
    )
    .with_request_id(schedule.request_id.clone())
    .with_header(DEADLINE_HEADER, schedule.name.clone())
    .with_header(
        DEADLINE_OWNER_HEADER,
        format!("{}/{}", schedule.owner.aggregate_name, schedule.owner.id),
    );
    if let Some(scope) = &schedule.held_to {
        for (header, value) in [
            (OWNER_ID_HEADER, &scope.owner_id),
            (SPACE_ID_HEADER, &scope.space_id),
        ] {
            if !value.is_empty() {
                command = command.with_header(header, value.clone());
            }
        }
    }
    command
}

/// Whether a failed command was decided for good: its request id was decided before (the
/// deadline fired already: this firing replays that decision), a recorded rejection, or a
/// command this build cannot send at all (a deadline of a command since removed), which no
/// retry mends.
pub(crate) fn is_decided(result: &CommandResult) -> bool {
    is_recorded_rejection(&result.error_code)
        || matches!(
            result.error_code,
            ErrorCode::DuplicateRequestId
                | ErrorCode::CommandValidation
                | ErrorCode::BadRequest
                | ErrorCode::IllegalArgument
        )
}
