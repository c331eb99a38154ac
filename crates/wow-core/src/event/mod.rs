//! Domain events, the event bus, the dispatch of appended streams to their consumers, and
//! what keeps consumers from applying an event twice: processed-message records, the effect
//! journal, positions and catch-up.

mod bus;
mod catch_up;
mod consumer;
mod dispatcher;
mod effect;
mod position;
mod position_writer;
mod processed;
mod store_error;
mod stream;

pub use bus::{DomainEventBus, EventBusError, InMemoryDomainEventBus, NoopDomainEventBus};
pub use catch_up::{catch_up, CatchUpError, CatchUpProgress};
pub use consumer::{ConsumerError, EventConsumer};
pub use dispatcher::{EventDispatcher, EventDispatcherBuilder, NamedConsumer};
pub use effect::{
    effect_key, run_external_effect, EffectAttempt, EffectError, EffectJournal, EffectOutcome,
    EffectState, InMemoryEffectJournal, ResumedEffect,
};
pub use position::{ConsumerPositions, InMemoryConsumerPositions};
pub use processed::{InMemoryProcessedMessages, ProcessError, Processed};
pub use store_error::ConsumerStoreError;
pub use stream::{DomainEvent, DomainEventStream};
