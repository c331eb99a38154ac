//! Waiting for a command's stages: plans, the coordinator that routes stage signals to the
//! caller that waits, and the handle a caller holds.
//!
//! A caller's wait handle is registered before the command is sent and removed when the handle
//! is dropped: on completion, on timeout, or when the caller goes away (SPEC ST-6). Dropping a
//! handle ends only that caller's observation; the command goes on.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use foldhash::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

use super::chain::{chain_stage, ChainProgress, WaitTail, CHAIN_HEADER};
use wow_core::command::{CommandResult, CommandStage, WaitFunction};

/// How long a caller waits when it names no timeout.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// What a caller waits for: a stage, optionally of one named consumer, within a timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitPlan {
    /// The stage whose signal ends the wait.
    pub stage: CommandStage,
    /// How long to wait in all, from the send.
    pub timeout: Duration,
    /// Wait for the signal of this consumer (a projection, processor or saga: Wow's
    /// `Command-Wait-Processor` and `-Function`) instead of the signal that the whole stage
    /// is complete. Only the downstream stages (`PROJECTED`, `EVENT_HANDLED`,
    /// `SAGA_HANDLED`) have per-consumer signals.
    pub function: Option<WaitFunction>,
    /// A chained wait (Wow's `Command-Wait-Tail-*`): after the saga's `SAGA_HANDLED` signal
    /// (of the saga `function` names, or of the whole stage), wait until every command that
    /// saga sent reached the tail. Only with `stage` = `SAGA_HANDLED`.
    pub tail: Option<WaitTail>,
}

impl WaitPlan {
    /// Wait for `stage`, 30 s at most.
    pub fn new(stage: CommandStage) -> Self {
        Self {
            stage,
            timeout: DEFAULT_WAIT_TIMEOUT,
            function: None,
            tail: None,
        }
    }

    /// Wait until the bus accepted the command.
    pub fn sent() -> Self {
        Self::new(CommandStage::Sent)
    }

    /// Wait until the command was processed and its stream appended (the default).
    pub fn processed() -> Self {
        Self::new(CommandStage::Processed)
    }

    /// Sets the timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Waits for the signal of the consumer named `processor`.
    pub fn for_function(self, processor: impl Into<String>) -> Self {
        self.for_wait_function(WaitFunction::processor(processor))
    }

    /// Waits for the signal of the consumer `function` matches.
    pub fn for_wait_function(mut self, function: WaitFunction) -> Self {
        self.function = Some(function);
        self
    }

    /// Waits, after `SAGA_HANDLED`, for every command the saga sent to reach `tail` (a
    /// chained wait); the stage must be `SAGA_HANDLED`, else the gateway refuses the plan.
    pub fn with_tail(mut self, tail: WaitTail) -> Self {
        self.tail = Some(tail);
        self
    }

    /// Whether `result` is the signal this plan waits for: its stage, and the named consumer's
    /// signal (or, with none named, the signal that the whole stage is complete).
    fn awaits(&self, result: &CommandResult) -> bool {
        let function = match (&self.function, &result.function) {
            (None, None) => true,
            (Some(wanted), Some(function)) => wanted.matches(function),
            _ => false,
        };
        result.stage == self.stage && function
    }

    /// Whether `result` ends a wait under this plan: the awaited signal, or a failure of an
    /// earlier or equal stage, or a processed command that recorded nothing (no later stage
    /// will follow it).
    ///
    /// A wait for a named consumer ends early only when the command itself failed (at `SENT`
    /// or `PROCESSED`): another consumer's failure does not stop the named one from running.
    pub fn is_final(&self, result: &CommandResult) -> bool {
        let stage_signal = result.function.is_none();
        if self.awaits(result) {
            return true;
        }
        let last_failing_stage = if self.function.is_some() {
            CommandStage::Processed.min(self.stage)
        } else {
            self.stage
        };
        if !result.succeeded && stage_signal && result.stage <= last_failing_stage {
            return true;
        }
        stage_signal
            && result.stage == CommandStage::Processed
            && self.stage > CommandStage::Processed
            && result.result.get(RECORDED) == Some(&serde_json::Value::Bool(false))
    }
}

/// The `result` key that says whether a processed command recorded a stream (SPEC RQ-13).
pub const RECORDED: &str = "recorded";

