//! # wow-runtime
//!
//! What runs a wow-rs service over the contracts of `wow-core`: the request-id check
//! ([`idempotency`]), the [`command::CommandGateway`] and waiting, the processing node
//! ([`command::DefaultCommandHandler`]), loading, caching and snapshotting aggregates
//! ([`eventsourcing`]), the dispatch of appended streams to their consumers with catch-up
//! ([`event`]), views as projections ([`view`]), outbox processing and delivery ([`outbox`]),
//! the [`compensation::CompensationScheduler`], the pipeline's counters ([`metrics`]),
//! [`pipeline::LocalPipeline`], which wires all of them in one process, and the
//! [`background::Background`] work every started pipeline runs beside it (retries, deadlines).
//!
//! A domain crate does not depend on this crate: it writes its aggregates, views, sagas and
//! outboxes against `wow-core` alone, and a service's `main` (through `wow-service`) or a
//! test runs them here. The module names follow `wow-core`'s, so the gateway is
//! `wow_runtime::command::CommandGateway` beside `wow_core::command::CommandMessage`.
//!
//! Rule: ownership runs one way (gateway → bus → node → event bus → dispatcher), with no
//! object loop closed by a setter.

pub mod background;
pub mod command;
pub mod compensation;
pub mod deadline;
pub mod event;
pub mod eventsourcing;
pub mod idempotency;
pub mod metrics;
pub mod outbox;
pub mod pipeline;
pub mod trace_context;
pub mod view;

mod saga_sender;

// The entry points by name; every other item is in its module.
pub use background::{Background, BackgroundConfig};
pub use command::{CommandGateway, CommandGatewayBuilder, DefaultCommandHandler};
pub use compensation::CompensationScheduler;
pub use deadline::DeadlineScheduler;
pub use event::{EventDispatcher, EventDispatcherBuilder};
pub use idempotency::{DefaultRequestIdChecker, RequestIdChecker};
pub use pipeline::{LocalPipeline, LocalPipelineBuilder};
pub use view::ViewProjection;
