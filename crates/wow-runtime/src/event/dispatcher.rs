//! Runs every consumer of an appended stream, stage by stage, and signals each stage.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use serde_json::{json, Value};
use tracing::{Instrument, Span};

use super::parking::{parked_error, Parking, Turn};
use super::position_writer::PositionWriter;
use crate::command::{
    link_headers, notify_signal, signal_wanted, CommandGateway, WaitNotifier, WeakCommandGateway,
};
use crate::eventsourcing::{recorded_scope, Snapshotter};
use crate::metrics::PipelineMetrics;
use crate::trace_context;
use wow_core::aggregate::AggregateScope;
use wow_core::command::{CommandResult, CommandStage, FunctionInfo};
use wow_core::compensation::{CompensationStore, FailedExecution, RetrySpec};
use wow_core::deadline::DeadlineStore;
use wow_core::event::DomainEventStream;
use wow_core::event::{ConsumerError, ConsumerPositions, EventConsumer, ParkedStreams};
use wow_core::eventsourcing::EventStore;
use wow_core::id::{Clock, IdGenerator, SystemClock, UuidV7IdGenerator};
use wow_core::panic_message;
use wow_core::saga::SentLog;
use wow_core::saga::{DynSaga, SagaDelivery};
use wow_core::{AggregateId, ErrorCode};

/// Delivers appended streams to the snapshotter, projections, event processors and sagas,
/// in that stage order, and reports each consumer's result and each stage's result to the
/// waiting caller (`SNAPSHOT`, `PROJECTED`, `EVENT_HANDLED`, `SAGA_HANDLED`).
///
/// A consumer's failure fails its own signal and its stage (SPEC ST-5); later stages still
/// run, and history is never touched. A consumer that panics (SPEC PX-1) fails that one
/// delivery exactly as if it had returned an `InternalServerError` with the panic's message:
/// it is recorded for compensation and retried later. The consumer goes on receiving other
/// aggregates' streams; with parked streams (SPEC DS-5, on whenever failures are recorded)
/// its later streams of the same aggregate wait behind the failed one, in version order, and
/// run once its retry succeeds: no consumer handles version n+1 before version n. A stage
/// with no consumers succeeds at once, so a wait for it does not hang.
///
/// With a [`CompensationStore`], every failure is recorded durably for a later retry (SPEC
/// DS-4); with [`ConsumerPositions`], every success moves the consumer's position on the
/// aggregate, from which [`catch_up`](crate::event::catch_up) resumes.
#[derive(Debug)]
pub struct EventDispatcher {
    snapshotter: Option<Snapshotter>,
    projections: Vec<Arc<dyn EventConsumer>>,
    processors: Vec<Arc<dyn EventConsumer>>,
    sagas: Vec<Arc<dyn DynSaga>>,
    notifier: Arc<dyn WaitNotifier>,
    gateway: Option<WeakCommandGateway>,
    compensation: Option<(Arc<dyn CompensationStore>, RetrySpec)>,
    parking: Option<Parking>,
    positions: Option<PositionWriter>,
    deadlines: Option<Arc<dyn DeadlineStore>>,
    store: Option<Arc<dyn EventStore>>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    metrics: Option<Arc<PipelineMetrics>>,
    /// Failures the compensation store could not take when they happened, kept to record
    /// later (see [`EventDispatcher::record_pending_failures`]).
    unrecorded: Mutex<Vec<(FailedExecution, i64)>>,
}

/// How many unrecorded failures are kept in memory; past it the oldest are dropped (their
/// streams are still delivered again by catch-up, as positions stop before them).
const MAX_UNRECORDED: usize = 10_000;

/// One consumer the dispatcher runs, found by name.
#[derive(Debug, Clone)]
pub enum NamedConsumer {
    /// A projection (stage `PROJECTED`).
    Projection(Arc<dyn EventConsumer>),
    /// An event processor (stage `EVENT_HANDLED`).
    Processor(Arc<dyn EventConsumer>),
    /// A saga (stage `SAGA_HANDLED`).
    Saga(Arc<dyn DynSaga>),
}

impl NamedConsumer {
    /// The consumer's stage.
    pub fn stage(&self) -> CommandStage {
        match self {
            NamedConsumer::Projection(_) => CommandStage::Projected,
            NamedConsumer::Processor(_) => CommandStage::EventHandled,
            NamedConsumer::Saga(_) => CommandStage::SagaHandled,
        }
    }

