//! The object-safe face of every [`Saga`], which the dispatcher and the pipeline hold: it
//! skips streams of other aggregates, decodes a stream once, and runs the typed saga on each
//! event with its own [`SagaContext`].

use async_trait::async_trait;

use super::{Saga, SagaContext, SagaSender, SentLog};
use crate::aggregate::typed_events;
use wow_contracts::deadline::DeadlineStore;
use wow_contracts::event::ConsumerError;
use wow_model::aggregate::{Aggregate, AggregateScope, LifecycleEvent};
use wow_model::error_code::ErrorCode;
use wow_model::event::DomainEventStream;

mod sealed {
    /// Only [`Saga`](super::Saga)s are [`DynSaga`](super::DynSaga)s.
    pub trait Sealed {}

    impl<S: super::Saga> Sealed for S {}
}

/// Where one run of a saga sends its commands, and where they are logged. Built by the
/// dispatcher (in `wow-runtime`) and the saga spec.
#[derive(Debug, Clone, Copy)]
pub struct SagaDelivery<'a> {
    sender: &'a dyn SagaSender,
    log: &'a SentLog,
    link: &'a [(String, String)],
    deadlines: Option<&'a dyn DeadlineStore>,
    scope: Option<&'a AggregateScope>,
}

impl<'a> SagaDelivery<'a> {
    /// A run that sends through `sender` and logs every command in `log`.
    pub fn new(sender: &'a dyn SagaSender, log: &'a SentLog) -> Self {
        Self {
            sender,
            log,
            link: &[],
            deadlines: None,
            scope: None,
        }
    }

    /// Deadlines the saga schedules go into `deadlines` (SPEC DM-2).
    pub fn with_deadlines(mut self, deadlines: &'a dyn DeadlineStore) -> Self {
        self.deadlines = Some(deadlines);
        self
    }

    /// The owner and space of the aggregate whose stream the saga runs on, as its first
    /// stream recorded them (SPEC TN-2): a saga that does not act across owners
    /// ([`Saga::acts_across_owners`]) is held to them. Without it, the stream's own header
    /// stands for them: exact for a first stream, and for a later one whose command named
    /// the aggregate's owner (the node let it through only then), but a later stream whose
    /// command named no owner names none; so the dispatcher gives the recorded one.
    pub fn with_scope(mut self, scope: &'a AggregateScope) -> Self {
        self.scope = Some(scope);
        self
    }

    /// Every command sent carries `link` in its header: it is a link of the chained wait of
    /// the command that caused the stream (see the chained waits of `wow-runtime`).
    pub fn with_link(mut self, link: &'a [(String, String)]) -> Self {
        self.link = link;
        self
    }
}

/// A saga with its aggregate type erased, as the dispatcher and the pipeline store it. Every
/// [`Saga`] is one (write the typed trait; this one is sealed).
#[async_trait]
pub trait DynSaga: sealed::Sealed + Send + Sync + std::fmt::Debug {
    /// The saga's name ([`Saga::name`]), named otherwise so that a saga's own `name` is
    /// never ambiguous where both traits are in scope.
    fn consumer_name(&self) -> &str;

    /// Whether the saga acts across owners and spaces ([`Saga::acts_across_owners`]); named
    /// otherwise for the same reason as [`consumer_name`](Self::consumer_name).
    fn across_owners(&self) -> bool;

    /// Runs the saga on every event of `stream`, in order, one [`SagaContext`] per event,
    /// stopping at the first failure: a delete or recover through [`Saga::on_lifecycle`],
    /// every other event through [`Saga::on_event`]. A stream of another aggregate type is skipped (`Ok`);
    /// one of the saga's aggregate that does not decode fails with `IllegalState`.
    async fn run_stream(
        &self,
        stream: &DomainEventStream,
        delivery: SagaDelivery<'_>,
    ) -> Result<(), ConsumerError>;
}

#[async_trait]
impl<S: Saga> DynSaga for S {
    fn consumer_name(&self) -> &str {
        Saga::name(self)
    }

    fn across_owners(&self) -> bool {
        Saga::acts_across_owners(self)
    }

    async fn run_stream(
        &self,
        stream: &DomainEventStream,
        delivery: SagaDelivery<'_>,
    ) -> Result<(), ConsumerError> {
        let target = &stream.aggregate_id;
        if target.context_name != S::Aggregate::CONTEXT_NAME
            || target.aggregate_name != S::Aggregate::AGGREGATE_NAME
        {
            return Ok(());
        }
        // SPEC TN-2: the saga acts for the owner and space of the aggregate it reacts to,
        // unless it declares that it acts across owners.
        let held = (!self.acts_across_owners()).then(|| {
            delivery
                .scope
                .cloned()
                .unwrap_or_else(|| AggregateScope::of_header(&stream.header))
        });
        if LifecycleEvent::of_stream(stream).is_some() {
            // SPEC DM-6: a delete or recover is the saga's to see, in its place in the order.
            for envelope in &stream.body {
                let Some(event) = LifecycleEvent::of_event(&envelope.name) else {
                    continue;
                };
                let ctx = SagaContext::new(delivery.sender, &envelope.id, delivery.log)
                    .with_link(delivery.link)
                    .with_deadlines(delivery.deadlines, &stream.aggregate_id, Saga::name(self))
                    .held_to(held.as_ref());
                self.on_lifecycle(event, stream, &ctx).await?;
            }
            return Ok(());
        }
        let events = typed_events::<S::Aggregate>(stream).map_err(|error| {
            ConsumerError::new(
                ErrorCode::IllegalState,
                format!(
                    "saga {}: stream {} does not decode: {error}",
                    Saga::name(self),
                    stream.id
                ),
            )
        })?;
        for (envelope, event) in stream.body.iter().zip(&events) {
            let ctx = SagaContext::new(delivery.sender, &envelope.id, delivery.log)
                .with_link(delivery.link)
                .with_deadlines(delivery.deadlines, &stream.aggregate_id, Saga::name(self))
                .held_to(held.as_ref());
            self.on_event(event, stream, &ctx).await?;
        }
        Ok(())
    }
}
