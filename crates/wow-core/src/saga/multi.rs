//! Sagas over several aggregate types (SPEC DM-4): one saga that reacts to the events of
//! each type it follows, with what every saga keeps per input stream (a record of what it
//! sent, request ids derived from the event, failures recorded for compensation).

use async_trait::async_trait;

use super::erased::{lifecycle_events, Run};
use super::{DynSaga, SagaContext, SagaDelivery};
use crate::aggregate::typed_events;
use wow_contracts::event::ConsumerError;
use wow_model::aggregate::{Aggregate, AggregateError, LifecycleEvent};
use wow_model::aggregate_id::NamedAggregate;
use wow_model::error_code::ErrorCode;
use wow_model::event::DomainEventStream;

/// The events a [`MultiStreamSaga`] follows: one enum over the event enums of its aggregate
/// types. [`OneOf2`] and [`OneOf3`] are ready-made; implement it for an enum of your own to
/// follow more.
pub trait FollowedEvents: Sized + Send + Sync + 'static {
    /// The aggregate types followed.
    fn aggregates() -> Vec<NamedAggregate>;

    /// `stream`'s events, decoded with their aggregate's upcasters, one per stored event
    /// (the built-in lifecycle events left out); `None` for a stream of a type not followed.
    fn decode(stream: &DomainEventStream) -> Option<Result<Vec<Self>, AggregateError>>;
}

/// An event of `A` or of `B`: what a saga over two aggregate types receives.
#[derive(Debug, Clone, PartialEq)]
pub enum OneOf2<A: Aggregate, B: Aggregate> {
    /// An event of `A`.
    First(A::Event),
    /// An event of `B`.
    Second(B::Event),
}

/// An event of `A`, of `B` or of `C`: what a saga over three aggregate types receives.
#[derive(Debug, Clone, PartialEq)]
pub enum OneOf3<A: Aggregate, B: Aggregate, C: Aggregate> {
    /// An event of `A`.
    First(A::Event),
    /// An event of `B`.
    Second(B::Event),
    /// An event of `C`.
    Third(C::Event),
}

/// Whether `stream` is of the aggregate type `A`.
fn is_of<A: Aggregate>(stream: &DomainEventStream) -> bool {
    stream.aggregate_id.aggregate_name == A::AGGREGATE_NAME
        && stream.aggregate_id.context_name == A::CONTEXT_NAME
}

/// `stream`'s events as `A`'s, each wrapped by `wrap`, when the stream is `A`'s.
fn decoded<A: Aggregate, T>(
    stream: &DomainEventStream,
    wrap: fn(A::Event) -> T,
) -> Option<Result<Vec<T>, AggregateError>> {
    is_of::<A>(stream)
        .then(|| typed_events::<A>(stream).map(|events| events.into_iter().map(wrap).collect()))
}

impl<A: Aggregate, B: Aggregate> FollowedEvents for OneOf2<A, B> {
    fn aggregates() -> Vec<NamedAggregate> {
        vec![A::named_aggregate(), B::named_aggregate()]
    }

    fn decode(stream: &DomainEventStream) -> Option<Result<Vec<Self>, AggregateError>> {
        decoded::<A, _>(stream, Self::First).or_else(|| decoded::<B, _>(stream, Self::Second))
    }
}

impl<A: Aggregate, B: Aggregate, C: Aggregate> FollowedEvents for OneOf3<A, B, C> {
    fn aggregates() -> Vec<NamedAggregate> {
        vec![
            A::named_aggregate(),
            B::named_aggregate(),
            C::named_aggregate(),
        ]
    }

    fn decode(stream: &DomainEventStream) -> Option<Result<Vec<Self>, AggregateError>> {
        decoded::<A, _>(stream, Self::First)
            .or_else(|| decoded::<B, _>(stream, Self::Second))
            .or_else(|| decoded::<C, _>(stream, Self::Third))
    }
}

