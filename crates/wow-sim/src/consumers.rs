//! The downstream consumers of a run and the faults around them.
//!
//! A projection of balances and an event processor writing an outbox row per event, both
//! through the real [`InMemoryProcessedMessages`] (effect and record in one transaction,
//! keyed by event id, SPEC DS-2); a saga crediting a reward for every large deposit, through
//! the real [`SagaContext`] (request ids derived from the event, SPEC DS-3). Each is wrapped
//! so that it can be down, or crash after its write and before its acknowledgement; either
//! way the stream is redelivered later through the real [`EventDispatcher`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use wow_core::command::RECORDED;
use wow_core::event::{ConsumerError, EventConsumer, EventDispatcher, InMemoryProcessedMessages};
use wow_core::saga::{saga_request_id, Saga, SagaContext};
use wow_core::{
    AggregateId, CommandMessage, CommandResult, DomainEvent, DomainEventStream, ErrorCode,
};

use crate::chaos::{Chaos, FaultKind};
use crate::domain::{balance_delta, Amount, WalletCommand, WalletEvent, REWARDS, REWARD_THRESHOLD};

/// The projection's read model: balances, and how often each event was applied.
#[derive(Debug, Default, Clone)]
pub(crate) struct Balances {
    pub(crate) balances: BTreeMap<String, i64>,
    pub(crate) applied: BTreeMap<String, u32>,
}

/// The outbox: one row per event (its id), in the order written.
pub(crate) type Outbox = Vec<String>;

/// Redelivers streams whose consumer failed, after a while, through the real dispatcher.
#[derive(Debug)]
pub(crate) struct Redelivery {
    chaos: Arc<Chaos>,
    dispatcher: OnceLock<Weak<EventDispatcher>>,
    pending: Arc<AtomicUsize>,
    /// Streams with a redelivery scheduled: a second failure before it runs adds none (a
    /// broker redelivers a message once per failure of its consumer group, not once per
    /// consumer), which keeps redeliveries from multiplying.
    scheduled: Arc<Mutex<BTreeSet<String>>>,
}

impl Redelivery {
    pub(crate) fn new(chaos: Arc<Chaos>) -> Self {
        Self {
            chaos,
            dispatcher: OnceLock::new(),
            pending: Arc::new(AtomicUsize::new(0)),
            scheduled: Arc::new(Mutex::new(BTreeSet::new())),
        }
    }

    pub(crate) fn set_dispatcher(&self, dispatcher: &Arc<EventDispatcher>) {
        let _ = self.dispatcher.set(Arc::downgrade(dispatcher));
    }

    /// Redeliveries scheduled and not yet run.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Delivers `stream` again to every consumer, 10..500 ms of virtual time from now.
    pub(crate) fn schedule(&self, stream: &DomainEventStream, why: &str) {
        let Some(dispatcher) = self.dispatcher.get().cloned() else {
            return;
        };
        if !self
            .scheduled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(stream.id.clone())
        {
            return;
        }
        let delay = self.chaos.range(10, 500);
        self.chaos.note(format!(
            "  redeliver {}@v{} in {delay}ms ({why})",
            stream.aggregate_id.id, stream.version
        ));
        let stream = stream.clone();
        let pending = self.pending.clone();
        let scheduled = self.scheduled.clone();
        pending.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            scheduled
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&stream.id);
            if let Some(dispatcher) = dispatcher.upgrade() {
                dispatcher.dispatch(&stream).await;
            }
            pending.fetch_sub(1, Ordering::SeqCst);
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
        Ok(())
    }
}

/// The reward saga (stage `SAGA_HANDLED`): a deposit of at least [`REWARD_THRESHOLD`] into a
/// wallet other than the rewards wallet credits 1 to the rewards wallet.
#[derive(Debug)]
pub(crate) struct RewardSaga {
    pub(crate) chaos: Arc<Chaos>,
    /// Every result the gateway reported to the saga as `PROCESSED` and succeeded.
    pub(crate) reported: Arc<Mutex<Vec<CommandResult>>>,
}

/// Whether `event` of a stream of `wallet` makes the saga send a reward.
pub(crate) fn earns_reward(wallet: &str, event: &WalletEvent) -> bool {
    wallet != REWARDS && matches!(event, WalletEvent::Deposited(m) if m.amount >= REWARD_THRESHOLD)
}

#[async_trait]
impl Saga for RewardSaga {
    fn name(&self) -> &str {
        "rewards"
    }

    async fn on_event(
        &self,
        event: &DomainEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let Ok(typed) = event.decode::<WalletEvent>() else {
            return Ok(());
        };
        if !earns_reward(&stream.aggregate_id.id, &typed) {
            return Ok(());
        }
        let rewards = AggregateId::new(
            stream.aggregate_id.context_name.clone(),
            stream.aggregate_id.aggregate_name.clone(),
            REWARDS,
            stream.aggregate_id.tenant_id.clone(),
        );
        let mut command = CommandMessage::of(rewards, WalletCommand::Credit(Amount { amount: 1 }))
            .into_json()
            .map_err(|e| ConsumerError::internal(e.to_string()))?;
        command.id = self.chaos.next_id("saga-cmd");
        self.chaos.alias(
            saga_request_id(&event.id, 0),
            format!("reward<{}@v{}>", stream.aggregate_id.id, stream.version),
        );
        let command_id = command.id.clone();
        match ctx.send(command).await {
            Ok(result) => {
                if result.succeeded && result.result.get(RECORDED) == Some(&true.into()) {
                    self.reported
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(result);
                }
                Ok(())
            }
            Err(error) => {
                self.chaos.note(format!(
                    "  saga command {command_id} for {}@v{}: {}",
                    stream.aggregate_id.id,
                    stream.version,
                    error.error_code()
                ));
                Err(ConsumerError::new(
                    error.error_code().clone(),
                    "the reward credit did not complete",
                ))
            }
        }
    }
}

/// A saga that can be down, or crash after sending and before acknowledging.
#[derive(Debug)]
pub(crate) struct FlakySaga<S> {
    pub(crate) inner: S,
    pub(crate) chaos: Arc<Chaos>,
    pub(crate) redelivery: Arc<Redelivery>,
}

#[async_trait]
impl<S: Saga> Saga for FlakySaga<S> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn on_event(
        &self,
        event: &DomainEvent,
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
