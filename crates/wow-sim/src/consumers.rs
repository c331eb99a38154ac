//! The downstream consumers of a run and the faults around them.
//!
//! A projection of balances and an event processor writing an outbox row per event, both
//! through the real [`InMemoryProcessedMessages`] (effect and record in one transaction,
//! keyed by event id, SPEC DS-2); a saga crediting a reward for every large deposit, through
//! the real [`SagaContext`] (request ids derived from the event, SPEC DS-3), which also
//! completes transfers. Each is wrapped so that it can be down, or crash after its write and
//! before its acknowledgement; either way the stream is redelivered later through the real
//! [`EventDispatcher`]. The saga is also run again on streams it handled (`SagaRerun`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use wow_core::command::REPLAYED;
use wow_core::event::{ConsumerError, EventConsumer, InMemoryProcessedMessages};
use wow_core::eventsourcing::is_recorded_rejection;
use wow_core::saga::{saga_request_id, Saga, SagaContext, StepError};
use wow_core::{
    AggregateId, CommandMessage, CommandResult, DomainEvent, DomainEventStream, ErrorCode,
};
use wow_runtime::command::RECORDED;
use wow_runtime::event::EventDispatcher;

use crate::chaos::{Chaos, FaultKind};
use crate::domain::{
    balance_delta, Amount, Held, HoldRef, Receive, Wallet, WalletCommand, WalletError, WalletEvent,
    REWARDS, REWARD_AMOUNT, REWARD_THRESHOLD,
};

/// The projection's read model: balances, and how often each event was applied.
#[derive(Debug, Default, Clone)]
pub(crate) struct Balances {
    pub(crate) balances: BTreeMap<String, i64>,
    pub(crate) applied: BTreeMap<String, u32>,
}

/// The outbox: one row per event (its id), in the order written.
pub(crate) type Outbox = Vec<String>;

/// Every delivery a consumer acknowledged, in the order acknowledged: (consumer, wallet,
/// version). The checks read it for SPEC DS-5.
pub(crate) type HandledOrder = Arc<Mutex<Vec<(String, String, u64)>>>;

/// Writes down that `consumer` acknowledged `stream`.
fn note_handled(order: &HandledOrder, consumer: &str, stream: &DomainEventStream) {
    order.lock().unwrap_or_else(|p| p.into_inner()).push((
        consumer.to_owned(),
        stream.aggregate_id.id.clone(),
        stream.version,
    ));
}

/// Redelivers streams whose consumer failed, after a while, through the real dispatcher; and
/// runs the saga again on streams it handled (the `SagaRerun` fault).
#[derive(Debug)]
pub(crate) struct Redelivery {
    chaos: Arc<Chaos>,
    dispatcher: OnceLock<Weak<EventDispatcher>>,
    /// Streams with a redelivery (or a saga re-run) scheduled: a second failure before it
    /// runs adds none (a broker redelivers a message once per failure of its consumer group,
    /// not once per consumer), which keeps redeliveries from multiplying.
    scheduled: Arc<Mutex<BTreeSet<String>>>,
}

impl Redelivery {
    pub(crate) fn new(chaos: Arc<Chaos>) -> Self {
        Self {
            chaos,
            dispatcher: OnceLock::new(),
            scheduled: Arc::new(Mutex::new(BTreeSet::new())),
        }
    }

    pub(crate) fn set_dispatcher(&self, dispatcher: &Arc<EventDispatcher>) {
        let _ = self.dispatcher.set(Arc::downgrade(dispatcher));
    }

