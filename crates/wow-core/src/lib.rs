//! # wow-core
//!
//! The heart of wow-rs, an event-sourced command-processing framework in which every command
//! is safe to retry. This crate holds the portable parts: the model (ids, [`CommandMessage`],
//! [`DomainEventStream`], [`CommandStage`], [`CommandResult`], [`ErrorCode`]), the aggregate
//! programming model ([`aggregate::Aggregate`] and its test kit), and the store contracts
//! ([`eventsourcing::EventStore`], [`eventsourcing::SnapshotStore`], [`view::ViewStore`]) with
//! in-memory versions, and portable read models ([`view::View`], run by
//! [`view::ViewProjection`] over any view store).
//! Backends implement the contracts and prove it with the `wow-tck` conformance suite.
//!
//! Concept names follow the source document of `SPEC.md` (CommandGateway, EventStore,
//! RequestIdChecker, ...), so a reader who knows the word finds the module by it.

extern crate self as wow_core;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
pub mod aggregate;
mod aggregate_id;
pub mod command;
pub mod compensation;
mod error_code;
pub mod event;
pub mod eventsourcing;
pub mod id;
pub mod idempotency;
pub mod metrics;
pub mod outbox;
mod panic;
pub mod pipeline;
pub mod saga;
pub mod stores;
pub mod view;

pub use aggregate::DomainError;
pub use aggregate_id::{
    check_aggregate_id, AggregateId, NamedAggregate, DEFAULT_TENANT_ID, MAX_AGGREGATE_ID_BYTES,
};
pub use command::{CommandMessage, CommandResult, CommandStage};
pub use error_code::ErrorCode;
pub use event::{DomainEvent, DomainEventStream};
pub use stores::Stores;
pub use wow_macros::{Command, Event};
