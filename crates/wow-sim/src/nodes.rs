//! The processing nodes of a run and the transports around them, under faults.
//!
//! Each node is a real [`DefaultCommandHandler`] fed by its own real [`InMemoryCommandBus`]
//! (one partition, so a node handles its commands in order). [`FaultyCommandBus`] routes a
//! command to the node that owns its aggregate — by a stable hash plus a rebalance epoch, so
//! a rebalance moves every aggregate to another node and a resend lands there. Restarting a
//! node subscribes a fresh handler (new Bloom filters, empty cache) to its bus, as
//! [`wow_runtime::pipeline::LocalPipeline::restart_node`] does; a command already being handled
//! by the old one finishes there, like a slow process that has not died yet.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use wow_core::aggregate::AggregateRegistry;
use wow_core::command::{
    CommandBus, CommandBusError, InMemoryCommandBus, JsonCommand, ORIGINAL_COMMAND_ID, REPLAYED,
};
use wow_core::event::{DomainEventBus, EventBusError};
use wow_core::eventsourcing::{is_recorded_rejection, EventStore};
use wow_core::{AggregateId, CommandResult, CommandStage, DomainEventStream, ErrorCode};
use wow_runtime::command::{
    DefaultCommandHandler, InFlightRequests, WaitCoordinator, WaitNotifier,
};
use wow_runtime::event::InMemoryDomainEventBus;
use wow_runtime::idempotency::{
    BloomIdempotencyCheckerProvider, DefaultRequestIdChecker, EventStoreRequestIdExistenceChecker,
    IdempotencyConfig,
};
use wow_runtime::metrics::PipelineMetrics;

use crate::chaos::{Chaos, FaultKind, Logged, SimClock, SimIds};

/// Command ids whose node crashed after the append: their `PROCESSED` signal never leaves.
pub(crate) type Crashed = Arc<Mutex<BTreeSet<String>>>;

/// Every command the bus was handed, by command id: what it delivers again when it redelivers
/// a rejected message.
pub(crate) type SentCommands = Arc<Mutex<BTreeMap<String, JsonCommand>>>;

/// What every node of a run is built from.
#[derive(Debug)]
pub(crate) struct NodeParts {
    pub(crate) registry: AggregateRegistry,
    pub(crate) store: Arc<dyn EventStore>,
    pub(crate) events: Arc<dyn DomainEventBus>,
    pub(crate) notifier: Arc<dyn WaitNotifier>,
    pub(crate) clock: Arc<SimClock>,
    pub(crate) idempotency: IdempotencyConfig,
    pub(crate) metrics: Arc<PipelineMetrics>,
    /// The in-flight registry the gateway shares with the nodes (a monolith), or none (a
    /// gateway-only service in front of them).
    pub(crate) in_flight: Option<Arc<InFlightRequests>>,
}

/// The processing nodes of a run.
#[derive(Debug)]
pub(crate) struct Nodes {
    chaos: Arc<Chaos>,
    parts: NodeParts,
    buses: Vec<Arc<InMemoryCommandBus>>,
    epoch: AtomicUsize,
}

/// FNV-1a: a hash that is the same in every process (the buses' own hashers are seeded per
/// process, which would make routing differ between replays).
fn stable_hash(text: &str) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    usize::try_from(hash % 1_000_003).unwrap_or(0)
}

impl Nodes {
    /// `count` nodes, each started.
    pub(crate) fn start(chaos: Arc<Chaos>, parts: NodeParts, count: usize) -> Self {
        let nodes = Self {
            chaos,
            parts,
            buses: (0..count.max(1))
                .map(|_| Arc::new(InMemoryCommandBus::new(1, 64)))
                .collect(),
            epoch: AtomicUsize::new(0),
        };
        for index in 0..nodes.buses.len() {
            nodes.subscribe_fresh(index);
        }
        nodes
    }

    fn subscribe_fresh(&self, index: usize) {
        let parts = &self.parts;
        let checker = DefaultRequestIdChecker::new(
            Arc::new(BloomIdempotencyCheckerProvider::with_clock(
                parts.idempotency.clone(),
                parts.clock.clone(),
            )),
            Arc::new(EventStoreRequestIdExistenceChecker::new(
                parts.store.clone(),
            )),
        )
        .with_metrics(parts.metrics.clone());
        let mut node = DefaultCommandHandler::builder(
            parts.registry.clone(),
            parts.store.clone(),
            parts.events.clone(),
            parts.notifier.clone(),
        )
        .request_id_checker(Arc::new(checker))
        .clock(parts.clock.clone())
        .id_generator(Arc::new(SimIds(self.chaos.clone())))
        .metrics(parts.metrics.clone());
        if let Some(in_flight) = &parts.in_flight {
            node = node.in_flight(in_flight.clone());
        }
        let node = node.build();
        self.buses[index].subscribe(Arc::new(node));
    }