    /// Reserves `key` for one scheduled delivery; `false` when one is already pending.
    fn reserve(&self, key: String) -> bool {
        self.scheduled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key)
    }

    /// Delivers `stream` again to every consumer, 10..500 ms of virtual time from now.
    pub(crate) fn schedule(&self, stream: &DomainEventStream, why: &str) {
        let shown = format!("{}@v{}", stream.aggregate_id.id, stream.version);
        let stream = stream.clone();
        self.later(
            stream.id.clone(),
            (10, 500),
            |delay| format!("  redeliver {shown} in {delay}ms ({why})"),
            move |dispatcher, _| async move { dispatcher.dispatch(&stream).await },
        );
    }

    /// Runs the saga `saga` again on `stream`, 200..3000 ms of virtual time from now, through
    /// the dispatcher's `run_consumer` (as a compensation retry or a catch-up does).
    pub(crate) fn rerun_saga(&self, stream: &DomainEventStream, saga: &str) {
        let on = format!(
            "saga {saga} on {}@v{}",
            stream.aggregate_id.id, stream.version
        );
        let again = format!(
            "saga {saga} runs again on {}@v{}",
            stream.aggregate_id.id, stream.version
        );
        let (stream, saga) = (stream.clone(), saga.to_owned());
        self.later(
            format!("rerun {saga} {}", stream.id),
            (200, 3000),
            |delay| format!("  re-run {on} in {delay}ms"),
            move |dispatcher, chaos| async move {
                if let Some(consumer) = dispatcher.consumer(&saga) {
                    chaos.note(again);
                    let _ = dispatcher.run_consumer(&consumer, &stream).await;
                }
            },
        );
    }

    /// Runs `work` once on the dispatcher after a delay drawn from `range` (ms of virtual
    /// time), unless one is pending under `key` already; `note` says what was scheduled.
    fn later<Work, Done>(
        &self,
        key: String,
        (low, high): (u64, u64),
        note: impl FnOnce(u64) -> String,
        work: Work,
    ) where
        Work: FnOnce(Arc<EventDispatcher>, Arc<Chaos>) -> Done + Send + 'static,
        Done: std::future::Future<Output = ()> + Send,
    {
        let Some(dispatcher) = self.dispatcher.get().cloned() else {
            return;
        };
        if !self.reserve(key.clone()) {
            return;
        }
        let delay = self.chaos.range(low, high);
        self.chaos.note(note(delay));
        let chaos = self.chaos.clone();
        let scheduled = self.scheduled.clone();
        chaos.begin_pending();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            scheduled
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&key);
            if let Some(dispatcher) = dispatcher.upgrade() {
                work(dispatcher, chaos.clone()).await;
            }
            chaos.end_pending();
        });
    }
}

fn wallet_events(stream: &DomainEventStream) -> Vec<(&DomainEvent, WalletEvent)> {
    stream
        .body
        .iter()
        .filter_map(|event| event.decode::<WalletEvent>().ok().map(|e| (event, e)))
        .collect()
}

/// The balances projection (stage `PROJECTED`).
#[derive(Debug)]
pub(crate) struct BalanceProjection {
    pub(crate) model: Arc<InMemoryProcessedMessages<Balances>>,
}

#[async_trait]
impl EventConsumer for BalanceProjection {
    fn name(&self) -> &str {
        "balances"
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        for (event, typed) in wallet_events(stream) {
            let wallet = stream.aggregate_id.id.clone();
            self.model
                .process_once("balances", &event.id, |model| {
                    *model.balances.entry(wallet).or_default() += balance_delta(&typed);
                    *model.applied.entry(event.id.clone()).or_default() += 1;
                    Ok(())
                })
                .map_err(|e| ConsumerError::internal(e.to_string()))?;
        }
        Ok(())
    }
}

/// The outbox processor (stage `EVENT_HANDLED`): one outbox row per event, once.
#[derive(Debug)]
pub(crate) struct OutboxProcessor {
    pub(crate) outbox: Arc<InMemoryProcessedMessages<Outbox>>,
}

#[async_trait]
impl EventConsumer for OutboxProcessor {
    fn name(&self) -> &str {
        "outbox"
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        for event in &stream.body {
            self.outbox
                .process_once("outbox", &event.id, |rows| {
                    rows.push(event.id.clone());
                    Ok(())
                })
                .map_err(|e| ConsumerError::internal(e.to_string()))?;
        }
        Ok(())
    }
}

/// A consumer that can be down or crash between its write and its acknowledgement.
#[derive(Debug)]
pub(crate) struct Flaky<C> {
    pub(crate) inner: C,
    pub(crate) chaos: Arc<Chaos>,
    pub(crate) redelivery: Arc<Redelivery>,
    pub(crate) order: HandledOrder,
}

