//! Sagas: react to an aggregate's typed events by sending commands through the gateway, with
//! request ids derived from the event that caused them (SPEC DS-3), so a redelivered event
//! cannot start a second business intent. [`SagaSpec`] tests a saga without a store or a bus.
//!
//! A team writes the typed [`Saga`]: it names its aggregate, receives that aggregate's event
//! enum (each stream decoded once), and sends typed commands with
//! [`SagaContext::send_to`], whose rejections come back as the target's own error type
//! ([`StepError`]). The dispatcher and the pipeline hold sagas as [`DynSaga`], which every
//! [`Saga`] is: nothing compares an event or an error by its name.
//!
//! A saga acts for the owner and space of the aggregate whose event it reacts to (SPEC TN-2):
//! every command it sends carries them, and the processing node refuses one whose target
//! belongs to another owner or space (`IllegalAccessOwnerAggregate` /
//! `IllegalAccessSpaceAggregate`), which fails the saga's step like any other failure. A
//! saga whose business is to act on other owners' aggregates says so with
//! [`Saga::acts_across_owners`].

mod context;
mod erased;
mod multi;
mod spec;
mod step;

use async_trait::async_trait;

use wow_contracts::event::ConsumerError;
use wow_model::aggregate::{Aggregate, LifecycleEvent};
use wow_model::event::DomainEventStream;

pub use context::{SagaContext, SagaSender, SagaTarget, SentLog};
pub use erased::{DynSaga, SagaDelivery};
pub use multi::{FollowedEvents, MultiStream, MultiStreamSaga, OneOf2, OneOf3};
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

    /// Whether the saga acts across owners and spaces (SPEC TN-2). Default `false`: every
    /// command it sends carries the owner and space of the aggregate whose event it reacts
    /// to (the owner and space that aggregate's first stream recorded), so the processing
    /// node refuses a command for an aggregate of another owner or space
    /// (`IllegalAccessOwnerAggregate` / `IllegalAccessSpaceAggregate`) and the saga's step
    /// fails with that code (a compensation record, as for any failure); an aggregate the
    /// saga creates belongs to that owner and space. An aggregate that records no owner
    /// gives its sagas none to carry: they reach every owner's aggregates, as a caller bound
    /// to the whole tenant does.
    ///
    /// `true`: the saga's commands carry no owner and no space of the event's (only what
    /// the saga itself puts in a message's header), so they reach the aggregates of every
    /// owner and space of the tenant, as a caller bound to the whole tenant does. Declare it
    /// only for a saga whose business is to act for one owner on another's aggregate (a
    /// buyer's order holding a seller's stock, a transfer crediting another customer's
    /// account), and keep what it can do there to what the event entitles: the target's own
    /// rules are the only bound left.
    fn acts_across_owners(&self) -> bool {
        false
    }

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