/// The command header naming the last stage its caller waits for. Components skip building
/// signals of later stages; a command without it (from a gateway that predates it) gets
/// every signal.
pub const WAIT_STAGE_HEADER: &str = "wow.wait.stage";

/// The command header carrying the wire protocol version of the gateway that sent it
/// (SPEC RQ-14). A command without it comes from a gateway that predates it: version 0.
pub const PROTOCOL_HEADER: &str = "wow.protocol";

/// The wire protocol version this build speaks. Processing nodes accept this version and
/// every older one, so upgrade processing nodes first, then gateway-only services.
pub const PROTOCOL_VERSION: u32 = 1;

/// Whether a signal of `stage` may be awaited for a command or stream with `header`: by its
/// own caller, or by the caller of a chained wait it is a link of.
pub fn signal_wanted(
    header: &std::collections::BTreeMap<String, String>,
    stage: CommandStage,
) -> bool {
    match header
        .get(WAIT_STAGE_HEADER)
        .map(|s| s.parse::<CommandStage>())
    {
        Some(Ok(awaited)) => {
            stage <= awaited || chain_stage(header).is_some_and(|chained| stage <= chained)
        }
        _ => true,
    }
}

/// Where stage signals are sent: the transport back to waiting callers.
pub trait WaitNotifier: Send + Sync + std::fmt::Debug {
    /// Delivers `result` to the caller waiting on `result.wait_command_id`, if one still
    /// waits; otherwise drops it.
    fn notify(&self, result: CommandResult);

    /// Delivers `result`, a signal of the command or stream whose header is `header`. A
    /// notifier that sends signals across processes reads there where the caller listens
    /// (the command's header travels with its streams, so any process that handles them
    /// knows). Default: [`notify`](Self::notify).
    fn notify_from(
        &self,
        header: &std::collections::BTreeMap<String, String>,
        result: CommandResult,
    ) {
        let _ = header;
        self.notify(result);
    }
}

/// Delivers `result`, a signal of the command or stream with `header`, to its own waiter and,
/// when the command is a link of a chained wait, to the chain's waiter too.
pub(crate) fn notify_signal(
    notifier: &dyn WaitNotifier,
    header: &std::collections::BTreeMap<String, String>,
    result: CommandResult,
) {
    if let (Some(waiting), Some(stage)) = (header.get(CHAIN_HEADER), chain_stage(header)) {
        if result.stage <= stage {
            let mut linked = result.clone();
            linked.wait_command_id = waiting.clone();
            notifier.notify_from(header, linked);
        }
    }
    notifier.notify_from(header, result);
}

const SHARDS: usize = 32;

/// Where the signals of one wait collect until its handle takes them.
#[derive(Debug, Default)]
struct Slot {
    results: Mutex<Vec<CommandResult>>,
    arrived: Notify,
}

impl Slot {
    fn push(&self, result: CommandResult) {
        self.results
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(result);
        // A permit is kept when nobody waits yet, so no signal is missed.
        self.arrived.notify_one();
    }

    fn drain_into(&self, held: &mut Vec<CommandResult>) -> bool {
        let mut results = self.results.lock().unwrap_or_else(|p| p.into_inner());
        let any = !results.is_empty();
        held.append(&mut results);
        any
    }
}

type Waiters = HashMap<String, Vec<(u64, Arc<Slot>)>>;

/// Routes stage signals to the callers waiting for them, keyed by command id. Several
/// handles may wait on one command (a caller and an observer); each gets every signal.
#[derive(Debug)]
pub struct WaitCoordinator {
    shards: Vec<Mutex<Waiters>>,
    hasher: RandomState,
    next_token: AtomicU64,
}

impl Default for WaitCoordinator {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            hasher: RandomState::default(),
            next_token: AtomicU64::new(0),
        }
    }
}

impl WaitCoordinator {
    /// A coordinator with no waiters.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn shard(&self, command_id: &str) -> MutexGuard<'_, Waiters> {
        let index = (self.hasher.hash_one(command_id) % SHARDS as u64) as usize;
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers a wait for `command_id` under `plan`, before the command is sent; the wait
    /// lasts as long as the handle.
    pub fn register(self: &Arc<Self>, command_id: &str, plan: WaitPlan) -> WaitHandle {
        self.register_with(command_id, plan, false)
    }