#[async_trait]
impl<C: EventConsumer> EventConsumer for Flaky<C> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        let label = || {
            format!(
                "{} on {}@v{}",
                self.inner.name(),
                stream.aggregate_id.id,
                stream.version
            )
        };
        if self.chaos.inject(FaultKind::ConsumerDown, label) {
            self.redelivery.schedule(stream, "consumer down");
            return Err(ConsumerError::new(
                ErrorCode::ServiceUnavailable,
                "consumer down",
            ));
        }
        if let Err(error) = self.inner.handle(stream).await {
            self.redelivery.schedule(stream, "consumer failed");
            return Err(error);
        }
        if self.chaos.inject(FaultKind::ConsumerCrashAfterWrite, label) {
            self.redelivery.schedule(stream, "crashed before ack");
            return Err(ConsumerError::internal("crashed after writing, before ack"));
        }
        note_handled(&self.order, self.inner.name(), stream);
        Ok(())
    }
}

/// The wallet saga (stage `SAGA_HANDLED`), through the real [`SagaContext`] (request ids
/// derived from the event, SPEC DS-3):
///
/// - a deposit of at least [`REWARD_THRESHOLD`] into a wallet other than the rewards wallet
///   credits 1 to the rewards wallet (request id index 0);
/// - a transfer's hold (`TransferHeld` on the source) sends `Receive` to the target (index
///   0); when it is appended (or was before) the hold is confirmed, when it is rejected for
///   good (the target does not exist: `NotFound`, SPEC ID-6) the hold is cancelled (index 1).
///   Any other failure fails the saga, which runs again later: redelivery, compensation.
#[derive(Debug)]
pub(crate) struct WalletSaga {
    pub(crate) chaos: Arc<Chaos>,
    /// Every result the gateway reported to the saga as `PROCESSED` and succeeded.
    pub(crate) reported: Arc<Mutex<Vec<CommandResult>>>,
}

/// The wallet saga's name.
pub(crate) const SAGA: &str = "wallet";

/// Whether `event` of a stream of `wallet` makes the saga send a reward.
pub(crate) fn earns_reward(wallet: &str, event: &WalletEvent) -> bool {
    wallet != REWARDS && matches!(event, WalletEvent::Deposited(m) if m.amount >= REWARD_THRESHOLD)
}

/// Whether the wallet saga sends commands for `event` of a stream of `wallet`.
pub(crate) fn saga_acts_on(wallet: &str, event: &WalletEvent) -> bool {
    earns_reward(wallet, event) || matches!(event, WalletEvent::TransferHeld(_))
}

fn sibling(of: &AggregateId, id: &str) -> AggregateId {
    AggregateId::new(
        of.context_name.clone(),
        of.aggregate_name.clone(),
        id,
        of.tenant_id.clone(),
    )
}

impl WalletSaga {
    /// The typed `body` for the wallet `to`, with a command id from the run's seed.
    fn command(&self, to: AggregateId, body: WalletCommand) -> CommandMessage<WalletCommand> {
        let mut command = CommandMessage::of(to, body);
        command.id = self.chaos.next_id("saga-cmd");
        command
    }

    fn report(&self, result: CommandResult) {
        if result.succeeded && result.result.get(RECORDED) == Some(&true.into()) {
            self.reported
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(result);
        }
    }

    fn failed(&self, command_id: &str, at: &str, error: &StepError<WalletError>) -> ConsumerError {
        self.chaos.note(format!(
            "  saga command {command_id} for {at}: {}",
            error.error_code()
        ));
        ConsumerError::new(
            error.error_code().clone(),
            format!("saga command {command_id} did not complete"),
        )
    }

    async fn reward(
        &self,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let at = format!("{}@v{}", stream.aggregate_id.id, stream.version);
        let rewards = sibling(&stream.aggregate_id, REWARDS);
        let command = self.command(
            rewards,
            WalletCommand::Credit(Amount {
                amount: REWARD_AMOUNT,
            }),
        );
        self.chaos
            .alias(saga_request_id(ctx.event_id(), 0), format!("reward<{at}>"));
        let command_id = command.id.clone();
        match ctx.send_message::<Wallet>(command).await {
            Ok(result) => {
                self.report(result);
                Ok(())
            }
            Err(error) => Err(self.failed(&command_id, &at, &error)),
        }
    }

