//! The event bus, the consumers of appended streams, and what keeps a consumer from applying
//! an event twice: processed-message records, the effect journal and positions.

mod bus;
mod consumer;
mod effect;
mod handled;
mod parking;
mod position;
mod processed;
mod store_error;

pub use bus::{DomainEventBus, EventBusError, NoopDomainEventBus};
pub use consumer::{ConsumerError, EventConsumer};
pub use effect::{
    effect_key, run_external_effect, EffectAttempt, EffectError, EffectJournal, EffectOutcome,
    EffectState, InMemoryEffectJournal, ResumedEffect,
};
pub use handled::{BadRuns, HandledVersions, RunsText};
pub use parking::{InMemoryParkedStreams, ParkedLane, ParkedStreams};
pub use position::{ConsumerPositions, InMemoryConsumerPositions, PositionRun};
pub use processed::{InMemoryProcessedMessages, ProcessError, Processed};
pub use store_error::ConsumerStoreError;