    /// Registers a wait for a command already sent (an observer joining late): signals are
    /// yielded in stage order from `PROCESSED` on, without waiting for `SENT`.
    pub fn observe(self: &Arc<Self>, command_id: &str, plan: WaitPlan) -> WaitHandle {
        self.register_with(command_id, plan, true)
    }

    fn register_with(
        self: &Arc<Self>,
        command_id: &str,
        plan: WaitPlan,
        sent_seen: bool,
    ) -> WaitHandle {
        let slot = Arc::new(Slot::default());
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let chain = plan.tail.as_ref().map(ChainProgress::new);
        // The plan each command a chained wait follows is waited under.
        let tail_plan = plan.tail.as_ref().map(|tail| WaitPlan {
            stage: tail.stage,
            timeout: plan.timeout,
            function: tail.function.clone(),
            tail: None,
        });
        self.shard(command_id)
            .entry(command_id.to_owned())
            .or_default()
            .push((token, slot.clone()));
        WaitHandle {
            coordinator: self.clone(),
            command_id: command_id.to_owned(),
            token,
            plan,
            slot,
            held: Vec::new(),
            sent_seen,
            processed_seen: false,
            finished: false,
            chain,
            tail_plan,
        }
    }

    /// How many waits are registered now (0 when every handle was released).
    pub fn waiting(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                shard
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .values()
                    .map(Vec::len)
                    .sum::<usize>()
            })
            .sum()
    }

    fn unregister(&self, command_id: &str, token: u64) {
        let mut shard = self.shard(command_id);
        if let Some(waiters) = shard.get_mut(command_id) {
            waiters.retain(|(t, _)| *t != token);
            if waiters.is_empty() {
                shard.remove(command_id);
            }
        }
    }
}

impl WaitNotifier for WaitCoordinator {
    fn notify(&self, result: CommandResult) {
        let shard = self.shard(&result.wait_command_id);
        if let Some(waiters) = shard.get(&result.wait_command_id) {
            if let [(_, only)] = waiters.as_slice() {
                only.push(result);
            } else {
                for (_, slot) in waiters {
                    slot.push(result.clone());
                }
            }
        }
    }
}

/// One caller's registered wait. Yields results in stage order and unregisters on drop.
#[derive(Debug)]
pub struct WaitHandle {
    coordinator: Arc<WaitCoordinator>,
    command_id: String,
    token: u64,
    plan: WaitPlan,
    slot: Arc<Slot>,
    held: Vec<CommandResult>,
    sent_seen: bool,
    processed_seen: bool,
    finished: bool,
    /// A chained wait's progress (the plan has a tail).
    chain: Option<ChainProgress>,
    /// The plan of each command a chained wait follows.
    tail_plan: Option<WaitPlan>,
}

impl WaitHandle {
    /// The plan this handle waits under.
    pub fn plan(&self) -> &WaitPlan {
        &self.plan
    }

    /// The command id it waits on.
    pub fn command_id(&self) -> &str {
        &self.command_id
    }

    /// Whether the final result was yielded.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The next result in stage order, or `None` after the final one.
    ///
    /// Signals race each other across components; a later stage's signal is held until
    /// `SENT` and `PROCESSED` were yielded, so callers see the stages in order.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a result not yet yielded stays in the handle.
    pub async fn next(&mut self) -> Option<CommandResult> {
        loop {
            if self.finished {
                return None;
            }
            if let Some(result) = self.take_releasable() {
                self.finished = self.take_final(&result);
                return Some(result);
            }
            let arrived = self.slot.arrived.notified();
            if !self.slot.drain_into(&mut self.held) {
                arrived.await;
            }
        }
    }

    /// Delivers a result locally, as if signalled (the gateway's own `SENT`).
    pub(crate) fn push(&mut self, result: CommandResult) {
        self.held.push(result);
    }

    /// Takes `result` (the gateway's own `SENT`, before any signal is read) as if
    /// [`next`](Self::next) had yielded it: the caller keeps it, and no copy is held.
    pub(crate) fn take_local(&mut self, result: &CommandResult) {
        self.finished = self.take_final(result);
    }