    /// The node that owns `aggregate_id` now.
    pub(crate) fn owner(&self, aggregate_id: &AggregateId) -> usize {
        (stable_hash(&aggregate_id.id) + self.epoch.load(Ordering::SeqCst)) % self.buses.len()
    }

    /// Restarts node `index`: its Bloom filters and cache are lost.
    pub(crate) fn restart(&self, index: usize) {
        self.subscribe_fresh(index % self.buses.len());
    }

    /// Restarts the node that owns `aggregate_id`.
    pub(crate) fn restart_owner(&self, aggregate_id: &AggregateId) {
        self.restart(self.owner(aggregate_id));
    }

    /// Moves every aggregate to the next node.
    pub(crate) fn rebalance(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// How many nodes there are.
    pub(crate) fn len(&self) -> usize {
        self.buses.len()
    }

    async fn deliver(&self, command: JsonCommand) -> Result<(), CommandBusError> {
        let bus = &self.buses[self.owner(&command.aggregate_id)];
        bus.send(command).await
    }

    /// Unsubscribes every node, which ends the bus workers and breaks the reference cycle
    /// node → event bus → dispatcher → gateway → command bus → node.
    pub(crate) fn shutdown(&self) {
        for bus in &self.buses {
            bus.unsubscribe();
        }
    }
}

/// The command bus between the gateway and the nodes, under faults: latency, rejection,
/// a send that hangs, an acknowledgement lost after delivery, and later redelivery.
#[derive(Debug)]
pub(crate) struct FaultyCommandBus {
    nodes: Arc<Nodes>,
    chaos: Arc<Chaos>,
    sent: SentCommands,
}

impl FaultyCommandBus {
    pub(crate) fn new(nodes: Arc<Nodes>, chaos: Arc<Chaos>, sent: SentCommands) -> Self {
        Self { nodes, chaos, sent }
    }
}

fn bus_down(what: &str) -> CommandBusError {
    CommandBusError::Unavailable(format!("simulated: {what}").into())
}

#[async_trait]
impl CommandBus for FaultyCommandBus {
    async fn send(&self, command: JsonCommand) -> Result<(), CommandBusError> {
        let chaos = &self.chaos;
        if chaos.faults_on() {
            tokio::time::sleep(Duration::from_millis(chaos.range(0, 20))).await;
        }
        let label = || {
            format!(
                "command {} request {}",
                command.id,
                chaos.show(&command.request_id)
            )
        };
        if chaos.inject(FaultKind::SendRejected, label) {
            return Err(bus_down("send rejected"));
        }
        self.sent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(command.id.clone(), command.clone());
        if chaos.inject(FaultKind::SendTimeout, label) {
            if chaos.chance(0.5) {
                chaos.note(format!("  (delivered {} before hanging)", command.id));
                self.nodes.deliver(command.clone()).await?;
            }
            // Hangs past the gateway's send timeout; the gateway drops this future.
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return Err(bus_down("send hung"));
        }
        self.nodes.deliver(command.clone()).await?;
        if chaos.inject(FaultKind::CommandRedelivered, label) {
            let nodes = self.nodes.clone();
            let delay = chaos.range(0, 400);
            let again = command.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                let _ = nodes.deliver(again).await;
            });
        }
        if chaos.inject(FaultKind::AckLost, label) {
            return Err(bus_down("delivered, acknowledgement lost"));
        }
        Ok(())
    }
}

/// The event bus from the nodes to the dispatcher, under faults: a node that crashes after
/// its append and before publishing, and streams delivered twice.
#[derive(Debug)]
pub(crate) struct FaultyEventBus {
    inner: Arc<InMemoryDomainEventBus>,
    chaos: Arc<Chaos>,
    crashed: Crashed,
    nodes: OnceLock<Weak<Nodes>>,
}

impl FaultyEventBus {
    pub(crate) fn new(
        inner: Arc<InMemoryDomainEventBus>,
        chaos: Arc<Chaos>,
        crashed: Crashed,
    ) -> Self {
        Self {
            inner,
            chaos,
            crashed,
            nodes: OnceLock::new(),
        }
    }

    pub(crate) fn set_nodes(&self, nodes: &Arc<Nodes>) {
        let _ = self.nodes.set(Arc::downgrade(nodes));
    }

    fn restart_owner(&self, aggregate_id: &AggregateId) {
        if let Some(nodes) = self.nodes.get().and_then(Weak::upgrade) {
            nodes.restart_owner(aggregate_id);
        }
    }
}

