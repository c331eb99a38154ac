//! Runs every consumer of an appended stream, stage by stage, and signals each stage.

use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};

use super::{ConsumerError, EventConsumer};
use crate::command::{signal_wanted, CommandGateway, WaitNotifier};
use crate::eventsourcing::Snapshotter;
use crate::saga::{Saga, SagaContext};
use crate::{CommandResult, CommandStage, DomainEventStream, ErrorCode};

/// Delivers appended streams to the snapshotter, projections, event processors and sagas,
/// in that stage order, and reports each consumer's result and each stage's result to the
/// waiting caller (`SNAPSHOT`, `PROJECTED`, `EVENT_HANDLED`, `SAGA_HANDLED`).
///
/// A consumer's failure fails its own signal and its stage (SPEC ST-5); later stages still
/// run, and history is never touched. A stage with no consumers succeeds at once, so a wait
/// for it does not hang.
#[derive(Debug)]
pub struct EventDispatcher {
    snapshotter: Option<Snapshotter>,
    projections: Vec<Arc<dyn EventConsumer>>,
    processors: Vec<Arc<dyn EventConsumer>>,
    sagas: Vec<Arc<dyn Saga>>,
    notifier: Arc<dyn WaitNotifier>,
    gateway: OnceLock<CommandGateway>,
}

/// Builds an [`EventDispatcher`].
#[derive(Debug)]
pub struct EventDispatcherBuilder {
    inner: EventDispatcher,
}

impl EventDispatcherBuilder {
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

    /// Adds a saga (stage `SAGA_HANDLED`); its commands go through the gateway set with
    /// [`EventDispatcher::set_gateway`].
    pub fn saga(mut self, saga: Arc<dyn Saga>) -> Self {
        self.inner.sagas.push(saga);
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
                gateway: OnceLock::new(),
            },
        }
    }

    /// Sets the gateway sagas send through (once; the gateway is built after the bus).
    pub fn set_gateway(&self, gateway: CommandGateway) {
        let _ = self.gateway.set(gateway);
    }

    /// Runs every consumer on `stream` and signals each stage.
    pub async fn dispatch(&self, stream: &DomainEventStream) {
        let snapshot = match &self.snapshotter {
            Some(snapshotter) => snapshotter
                .handle(stream)
                .await
                .map(|saved| json!({"saved": saved})),
            None => Ok(json!({"saved": false})),
        };
        self.signal(stream, CommandStage::Snapshot, None, snapshot);
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
            let outcome = consumer.handle(stream).await;
            if let Err(error) = &outcome {
                tracing::warn!(consumer = consumer.name(), %stage, aggregate_id = %stream.aggregate_id, version = stream.version, %error, "consumer failed");
                first_failure.get_or_insert_with(|| error.clone());
            }
            self.signal(
                stream,
                stage,
                Some(consumer.name()),
                outcome.map(|()| Value::Null),
            );
        }
        self.signal(
            stream,
            stage,
            None,
            first_failure.map_or(Ok(Value::Null), Err),
        );
    }

    async fn run_sagas(&self, stream: &DomainEventStream) {
        let mut first_failure = None;
        let mut all_sent = Vec::new();
        for saga in &self.sagas {
            let outcome = self.run_saga(saga.as_ref(), stream).await;
            match &outcome {
                Ok(sent) => all_sent.extend(sent.iter().cloned()),
                Err(error) => {
                    tracing::warn!(saga = saga.name(), aggregate_id = %stream.aggregate_id, %error, "saga failed");
                    first_failure.get_or_insert_with(|| error.clone());
                }
            }
            self.signal(
                stream,
                CommandStage::SagaHandled,
                Some(saga.name()),
                outcome.map(|sent| json!({"commands": sent})),
            );
        }
        let stage = first_failure.map_or(Ok(json!({"commands": all_sent})), Err);
        self.signal(stream, CommandStage::SagaHandled, None, stage);
    }

    async fn run_saga(
        &self,
        saga: &dyn Saga,
        stream: &DomainEventStream,
    ) -> Result<Vec<Value>, ConsumerError> {
        let Some(gateway) = self.gateway.get() else {
            return Err(ConsumerError::new(
                ErrorCode::IllegalState,
                "no gateway for sagas",
            ));
        };
        let mut sent = Vec::new();
        for event in &stream.body {
            let ctx = SagaContext::new(gateway, &event.id);
            let outcome = saga.on_event(event, stream, &ctx).await;
            sent.extend(ctx.into_sent());
            outcome?;
        }
        Ok(sent)
    }

    fn signal(
        &self,
        stream: &DomainEventStream,
        stage: CommandStage,
        function: Option<&str>,
        outcome: Result<Value, ConsumerError>,
    ) {
        if !signal_wanted(&stream.header, stage) {
            return;
        }
        let (code, message, detail) = match outcome {
            Ok(detail) => (ErrorCode::Ok, String::new(), detail),
            Err(error) => (error.code, error.message, Value::Null),
        };
        let mut result = CommandResult::for_ids(
            &stream.aggregate_id,
            &stream.command_id,
            &stream.request_id,
            stage,
            code,
            message,
        )
        .with_version(stream.version);
        if let Value::Object(detail) = detail {
            result.result.extend(detail);
        }
        if let Some(function) = function {
            result = result.with_function(function);
        }
        self.notifier.notify(result);
    }
}