    /// The consumer's name, as its records and positions know it.
    pub fn name(&self) -> &str {
        match self {
            NamedConsumer::Projection(c) | NamedConsumer::Processor(c) => c.name(),
            NamedConsumer::Saga(saga) => saga.consumer_name(),
        }
    }
}

/// Builds an [`EventDispatcher`].
#[derive(Debug)]
pub struct EventDispatcherBuilder {
    inner: EventDispatcher,
}

impl EventDispatcherBuilder {
    /// Counts each consumer's signals in `metrics` (`/metrics`: `wow_consumer_signals_total`).
    pub fn metrics(mut self, metrics: Arc<PipelineMetrics>) -> Self {
        self.inner.metrics = Some(metrics);
        self
    }

    /// Saves snapshots with `snapshotter`.
    pub fn snapshotter(mut self, snapshotter: Snapshotter) -> Self {
        self.inner.snapshotter = Some(snapshotter);
        self
    }

    /// Adds a projection (stage `PROJECTED`).
    pub fn projection(mut self, projection: Arc<dyn EventConsumer>) -> Self {
        self.inner.projections.push(projection);
        self
    }

    /// Adds an event processor (stage `EVENT_HANDLED`).
    pub fn event_processor(mut self, processor: Arc<dyn EventConsumer>) -> Self {
        self.inner.processors.push(processor);
        self
    }

    /// Adds a saga (stage `SAGA_HANDLED`); its commands go through the gateway given to
    /// [`EventDispatcherBuilder::gateway`].
    pub fn saga(mut self, saga: Arc<dyn DynSaga>) -> Self {
        self.inner.sagas.push(saga);
        self
    }

    /// Sends sagas' commands through `gateway`. The dispatcher holds it weakly: the
    /// dispatcher runs behind the gateway's own bus, so a strong hold would keep the whole
    /// pipeline alive from the inside. Once the gateway is dropped, saga steps fail with
    /// `ServiceUnavailable` and are recorded for compensation.
    pub fn gateway(mut self, gateway: &CommandGateway) -> Self {
        self.inner.gateway = Some(gateway.downgrade());
        self
    }

    /// Keeps each aggregate's order past a failure (SPEC DS-5): once a consumer's delivery of
    /// a stream fails, its later streams of that aggregate are parked in `lanes`, not run,
    /// until the failed one succeeds (a retry) or is skipped; then they run in order.
    pub fn parked_streams(mut self, lanes: Arc<dyn ParkedStreams>) -> Self {
        self.inner.parking = Some(Parking::new(lanes));
        self
    }

    /// Records every consumer failure in `store`, retried as `retry` says (SPEC DS-4).
    pub fn compensation(mut self, store: Arc<dyn CompensationStore>, retry: RetrySpec) -> Self {
        self.inner.compensation = Some((store, retry));
        self
    }

    /// Keeps every consumer's position in `positions`. Positions are written in the
    /// background, in order and batched, so a delivery never waits for one; build the
    /// dispatcher inside a tokio runtime for that (outside one they are written in line).
    pub fn positions(mut self, positions: Arc<dyn ConsumerPositions>) -> Self {
        self.inner.positions = Some(PositionWriter::start(positions));
        self
    }

    /// Keeps the deadlines sagas schedule in `deadlines` (SPEC DM-2); without it a saga's
    /// schedule fails its stage.
    pub fn deadlines(mut self, deadlines: Arc<dyn DeadlineStore>) -> Self {
        self.inner.deadlines = Some(deadlines);
        self
    }

    /// Reads from `store` the owner and space a saga acts for (SPEC TN-2): those the first
    /// stream of the aggregate whose later stream it reacts to recorded. Without it, a
    /// later stream's own header stands for them, which names no owner when its command
    /// named none (a caller bound to the whole tenant, a deadline): the saga then acts for
    /// no owner. A first stream's header is its aggregate's scope either way.
    pub fn event_store(mut self, store: Arc<dyn EventStore>) -> Self {
        self.inner.store = Some(store);
        self
    }

    /// Names the stage signals with `ids` (UUIDv7 by default).
    pub fn id_generator(mut self, ids: Arc<dyn IdGenerator>) -> Self {
        self.inner.ids = ids;
        self
    }

    /// Reads the time of failure records and stage signals from `clock` (the system clock
    /// by default).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.inner.clock = clock;
        self
    }

    /// The dispatcher.
    pub fn build(self) -> Arc<EventDispatcher> {
        Arc::new(self.inner)
    }
}