#[async_trait]
impl DomainEventBus for FaultyEventBus {
    async fn publish(&self, stream: Arc<DomainEventStream>) -> Result<(), EventBusError> {
        let label = || {
            format!(
                "{}@v{} command {} request {}",
                stream.aggregate_id.id,
                stream.version,
                stream.command_id,
                self.chaos.show(&stream.request_id)
            )
        };
        if self.chaos.inject(FaultKind::CrashAfterAppend, label) {
            self.crashed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(stream.command_id.clone());
            self.restart_owner(&stream.aggregate_id);
            // The process died: nothing was published, nobody sees an answer.
            return Ok(());
        }
        self.inner.publish(stream.clone()).await?;
        if self.chaos.inject(FaultKind::EventRedelivered, label) {
            let inner = self.inner.clone();
            let delay = self.chaos.range(0, 400);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                let _ = inner.publish(stream).await;
            });
        }
        Ok(())
    }
}

/// The path of stage signals back to waiting callers, under faults: signals lost or
/// duplicated, and a node that crashes after publishing, before its `PROCESSED` signal.
///
/// Every `PROCESSED` answer passes here, so it is also where the run logs each final
/// rejection a node answered (for the checks), and where the bus's redelivery of a rejected
/// message is decided (`RejectedRedelivered`).
#[derive(Debug)]
pub(crate) struct FaultyNotifier {
    inner: Arc<WaitCoordinator>,
    chaos: Arc<Chaos>,
    crashed: Crashed,
    sent: SentCommands,
    nodes: OnceLock<Weak<Nodes>>,
}

impl FaultyNotifier {
    pub(crate) fn new(
        inner: Arc<WaitCoordinator>,
        chaos: Arc<Chaos>,
        crashed: Crashed,
        sent: SentCommands,
    ) -> Self {
        Self {
            inner,
            chaos,
            crashed,
            sent,
            nodes: OnceLock::new(),
        }
    }

    pub(crate) fn set_nodes(&self, nodes: &Arc<Nodes>) {
        let _ = self.nodes.set(Arc::downgrade(nodes));
    }

    /// Logs a final rejection answered at `PROCESSED`, and maybe has the bus deliver that
    /// message again later (100..3000 ms), when the state may have changed.
    fn rejected(&self, result: &CommandResult) {
        let replayed = result.result.get(REPLAYED) == Some(&true.into());
        self.chaos.log(
            &result.aggregate_id,
            &result.request_id,
            Logged::Rejected {
                code: result.error_code.clone(),
                command_id: result.command_id.clone(),
                replayed,
            },
        );
        let label = || {
            format!(
                "command {} request {} rejected with {}{}",
                result.command_id,
                self.chaos.show(&result.request_id),
                result.error_code,
                match result.result.get(ORIGINAL_COMMAND_ID) {
                    Some(original) if replayed => format!(" (replayed from {original})"),
                    _ => String::new(),
                }
            )
        };
        if !self.chaos.inject(FaultKind::RejectedRedelivered, label) {
            return;
        }
        let command = self
            .sent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&result.command_id)
            .cloned();
        let (Some(command), Some(nodes)) = (command, self.nodes.get().cloned()) else {
            return;
        };
        let delay = self.chaos.range(100, 3000);
        self.chaos
            .note(format!("  redeliver {} in {delay}ms", command.id));
        let chaos = self.chaos.clone();
        chaos.begin_pending();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            if let Some(nodes) = nodes.upgrade() {
                chaos.note(format!("the bus delivers {} again", command.id));
                let _ = nodes.deliver(command).await;
            }
            chaos.end_pending();
        });
    }
}

impl WaitNotifier for FaultyNotifier {
    fn notify(&self, result: CommandResult) {
        let processed = result.stage == CommandStage::Processed && result.function.is_none();
        if processed && !result.succeeded && is_recorded_rejection(&result.error_code) {
            self.rejected(&result);
        }
        if processed && result.error_code == ErrorCode::CommandExpectVersionConflict {
            self.chaos.log(
                &result.aggregate_id,
                &result.request_id,
                Logged::Conflict {
                    command_id: result.command_id.clone(),
                },
            );
        }
        let label = || {
            format!(
                "{} {}{} of command {} ({})",
                result.stage,
                result
                    .function
                    .as_ref()
                    .map_or("", |f| f.processor_name.as_str()),
                if result.succeeded { " ok" } else { " failed" },
                result.wait_command_id,
                result.error_code
            )
        };
        if processed
            && self
                .crashed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&result.wait_command_id)
        {
            self.chaos.note(format!(
                "  PROCESSED of command {} never sent: its node crashed",
                result.wait_command_id
            ));
            return;
        }
        if processed && result.succeeded && self.chaos.inject(FaultKind::CrashAfterPublish, label) {
            if let Some(nodes) = self.nodes.get().and_then(Weak::upgrade) {
                nodes.restart_owner(&result.aggregate());
            }
            return;
        }
        if self.chaos.inject(FaultKind::SignalLost, label) {
            return;
        }
        let twice = self.chaos.inject(FaultKind::SignalDuplicated, label);
        if twice {
            self.inner.notify(result.clone());
        }
        self.inner.notify(result);
    }
}
