//! Fires what is due: each due row's command through the gateway, with the request id the
//! schedule derived, then the row deleted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use wow_core::command::{CommandKind, CommandResultError};
use wow_core::deadline::{DeadlineStore, ScheduledCommand};
use wow_core::eventsourcing::{is_recorded_rejection, EventStoreError};
use wow_core::id::Clock;
use wow_core::{AggregateId, CommandMessage, CommandResult, ErrorCode};

use crate::command::{CommandGateway, WaitPlan};

/// Whether this process fires `owner`'s deadlines: in distributed mode, whether it owns the
/// owner's partition; on one node, always.
pub type OwnsDeadline = Arc<dyn Fn(&AggregateId) -> bool + Send + Sync>;

/// The rows whose command failed transiently, by owner, name and request id: when each may be
/// fired again.
type Deferred = Mutex<HashMap<(AggregateId, String, String), i64>>;

/// The header a fired command carries: the name of the deadline that sent it.
pub const DEADLINE_HEADER: &str = "wow-deadline";

/// How the scheduler paces itself.
#[derive(Debug, Clone, Copy)]
pub struct SchedulerConfig {
    /// The longest it sleeps between two looks at the store, when nothing woke it sooner.
    pub poll_every: Duration,
    /// The most rows one pass fires.
    pub batch: usize,
    /// How long a row whose command failed transiently waits before it is fired again.
    pub retry_after: Duration,
    /// How long one fired command may take to be decided.
    pub command_timeout: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            poll_every: Duration::from_secs(1),
            batch: 256,
            retry_after: Duration::from_secs(5),
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
    /// Rows whose command failed transiently; they stay, and are fired again later.
    pub deferred: usize,
    /// Due rows another process fires (its partition), or that wait out a retry.
    pub skipped: usize,
}

/// Fires due deadlines through a gateway (SPEC DM-2).
///
/// A row is fired with the request id its schedule derived, and deleted only once the command
/// was decided: a crash between the two fires it again, and the second firing replays the
/// first decision instead of taking effect twice. A transient failure (the store, a service,
/// a timeout) leaves the row for a later pass. After a restart the first pass fires what came
/// due while the process was down. Its cost is what is due, read by the store's index on the
/// due time, never what is pending.
#[derive(Clone)]
pub struct DeadlineScheduler {
    deadlines: Arc<dyn DeadlineStore>,
    gateway: CommandGateway,
    clock: Arc<dyn Clock>,
    config: SchedulerConfig,
    owns: OwnsDeadline,
    waiting: Arc<Deferred>,
    wake: Arc<Notify>,
}