impl EventDispatcher {
    /// A builder for a dispatcher that signals `notifier`.
    pub fn builder(notifier: Arc<dyn WaitNotifier>) -> EventDispatcherBuilder {
        EventDispatcherBuilder {
            inner: EventDispatcher {
                snapshotter: None,
                projections: Vec::new(),
                processors: Vec::new(),
                sagas: Vec::new(),
                notifier,
                gateway: None,
                compensation: None,
                parking: None,
                positions: None,
                deadlines: None,
                store: None,
                clock: Arc::new(SystemClock),
                ids: Arc::new(UuidV7IdGenerator),
                metrics: None,
                unrecorded: Mutex::new(Vec::new()),
            },
        }
    }

    /// Runs every consumer on `stream` and signals each stage.
    pub async fn dispatch(&self, stream: &DomainEventStream) {
        let snapshot = match &self.snapshotter {
            Some(snapshotter) => {
                let span = trace_context::consumer_span("snapshot", CommandStage::Snapshot, stream);
                guarded(span, "snapshot", stream, snapshotter.handle(stream)).await
            }
            None => Ok(false),
        };
        let saved = json!({"saved": snapshot.as_ref().is_ok_and(|saved| *saved)});
        self.signal(
            stream,
            CommandStage::Snapshot,
            None,
            snapshot.map(|_| ()),
            saved,
        );
        self.run_stage(stream, CommandStage::Projected, &self.projections)
            .await;
        self.run_stage(stream, CommandStage::EventHandled, &self.processors)
            .await;
        self.run_sagas(stream).await;
    }

    async fn run_stage(
        &self,
        stream: &DomainEventStream,
        stage: CommandStage,
        consumers: &[Arc<dyn EventConsumer>],
    ) {
        let mut first_failure = None;
        for consumer in consumers {
            let (_, outcome) = self
                .deliver(Target::Consumer(consumer, stage), stream)
                .await;
            if let Err(error) = &outcome {
                first_failure.get_or_insert_with(|| error.clone());
            }
            self.signal(stream, stage, Some(consumer.name()), outcome, Value::Null);
        }
        self.signal(
            stream,
            stage,
            None,
            first_failure.map_or(Ok(()), Err),
            Value::Null,
        );
    }

    async fn run_sagas(&self, stream: &DomainEventStream) {
        let mut first_failure = None;
        let mut all_sent = Vec::new();
        for saga in &self.sagas {
            let (sent, outcome) = self.deliver(Target::Saga(saga), stream).await;
            if let Err(error) = &outcome {
                first_failure.get_or_insert_with(|| error.clone());
            }
            all_sent.extend(sent.iter().cloned());
            // A failed saga reports what it sent too: those commands' ids are how a caller
            // finds out what the saga did before it failed (SPEC ID-4).
            self.signal(
                stream,
                CommandStage::SagaHandled,
                Some(saga.consumer_name()),
                outcome,
                json!({"commands": sent}),
            );
        }
        self.signal(
            stream,
            CommandStage::SagaHandled,
            None,
            first_failure.map_or(Ok(()), Err),
            json!({"commands": all_sent}),
        );
    }

    /// Records the outcome of `consumer` on `stream`: a success moves its position, a failure
    /// is logged and recorded for compensation. Recording failures are logged, never raised:
    /// the consumer's own outcome stands.
    async fn settle(
        &self,
        consumer: &str,
        stage: CommandStage,
        stream: &DomainEventStream,
        outcome: &Result<(), ConsumerError>,
    ) {
        match outcome {
            Ok(()) => {
                if let Some(parking) = &self.parking {
                    parking.handled(consumer, &stream.aggregate_id, stream.version);
                }
                if let Some(positions) = &self.positions {
                    positions
                        .advance(consumer, &stream.aggregate_id, stream.version)
                        .await;
                }
            }
            Err(error) => {
                tracing::warn!(consumer, %stage, aggregate_id = %stream.aggregate_id, version = stream.version, %error, "consumer failed");
                if let Some(parking) = &self.parking {
                    parking
                        .hold(consumer, stream, self.clock.now_millis())
                        .await;
                }
                if let Some((store, retry)) = &self.compensation {
                    let failure = FailedExecution::of(consumer, stage, stream, error.clone());
                    let now = self.clock.now_millis();
                    if let Err(error) = store.record_failure(&failure, retry, now).await {
                        tracing::error!(consumer, aggregate_id = %stream.aggregate_id, version = stream.version, %error, "could not record the consumer's failure for compensation; kept to record later");
                        let mut unrecorded =
                            self.unrecorded.lock().unwrap_or_else(|p| p.into_inner());
                        if unrecorded.len() >= MAX_UNRECORDED {
                            unrecorded.remove(0);
                        }
                        unrecorded.push((failure, now));
                    }
                }
            }
        }
    }

