//! Sagas: react to an aggregate's typed events by sending commands through the gateway, with
//! request ids derived from the event that caused them (SPEC DS-3), so a redelivered event
//! cannot start a second business intent. [`SagaSpec`] tests a saga without a store or a bus.
//!
//! A team writes the typed [`Saga`]: it names its aggregate, receives that aggregate's event
//! enum (each stream decoded once), and sends typed commands with
//! [`SagaContext::send_to`], whose rejections come back as the target's own error type
//! ([`StepError`]). The dispatcher and the pipeline hold sagas as [`DynSaga`], which every
//! [`Saga`] is: nothing compares an event or an error by its name.

mod context;
mod erased;
mod spec;
mod step;

use async_trait::async_trait;

use crate::contracts::event::ConsumerError;
use crate::model::aggregate::{Aggregate, LifecycleEvent};
use crate::model::event::DomainEventStream;

pub use context::{SagaContext, SagaSender, SentLog};
pub use erased::{DynSaga, SagaDelivery};
pub use spec::{SagaExpect, SagaGiven, SagaReply, SagaSpec, SentCommand};
pub use step::{StepError, REJECTION_DETAIL};

/// A saga over the events of one aggregate type: for each event of an appended stream of
/// [`Saga::Aggregate`], the commands that should follow, sent through the [`SagaContext`].
///
/// Streams of other aggregates are skipped, by type, before the saga sees them. A stream of
/// its aggregate that does not decode into the event enum fails the saga's stage
/// (`IllegalState`) and is recorded for compensation, as a view's projection does.
#[async_trait]
pub trait Saga: Send + Sync + std::fmt::Debug + 'static {
    /// The aggregate whose events the saga reacts to.
    type Aggregate: Aggregate;

    /// The saga's name (a wait can name it; it is its consumer name).
    fn name(&self) -> &str;

    /// Reacts to `event`, one of `stream`'s events, decoded. Failing here fails the saga's
    /// stage only; the stream is retried later (compensation).
    async fn on_event(
        &self,
        event: &<Self::Aggregate as Aggregate>::Event,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError>;

    /// Reacts to the aggregate's soft delete or recover (SPEC DM-6), the built-in event of
    /// `stream`, in its place in the aggregate's version order: cancel what the saga
    /// scheduled for the aggregate ([`SagaContext::cancel_scheduled`]), release what it holds
    /// elsewhere, and take it up again on the recover. Commands sent here get request ids
    /// derived from the built-in event, as [`on_event`](Self::on_event)'s do. Default: nothing.
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

/// The request id of the `index`-th command a saga sends for the event `event_id`: the same
/// on every delivery of that event.
pub fn saga_request_id(event_id: &str, index: usize) -> String {
    format!("{event_id}/{index}")
}