    async fn transfer(
        &self,
        held: &Held,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let source = &stream.aggregate_id;
        let at = format!("{}@v{}", source.id, stream.version);
        self.chaos
            .alias(saga_request_id(ctx.event_id(), 0), format!("receive<{at}>"));
        self.chaos
            .alias(saga_request_id(ctx.event_id(), 1), format!("settle<{at}>"));
        let receive = self.command(
            sibling(source, &held.to),
            WalletCommand::Receive(Receive {
                from: source.id.clone(),
                hold: held.hold.clone(),
                amount: held.amount,
            }),
        );
        let command_id = receive.id.clone();
        let credited = match ctx.send_message::<Wallet>(receive).await {
            // Appended now, or before (`DuplicateRequestId` comes back as `Ok`).
            Ok(result) => {
                self.report(result);
                true
            }
            Err(error) => match recorded_rejection(&error) {
                // Rejected for good (SPEC ID-6): every later message gets this same answer.
                Some(result) => {
                    self.chaos.note(format!(
                        "  transfer {at} to {}: credit rejected with {}{}; cancel the hold",
                        held.to,
                        result.error_code,
                        if result.result.get(REPLAYED) == Some(&true.into()) {
                            " (replayed)"
                        } else {
                            ""
                        }
                    ));
                    false
                }
                None => return Err(self.failed(&command_id, &at, &error)),
            },
        };
        let hold = HoldRef {
            hold: held.hold.clone(),
        };
        let settle = self.command(
            source.clone(),
            if credited {
                WalletCommand::ConfirmHold(hold)
            } else {
                WalletCommand::CancelHold(hold)
            },
        );
        let command_id = settle.id.clone();
        match ctx.send_message::<Wallet>(settle).await {
            Ok(result) => {
                self.report(result);
                Ok(())
            }
            Err(error) => Err(self.failed(&command_id, &at, &error)),
        }
    }
}

/// The result of a step rejected for good (a rule of the wallet, a missing wallet, or any
/// other decision a store records, SPEC ID-6); `None` for a failure that may pass.
fn recorded_rejection(error: &StepError<WalletError>) -> Option<&CommandResult> {
    error
        .result()
        .filter(|result| is_recorded_rejection(&result.error_code))
}

#[async_trait]
impl Saga for WalletSaga {
    type Aggregate = Wallet;

    fn name(&self) -> &str {
        SAGA
    }

    async fn on_event(
        &self,
        event: &WalletEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        match event {
            WalletEvent::TransferHeld(held) => self.transfer(held, stream, ctx).await,
            typed if earns_reward(&stream.aggregate_id.id, typed) => self.reward(stream, ctx).await,
            _ => Ok(()),
        }
    }
}

/// A saga that can be down, or crash after sending and before acknowledging.
#[derive(Debug)]
pub(crate) struct FlakySaga<S> {
    pub(crate) inner: S,
    pub(crate) chaos: Arc<Chaos>,
    pub(crate) redelivery: Arc<Redelivery>,
    pub(crate) order: HandledOrder,
}

#[async_trait]
impl<S: Saga<Aggregate = Wallet>> Saga for FlakySaga<S> {
    type Aggregate = Wallet;

    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn on_event(
        &self,
        event: &WalletEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let label = || format!("saga on {}@v{}", stream.aggregate_id.id, stream.version);
        if self.chaos.inject(FaultKind::ConsumerDown, label) {
            self.redelivery.schedule(stream, "saga down");
            return Err(ConsumerError::new(
                ErrorCode::ServiceUnavailable,
                "saga down",
            ));
        }
        if let Err(error) = self.inner.on_event(event, stream, ctx).await {
            self.redelivery.schedule(stream, "saga failed");
            return Err(error);
        }
        if self.chaos.inject(FaultKind::ConsumerCrashAfterWrite, label) {
            self.redelivery.schedule(stream, "saga crashed before ack");
            return Err(ConsumerError::internal(
                "saga crashed after sending, before ack",
            ));
        }
        note_handled(&self.order, self.inner.name(), stream);
        let acted = saga_acts_on(&stream.aggregate_id.id, event);
        if acted && self.chaos.inject(FaultKind::SagaRerun, label) {
            self.redelivery.rerun_saga(stream, self.inner.name());
        }
        Ok(())
    }
}

/// The typed events of a stream of the wallet aggregate, for the checks.
pub(crate) fn typed_events(stream: &DomainEventStream) -> Vec<(String, WalletEvent)> {
    wallet_events(stream)
        .into_iter()
        .map(|(event, typed)| (event.id.clone(), typed))
        .collect()
}