    /// The consumer named `name`, if the dispatcher runs one.
    pub fn consumer(&self, name: &str) -> Option<NamedConsumer> {
        let named = |c: &&Arc<dyn EventConsumer>| c.name() == name;
        self.projections
            .iter()
            .find(named)
            .map(|c| NamedConsumer::Projection(c.clone()))
            .or_else(|| {
                self.processors
                    .iter()
                    .find(named)
                    .map(|c| NamedConsumer::Processor(c.clone()))
            })
            .or_else(|| {
                self.sagas
                    .iter()
                    .find(|saga| saga.consumer_name() == name)
                    .map(|saga| NamedConsumer::Saga(saga.clone()))
            })
    }

    /// The names of every consumer, in stage order.
    pub fn consumer_names(&self) -> Vec<String> {
        self.projections
            .iter()
            .chain(&self.processors)
            .map(|c| c.name().to_owned())
            .chain(
                self.sagas
                    .iter()
                    .map(|saga| saga.consumer_name().to_owned()),
            )
            .collect()
    }

    /// Runs only `consumer` on `stream`, without signalling any wait, and records the outcome
    /// as a live delivery does (position or compensation record). For catch-up and retries.
    pub async fn run_consumer(
        &self,
        consumer: &NamedConsumer,
        stream: &DomainEventStream,
    ) -> Result<(), ConsumerError> {
        self.deliver(Target::of(consumer), stream).await.1
    }

    /// The lanes of parked streams (SPEC DS-5), when the dispatcher parks them.
    pub fn parked_streams(&self) -> Option<&Arc<dyn ParkedStreams>> {
        self.parking.as_ref().map(|parking| parking.lanes())
    }

    /// Partitions moved to this process (SPEC DS-5): the open lanes are read again from the
    /// store, and the versions handled per aggregate are read again from the positions, as
    /// another process may have parked or handled streams of them meanwhile.
    pub(crate) async fn partitions_moved(&self) {
        if let Some(parking) = &self.parking {
            parking.forget_heads();
            if let Err(error) = parking.reload().await {
                tracing::warn!(%error, "could not read the parked lanes again; the next failure or restart reads them");
            }
        }
    }

    /// Whether `consumer`'s later streams of `aggregate` are parked behind a failed one (SPEC
    /// DS-5), as this process knows.
    pub fn holds_back(&self, consumer: &str, aggregate: &AggregateId) -> bool {
        self.parking
            .as_ref()
            .is_some_and(|parking| parking.is_open(consumer, aggregate))
    }

    /// Skips `stream` for `consumer` (an operator's decision, SPEC DS-5): it counts as handled
    /// (the consumer's position moves past it) without running, and the consumer's streams
    /// of the aggregate parked behind it run in order.
    pub async fn skip_consumer(&self, consumer: &NamedConsumer, stream: &DomainEventStream) {
        let target = Target::of(consumer);
        self.settle(target.name(), target.stage(), stream, &Ok(()))
            .await;
        self.release(target, stream).await;
    }

    /// Delivers `stream` to `target` in its aggregate's order (SPEC DS-5): parked behind an
    /// open lane of the aggregate, or run and settled; a success at a lane's head runs what
    /// was parked behind it. The commands a saga sent, and the outcome.
    async fn deliver(
        &self,
        target: Target<'_>,
        stream: &DomainEventStream,
    ) -> (Vec<Value>, Result<(), ConsumerError>) {
        self.fill_gap(target, stream).await;
        self.deliver_in_turn(target, stream).await
    }