/// A saga over the events of several aggregate types (SPEC DM-4): for each event of a
/// stream of a type it follows, the commands that should follow, sent through the
/// [`SagaContext`], as a [`Saga`](super::Saga) does for one type.
///
/// Each input stream keeps what a saga's stream keeps: its commands' request ids derive
/// from the event (SPEC DS-3), so a redelivered event of either type sends nothing twice;
/// a failure fails the saga's stage and is recorded for compensation (SPEC DS-4); its
/// position is kept per input aggregate. It acts for the owner and space of the aggregate
/// whose event it reacts to, unless it declares otherwise (SPEC TN-2).
///
/// Hand it to a service as [`MultiStream`] (`ServiceBuilder::multi_stream_saga` does).
///
/// ```
/// use wow_core::event::{ConsumerError, DomainEventStream};
/// use wow_core::saga::{MultiStreamSaga, OneOf2, SagaContext};
/// use wow_core::testing_example::{Room, Stay};
///
/// #[derive(Debug)]
/// struct Housekeeping;
///
/// #[wow_core::async_trait]
/// impl MultiStreamSaga for Housekeeping {
///     type Events = OneOf2<Room, Stay>;
///
///     fn name(&self) -> &str {
///         "housekeeping"
///     }
///
///     async fn on_event(
///         &self,
///         event: &OneOf2<Room, Stay>,
///         stream: &DomainEventStream,
///         ctx: &SagaContext<'_>,
///     ) -> Result<(), ConsumerError> {
///         match event {
///             OneOf2::First(_room_event) => Ok(()),
///             OneOf2::Second(_stay_event) => Ok(()),
///         }
///     }
/// }
/// ```
#[async_trait]
pub trait MultiStreamSaga: Send + Sync + std::fmt::Debug + 'static {
    /// The events followed, over every type followed.
    type Events: FollowedEvents;

    /// The saga's name (a wait can name it; it is its consumer name).
    fn name(&self) -> &str;

    /// Whether the saga acts across owners and spaces, as
    /// [`Saga::acts_across_owners`](super::Saga::acts_across_owners) says. Default `false`.
    fn acts_across_owners(&self) -> bool {
        false
    }

    /// Reacts to `event`, one of `stream`'s events, decoded. Failing here fails the saga's
    /// stage only; the stream is retried later (compensation).
    async fn on_event(
        &self,
        event: &Self::Events,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError>;

    /// Reacts to the soft delete or recover of an aggregate of a type followed (SPEC DM-6),
    /// as [`Saga::on_lifecycle`](super::Saga::on_lifecycle) does. Default: nothing.
    async fn on_lifecycle(
        &self,
        event: LifecycleEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let _ = (event, stream, ctx);
        Ok(())
    }
}

/// A [`MultiStreamSaga`] as the dispatcher and the pipeline hold a saga
/// (`Arc::new(MultiStream(saga))` is an `Arc<dyn DynSaga>`).
#[derive(Debug)]
pub struct MultiStream<S>(pub S);

#[async_trait]
impl<S: MultiStreamSaga> DynSaga for MultiStream<S> {
    fn consumer_name(&self) -> &str {
        self.0.name()
    }

    fn across_owners(&self) -> bool {
        self.0.acts_across_owners()
    }

    async fn run_stream(
        &self,
        stream: &DomainEventStream,
        delivery: SagaDelivery<'_>,
    ) -> Result<(), ConsumerError> {
        let Some(events) = S::Events::decode(stream) else {
            return Ok(());
        };
        let run = Run::new(self.0.name(), self.0.acts_across_owners(), stream, delivery);
        if LifecycleEvent::of_stream(stream).is_some() {
            for (envelope, event) in lifecycle_events(stream) {
                self.0
                    .on_lifecycle(event, stream, &run.context(&envelope.id))
                    .await?;
            }
            return Ok(());
        }
        let events = events.map_err(|error| {
            ConsumerError::new(
                ErrorCode::IllegalState,
                format!(
                    "saga {}: stream {} does not decode: {error}",
                    self.0.name(),
                    stream.id
                ),
            )
        })?;
        for (envelope, event) in stream.body.iter().zip(&events) {
            self.0
                .on_event(event, stream, &run.context(&envelope.id))
                .await?;
        }
        Ok(())
    }
}