impl std::fmt::Debug for DeadlineScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadlineScheduler")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl DeadlineScheduler {
    /// A scheduler firing `deadlines`' due rows through `gateway`, by `clock`'s time.
    pub fn new(
        deadlines: Arc<dyn DeadlineStore>,
        gateway: CommandGateway,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            deadlines,
            gateway,
            clock,
            config: SchedulerConfig::default(),
            owns: Arc::new(|_| true),
            waiting: Arc::default(),
            wake: Arc::new(Notify::new()),
        }
    }

    /// Paces it by `config`.
    pub fn with_config(mut self, config: SchedulerConfig) -> Self {
        self.config = config;
        self
    }

    /// Fires only the rows `owns` says are this process's (a processor's partitions).
    pub fn owning(mut self, owns: OwnsDeadline) -> Self {
        self.owns = owns;
        self
    }

    /// The store it reads.
    pub fn deadlines(&self) -> &Arc<dyn DeadlineStore> {
        &self.deadlines
    }

    /// Wakes a running scheduler for a pass now (say, after a clock moved in a test).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// One pass: fires every due row this process owns, up to the batch, earliest first.
    ///
    /// # Errors
    ///
    /// The store's, when the due rows cannot be read; a row's own failure defers that row.
    pub async fn fire_due(&self) -> Result<FirePass, EventStoreError> {
        let now = self.clock.now_millis();
        let due = self.deadlines.due(now, self.config.batch).await?;
        let mut pass = FirePass::default();
        for row in due {
            if !(self.owns)(&row.owner) || self.waits(&row, now) {
                pass.skipped += 1;
                continue;
            }
            if self.fire(&row).await {
                pass.fired += 1;
            } else {
                pass.deferred += 1;
                self.defer(&row, now);
            }
        }
        Ok(pass)
    }

    /// Runs passes until `stop` completes: at once (what came due while the process was
    /// down), then whenever woken or `poll_every` passed.
    pub async fn run(self, stop: impl std::future::Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        loop {
            match self.fire_due().await {
                Ok(pass) if pass.fired + pass.deferred > 0 => {
                    tracing::debug!(
                        fired = pass.fired,
                        deferred = pass.deferred,
                        "deadline pass"
                    );
                    if pass.fired + pass.deferred >= self.config.batch {
                        continue;
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "the due deadlines cannot be read; trying again later")
                }
            }
            tokio::select! {
                () = &mut stop => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(self.config.poll_every) => {}
            }
        }
    }

    /// Sends `row`'s command and deletes the row once it was decided: `true` then, `false`
    /// when the command failed transiently and the row stays.
    async fn fire(&self, row: &ScheduledCommand) -> bool {
        let command = CommandMessage::new(
            row.target.clone(),
            row.command.clone(),
            CommandKind::Normal,
            row.body.clone(),
        )
        .with_request_id(row.request_id.clone())
        .with_header(DEADLINE_HEADER, row.name.clone());
        let outcome = self
            .gateway
            .send_and_wait(
                command,
                WaitPlan::processed().with_timeout(self.config.command_timeout),
            )
            .await;
        let decided = match &outcome {
            Ok(_) => true,
            Err(CommandResultError::Failed(result)) => is_decided(result),
            Err(_) => false,
        };
        if !decided {
            tracing::warn!(owner = %row.owner, deadline = row.name, request_id = row.request_id, error = ?outcome.err(), "a due deadline's command failed; firing it again later");
            return false;
        }
        if let Err(CommandResultError::Failed(result)) = &outcome {
            tracing::info!(owner = %row.owner, deadline = row.name, code = %result.error_code, "a due deadline's command was refused");
        }
        match self
            .deadlines
            .fired(&row.owner, &row.name, &row.request_id)
            .await
        {
            Ok(_) => true,
            Err(error) => {
                // Decided, not deleted: the next pass fires it again and replays the decision.
                tracing::warn!(owner = %row.owner, deadline = row.name, %error, "a fired deadline could not be deleted");
                false
            }
        }
    }

    fn waits(&self, row: &ScheduledCommand, now: i64) -> bool {
        let key = (row.owner.clone(), row.name.clone(), row.request_id.clone());
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        match waiting.get(&key) {
            Some(until) if *until > now => true,
            Some(_) => {
                waiting.remove(&key);
                false
            }
            None => false,
        }
    }

    fn defer(&self, row: &ScheduledCommand, now: i64) {
        let retry = i64::try_from(self.config.retry_after.as_millis()).unwrap_or(i64::MAX);
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                (row.owner.clone(), row.name.clone(), row.request_id.clone()),
                now.saturating_add(retry),
            );
    }
}

/// Whether a failed command was decided for good: its request id was decided before (the
/// deadline fired already: this firing replays that decision), a recorded rejection, or a
/// command this build cannot send at all (a deadline of a command since removed), which no
/// retry mends.
fn is_decided(result: &CommandResult) -> bool {
    is_recorded_rejection(&result.error_code)
        || matches!(
            result.error_code,
            ErrorCode::DuplicateRequestId
                | ErrorCode::CommandValidation
                | ErrorCode::BadRequest
                | ErrorCode::IllegalArgument
        )
}