    /// Delivers, first, the versions of the stream's aggregate that `target` has not handled
    /// below it (SPEC DS-5): a stream never published (its append's answer lost, a crash
    /// before the publish) would otherwise be overtaken by the next. Read from history; a
    /// failure among them opens the lane the stream then parks behind. Nothing to do when a
    /// lane is open already (the stream parks behind it), or where this process cannot know
    /// what the consumer handled (no positions, no history).
    async fn fill_gap(&self, target: Target<'_>, stream: &DomainEventStream) {
        let (Some(parking), Some(store)) = (&self.parking, &self.store) else {
            return;
        };
        let (consumer, aggregate) = (target.name(), &stream.aggregate_id);
        if stream.version <= 1 || parking.is_open(consumer, aggregate) {
            return;
        }
        let handled = match parking.head(consumer, aggregate) {
            Some(head) => head,
            None => match self.stored_position(consumer, aggregate).await {
                Some(position) => position,
                None => return,
            },
        };
        if stream.version <= handled + 1 {
            return;
        }
        let missing = match store.load(aggregate, handled + 1, stream.version - 1).await {
            Ok(missing) => missing,
            Err(error) => {
                tracing::error!(consumer, %aggregate, from = handled + 1, through = stream.version - 1, %error, "could not read the streams missing before this one");
                return;
            }
        };
        tracing::info!(consumer, %aggregate, from = handled + 1, through = stream.version - 1, "delivering the streams missing before this one, from history");
        for earlier in &missing {
            if self.deliver_in_turn(target, earlier).await.1.is_err() {
                return;
            }
        }
    }

    /// Where `consumer` got to on `aggregate` by its stored position (0: nothing handled);
    /// `None` without positions, or when they cannot be read.
    async fn stored_position(&self, consumer: &str, aggregate: &AggregateId) -> Option<u64> {
        let positions = self.positions.as_ref()?.positions();
        match positions
            .positions(consumer, std::slice::from_ref(aggregate))
            .await
        {
            Ok(found) => Some(found.get(aggregate).copied().unwrap_or(0)),
            Err(error) => {
                tracing::warn!(consumer, %aggregate, %error, "could not read the consumer's position");
                None
            }
        }
    }

    /// [`deliver`](Self::deliver) without the gap check: parked behind an open lane, or run
    /// and settled, releasing the lane it heads on success.
    async fn deliver_in_turn(
        &self,
        target: Target<'_>,
        stream: &DomainEventStream,
    ) -> (Vec<Value>, Result<(), ConsumerError>) {
        let head = match &self.parking {
            None => false,
            Some(parking) => match parking.turn(target.name(), stream).await {
                Ok(Turn::Run { head }) => head,
                Ok(Turn::Parked(lane)) => {
                    tracing::debug!(consumer = target.name(), aggregate_id = %stream.aggregate_id, version = stream.version, head = lane.head_version, "parked behind a failed stream");
                    return (Vec::new(), Err(parked_error(target.name(), &lane)));
                }
                Err(error) => {
                    let outcome = Err(error);
                    self.settle(target.name(), target.stage(), stream, &outcome)
                        .await;
                    return (Vec::new(), outcome);
                }
            },
        };
        let (sent, outcome) = self.attempt(target, stream).await;
        self.settle(target.name(), target.stage(), stream, &outcome)
            .await;
        if head && outcome.is_ok() {
            self.release(target, stream).await;
        }
        (sent, outcome)
    }

    /// Runs `target` on `stream` once, a panic caught as that delivery's failure.
    async fn attempt(
        &self,
        target: Target<'_>,
        stream: &DomainEventStream,
    ) -> (Vec<Value>, Result<(), ConsumerError>) {
        match target {
            Target::Consumer(consumer, stage) => {
                let span = trace_context::consumer_span(consumer.name(), stage, stream);
                let outcome = guarded(span, consumer.name(), stream, consumer.handle(stream)).await;
                (Vec::new(), outcome)
            }
            Target::Saga(saga) => self.run_saga(saga.as_ref(), stream).await,
        }
    }