    /// Takes `result`, about to be yielded: whether it is the last.
    fn take_final(&mut self, result: &CommandResult) -> bool {
        let own = result.command_id == self.command_id;
        if own {
            self.sent_seen |= result.stage == CommandStage::Sent;
            self.processed_seen |= result.stage >= CommandStage::Processed;
        }
        let plan_final = own && self.plan.is_final(result);
        // A chained plan's stage is SAGA_HANDLED: its awaited signal is the saga's.
        let saga_signal = self.plan.awaits(result);
        match &mut self.chain {
            None => plan_final,
            Some(chain) if !own => {
                let last = self
                    .tail_plan
                    .as_ref()
                    .is_some_and(|plan| plan.is_final(result));
                chain.on_link_signal(result, last)
            }
            // An earlier failure ends the chain; the saga's signal names what follows.
            Some(chain) => plan_final && (!saga_signal || chain.on_saga_signal(result)),
        }
    }

    fn take_releasable(&mut self) -> Option<CommandResult> {
        // A link's signal that belongs to no command of this chain (or reached a wait that
        // is no chain, an observer's) is dropped.
        let (own, chain) = (&self.command_id, &self.chain);
        self.held.retain(|r| {
            r.command_id == *own
                || chain
                    .as_ref()
                    .is_some_and(|chain| chain.releasable(r).is_some())
        });
        let releasable = |r: &CommandResult| {
            if r.command_id != self.command_id {
                return self
                    .chain
                    .as_ref()
                    .and_then(|chain| chain.releasable(r))
                    .unwrap_or(false);
            }
            match r.stage {
                CommandStage::Sent => true,
                CommandStage::Processed => self.sent_seen,
                _ => self.sent_seen && self.processed_seen,
            }
        };
        let index = self
            .held
            .iter()
            .enumerate()
            .filter(|(_, r)| releasable(r))
            .min_by_key(|(_, r)| r.stage)
            .map(|(index, _)| index)?;
        Some(self.held.remove(index))
    }
}

impl Drop for WaitHandle {
    fn drop(&mut self) {
        self.coordinator.unregister(&self.command_id, self.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wow_core::command::CommandKind;
    use wow_core::command::CommandMessage;
    use wow_core::AggregateId;
    use wow_core::ErrorCode;

    fn command() -> CommandMessage<()> {
        CommandMessage::new(
            AggregateId::new("bank", "account", "a", "t"),
            "deposit",
            CommandKind::Normal,
            (),
        )
    }

    #[tokio::test]
    async fn signals_arrive_in_stage_order_whatever_order_they_were_sent_in() {
        let coordinator = WaitCoordinator::new();
        let cmd = command();
        let mut handle = coordinator.register(&cmd.id, WaitPlan::new(CommandStage::Projected));
        coordinator.notify(CommandResult::success(&cmd, CommandStage::Projected));
        coordinator.notify(CommandResult::success(&cmd, CommandStage::Processed));
        handle.push(CommandResult::success(&cmd, CommandStage::Sent));
        let mut stages = Vec::new();
        while let Some(result) = handle.next().await {
            stages.push(result.stage);
        }
        assert_eq!(
            stages,
            vec![
                CommandStage::Sent,
                CommandStage::Processed,
                CommandStage::Projected
            ]
        );
    }

    #[tokio::test]
    async fn an_earlier_failure_ends_the_wait() {
        let coordinator = WaitCoordinator::new();
        let cmd = command();
        let mut handle = coordinator.register(&cmd.id, WaitPlan::new(CommandStage::SagaHandled));
        handle.push(CommandResult::success(&cmd, CommandStage::Sent));
        coordinator.notify(CommandResult::failure(
            &cmd,
            CommandStage::Processed,
            ErrorCode::NotFound,
            "missing",
        ));
        assert_eq!(handle.next().await.unwrap().stage, CommandStage::Sent);
        let last = handle.next().await.unwrap();
        assert!(!last.succeeded);
        assert!(handle.next().await.is_none());
    }

    #[tokio::test]
    async fn dropping_the_handle_unregisters_it() {
        let coordinator = WaitCoordinator::new();
        let cmd = command();
        let handle = coordinator.register(&cmd.id, WaitPlan::processed());
        assert_eq!(coordinator.waiting(), 1);
        drop(handle);
        assert_eq!(coordinator.waiting(), 0);
        // A late signal for a released wait is dropped quietly.
        coordinator.notify(CommandResult::success(&cmd, CommandStage::Processed));
    }
}
