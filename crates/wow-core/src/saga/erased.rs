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
    /// Only [`Saga`](crate::saga::Saga)s and [`MultiStream`](crate::saga::MultiStream)s are
    /// [`DynSaga`](crate::saga::DynSaga)s.
    pub trait Sealed {}

    impl<S: crate::saga::Saga> Sealed for S {}
    impl<S: crate::saga::MultiStreamSaga> Sealed for crate::saga::MultiStream<S> {}
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
        let run = Run::new(
            Saga::name(self),
            self.acts_across_owners(),
            stream,
            delivery,
        );
        if LifecycleEvent::of_stream(stream).is_some() {
            // SPEC DM-6: a delete or recover is the saga's to see, in its place in the order.
            for (envelope, event) in lifecycle_events(stream) {
                self.on_lifecycle(event, stream, &run.context(&envelope.id))
                    .await?;
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
            self.on_event(event, stream, &run.context(&envelope.id))
                .await?;
        }
        Ok(())
    }
}

/// One run of a saga on one stream: where its commands go, and the owner and space it is
/// held to.
pub(super) struct Run<'a> {
    name: &'a str,
    stream: &'a DomainEventStream,
    delivery: SagaDelivery<'a>,
    held: Option<AggregateScope>,
}

impl<'a> Run<'a> {
    pub(super) fn new(
        name: &'a str,
        across_owners: bool,
        stream: &'a DomainEventStream,
        delivery: SagaDelivery<'a>,
    ) -> Self {
        // SPEC TN-2: the saga acts for the owner and space of the aggregate it reacts to,
        // unless it declares that it acts across owners.
        let held = (!across_owners).then(|| {
            delivery
                .scope
                .cloned()
                .unwrap_or_else(|| AggregateScope::of_header(&stream.header))
        });
        Self {
            name,
            stream,
            delivery,
            held,
        }
    }

    /// The context of the event `event_id` of the stream: its commands' request ids derive
    /// from it (SPEC DS-3).
    pub(super) fn context<'c>(&'c self, event_id: &'c str) -> SagaContext<'c> {
        SagaContext::new(self.delivery.sender, event_id, self.delivery.log)
            .with_link(self.delivery.link)
            .with_deadlines(
                self.delivery.deadlines,
                &self.stream.aggregate_id,
                self.name,
            )
            .held_to(self.held.as_ref())
    }
}

/// The built-in delete and recover events of `stream`, with their envelopes.
pub(super) fn lifecycle_events(
    stream: &DomainEventStream,
) -> impl Iterator<Item = (&wow_model::event::DomainEvent, LifecycleEvent)> {
    stream.body.iter().filter_map(|envelope| {
        LifecycleEvent::of_event(&envelope.name).map(|event| (envelope, event))
    })
}