    /// Runs, in version order, the streams parked behind `head` (which just succeeded), until
    /// the lane is empty and closed, or one fails and heads the lane in its place.
    async fn release(&self, target: Target<'_>, head: &DomainEventStream) {
        let (Some(parking), Some(store)) = (&self.parking, &self.store) else {
            return;
        };
        let (consumer, aggregate) = (target.name(), &head.aggregate_id);
        let mut next = head.version + 1;
        loop {
            let lane = match parking.lanes().lane(consumer, aggregate).await {
                Ok(Some(lane)) => lane,
                Ok(None) => return parking.forget(consumer, aggregate),
                Err(error) => {
                    tracing::error!(consumer, %aggregate, %error, "could not read the parked lane to release it");
                    return;
                }
            };
            if next > lane.parked_through {
                match parking
                    .lanes()
                    .release(consumer, aggregate, lane.parked_through)
                    .await
                {
                    Ok(true) => return parking.forget(consumer, aggregate),
                    // More was parked meanwhile: run it first.
                    Ok(false) => continue,
                    Err(error) => {
                        tracing::error!(consumer, %aggregate, %error, "could not close the parked lane");
                        return;
                    }
                }
            }
            let streams = match store.load(aggregate, next, lane.parked_through).await {
                Ok(streams) => streams,
                Err(error) => {
                    tracing::error!(consumer, %aggregate, %error, "could not read the parked streams from history");
                    return;
                }
            };
            if streams.is_empty() {
                tracing::error!(consumer, %aggregate, from = next, through = lane.parked_through, "the parked streams are not in history");
                return;
            }
            for stream in &streams {
                let (_, outcome) = self.attempt(target, stream).await;
                self.settle(consumer, target.stage(), stream, &outcome)
                    .await;
                if outcome.is_err() {
                    // It heads the lane now (settled above); the rest stay parked behind it.
                    return;
                }
                next = stream.version + 1;
            }
        }
    }

    /// Records the failures the compensation store could not take when they happened (it was
    /// unreachable), and returns how many are still waiting. The compensation scheduler calls
    /// it before every pass. A failure lost with the process is not lost for good: the
    /// consumer's position stops before its stream, so catch-up delivers it again.
    pub async fn record_pending_failures(&self) -> usize {
        let Some((store, retry)) = &self.compensation else {
            return 0;
        };
        let pending =
            std::mem::take(&mut *self.unrecorded.lock().unwrap_or_else(|p| p.into_inner()));
        let mut still = Vec::new();
        for (failure, at) in pending {
            if still.is_empty() && store.record_failure(&failure, retry, at).await.is_ok() {
                continue;
            }
            still.push((failure, at));
        }
        // Failures that arrived meanwhile go after the older ones.
        let mut unrecorded = self.unrecorded.lock().unwrap_or_else(|p| p.into_inner());
        still.append(&mut unrecorded);
        *unrecorded = still;
        unrecorded.len()
    }

    /// The consumer positions, if the dispatcher keeps them.
    pub fn positions(&self) -> Option<&Arc<dyn ConsumerPositions>> {
        self.positions.as_ref().map(PositionWriter::positions)
    }

    /// Returns once every position recorded so far is written: before a graceful stop, or
    /// before reading positions.
    pub async fn flush_positions(&self) {
        if let Some(positions) = &self.positions {
            positions.flush().await;
        }
    }

    /// The compensation store and retry spec, if failures are recorded.
    pub fn compensation(&self) -> Option<&(Arc<dyn CompensationStore>, RetrySpec)> {
        self.compensation.as_ref()
    }

    /// The clock failure records are timed by.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Runs `saga` on every event of `stream`, stopping at the first failure; the commands
    /// it sent (up to and including the failing one) and the outcome.
    async fn run_saga(
        &self,
        saga: &dyn DynSaga,
        stream: &DomainEventStream,
    ) -> (Vec<Value>, Result<(), ConsumerError>) {
        let Some(gateway) = self.gateway.as_ref().and_then(WeakCommandGateway::upgrade) else {
            let error = ConsumerError::new(
                ErrorCode::ServiceUnavailable,
                "no gateway for sagas: none was given, or the service is stopping",
            );
            return (Vec::new(), Err(error));
        };
        let scope = match self.scope_held_to(saga, stream).await {
            Ok(scope) => scope,
            Err(error) => return (Vec::new(), Err(error)),
        };
        let log = SentLog::default();
        let span =
            trace_context::consumer_span(saga.consumer_name(), CommandStage::SagaHandled, stream);
        let mut link = link_headers(&stream.header, &stream.command_id);
        // SPEC OB-1: every command the saga sends carries the saga's span context (or, with
        // no OpenTelemetry layer, the stream's context unchanged).
        trace_context::carry(&span, &stream.header, &mut link);
        let delivery = SagaDelivery::new(&gateway, &log).with_link(&link);
        let delivery = match self.deadlines.as_deref() {
            Some(deadlines) => delivery.with_deadlines(deadlines),
            None => delivery,
        };
        let delivery = match &scope {
            Some(scope) => delivery.with_scope(scope),
            None => delivery,
        };
        let outcome = guarded(
            span,
            saga.consumer_name(),
            stream,
            saga.run_stream(stream, delivery),
        )
        .await;
        (log.into_inner(), outcome)
    }

