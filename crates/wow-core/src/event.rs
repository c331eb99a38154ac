//! Domain events, the event bus, the consumers of appended streams, and what keeps a
//! consumer from applying an event twice: processed-message records, the effect journal
//! and positions. The dispatch and catch-up that drive consumers are `wow-runtime`'s.
pub use wow_contracts::event::{
    effect_key, run_external_effect, BadRuns, ConsumerError, ConsumerPositions, ConsumerStoreError,
    DomainEventBus, EffectAttempt, EffectError, EffectJournal, EffectOutcome, EffectState,
    EventBusError, EventConsumer, HandledVersions, InMemoryConsumerPositions,
    InMemoryEffectJournal, InMemoryParkedStreams, InMemoryProcessedMessages, NoopDomainEventBus,
    ParkedLane, ParkedStreams, PositionRun, ProcessError, Processed, ResumedEffect, RunsText,
};
pub use wow_model::event::{DomainEvent, DomainEventStream, EventShape, UpcastError, Upcasters};