    /// The owner and space `saga` acts for on `stream` (SPEC TN-2): those its aggregate's
    /// first stream recorded, read from the store for a later stream; `None` when the saga
    /// acts across owners, or the stream's own header stands for them (a first stream, or
    /// no store). A store that cannot be read fails the delivery with its code, recorded and
    /// retried as any saga failure.
    async fn scope_held_to(
        &self,
        saga: &dyn DynSaga,
        stream: &DomainEventStream,
    ) -> Result<Option<AggregateScope>, ConsumerError> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        if saga.across_owners() || stream.version <= 1 {
            return Ok(None);
        }
        recorded_scope(store.as_ref(), &stream.aggregate_id)
            .await
            .map_err(|error| {
                ConsumerError::new(
                    error.error_code(),
                    format!(
                        "saga {}: the owner of {} cannot be read: {error}",
                        saga.consumer_name(),
                        stream.aggregate_id
                    ),
                )
            })
    }

    fn signal(
        &self,
        stream: &DomainEventStream,
        stage: CommandStage,
        function: Option<&str>,
        outcome: Result<(), ConsumerError>,
        detail: Value,
    ) {
        if let (Some(metrics), Some(consumer)) = (&self.metrics, function) {
            let code = match &outcome {
                Ok(()) => ErrorCode::Ok,
                Err(error) => error.code.clone(),
            };
            metrics.record_signal(stage, consumer, &code.to_string());
        }
        if !signal_wanted(&stream.header, stage) {
            return;
        }
        let (code, message) = match outcome {
            Ok(()) => (ErrorCode::Ok, String::new()),
            Err(error) => (error.code, error.message),
        };
        let mut result = CommandResult::for_ids(
            &stream.aggregate_id,
            &stream.command_id,
            &stream.request_id,
            stage,
            code,
            message,
        )
        .with_version(stream.version)
        .stamped(self.clock.as_ref(), self.ids.as_ref());
        if let Value::Object(detail) = detail {
            result.result.extend(detail);
        }
        if let Some(function) = function {
            result = result.with_function(FunctionInfo::event(
                &stream.aggregate_id.context_name,
                function,
            ));
        }
        notify_signal(self.notifier.as_ref(), &stream.header, result);
    }
}

/// What one delivery runs: a projection or processor with its stage, or a saga.
#[derive(Debug, Clone, Copy)]
enum Target<'a> {
    Consumer(&'a Arc<dyn EventConsumer>, CommandStage),
    Saga(&'a Arc<dyn DynSaga>),
}

impl<'a> Target<'a> {
    fn of(consumer: &'a NamedConsumer) -> Self {
        match consumer {
            NamedConsumer::Projection(c) => Target::Consumer(c, CommandStage::Projected),
            NamedConsumer::Processor(c) => Target::Consumer(c, CommandStage::EventHandled),
            NamedConsumer::Saga(saga) => Target::Saga(saga),
        }
    }

    fn name(&self) -> &str {
        match self {
            Target::Consumer(consumer, _) => consumer.name(),
            Target::Saga(saga) => saga.consumer_name(),
        }
    }

    fn stage(&self) -> CommandStage {
        match self {
            Target::Consumer(_, stage) => *stage,
            Target::Saga(_) => CommandStage::SagaHandled,
        }
    }
}

/// Runs one delivery of `stream` to `consumer`, turning a panic into that delivery's failure
/// (SPEC PX-1): `InternalServerError` with the panic's message, logged at error level. The
/// consumer's other deliveries are untouched. The delivery runs in `span` (SPEC OB-1).
async fn guarded<T>(
    span: Span,
    consumer: &str,
    stream: &DomainEventStream,
    delivery: impl Future<Output = Result<T, ConsumerError>>,
) -> Result<T, ConsumerError> {
    match AssertUnwindSafe(delivery.instrument(span))
        .catch_unwind()
        .await
    {
        Ok(outcome) => outcome,
        Err(payload) => {
            let message = panic_message(payload.as_ref());
            tracing::error!(consumer, aggregate_id = %stream.aggregate_id, version = stream.version, panic = %message, "a consumer panicked; this delivery failed");
            Err(ConsumerError::internal(format!(
                "`{consumer}` panicked: {message}"
            )))
        }
    }
}
