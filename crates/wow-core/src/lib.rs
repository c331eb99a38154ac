//! # wow-core
//!
//! The heart of wow-rs, an event-sourced command-processing framework in which every command
//! is safe to retry. Backends implement its contracts and prove it with the `wow-tck`
//! conformance suite; `wow-http` serves it; the example domains use nothing else.
//!
//! ## Three crates
//!
//! wow-rs's core is three crates, one layer each, each importing only those below it:
//! **`wow-model`** (plain data and the traits a team implements, such as [`AggregateId`],
//! [`CommandMessage`], [`aggregate::Aggregate`], [`view::View`]; no I/O), **`wow-contracts`**
//! (what a backend or transport implements, each with its in-memory reference, such as
//! [`eventsourcing::EventStore`] and [`command::CommandBus`], bundled by [`Stores`]), and this
//! crate: the programming model run from JSON ([`aggregate::AggregateRegistry`], the saga
//! context) and the given → when → expect kits. Each public module here holds its concept's
//! code (`src/aggregate/`, `src/saga/`, ...) and re-exports the model's and the contracts'
//! items of that concept by name, under the names of Wow, the framework wow-rs follows
//! (CommandGateway, EventStore, RequestIdChecker, ...). What runs a service over these
//! contracts is the `wow-runtime` crate; a domain crate needs this crate only.

extern crate self as wow_core;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

#[doc(hidden)]
pub mod testing_example;

pub mod aggregate;
pub mod build;
pub mod command;
pub mod compensation;
pub mod deadline;
pub mod event;
pub mod eventsourcing;
pub mod id;
pub mod outbox;
pub mod query;
pub mod saga;
pub mod unique_key;
pub mod view;

pub use wow_contracts::stores::Stores;
pub use wow_macros::{Command, Event};
pub use wow_model::aggregate::DomainError;
pub use wow_model::aggregate_id::{
    check_aggregate_id, check_request_id, group_by_aggregate, AggregateId, NamedAggregate,
    AGGREGATE_ID_PATTERN, DEFAULT_TENANT_ID, MAX_AGGREGATE_ID_BYTES,
};
pub use wow_model::command::{CommandMessage, CommandResult, CommandStage};
pub use wow_model::crate_build;
pub use wow_model::error::BoxError;
pub use wow_model::error_code::ErrorCode;
pub use wow_model::event::{DomainEvent, DomainEventStream};
pub use wow_model::panic::panic_message;

/// See [`schemars`]: `#[wow_core::async_trait]` on a saga's (or a consumer's) `impl`.
pub use async_trait::async_trait;
/// The crates a domain's payloads derive from, at the versions wow-core is built with: a
/// domain crate writes `use wow_core::schemars;` for `#[derive(schemars::JsonSchema)]` (the
/// schemas of `/openapi.json`), and names `validator` (or this re-export, with
/// `#[validate(crate = "wow_core::validator")]`) for its payloads' rules. Nothing else: the
/// server, the backends and axum are chosen in the service's `main`, through `wow-service`.
pub use schemars;
/// See [`schemars`]: the logs and spans a domain writes, into the service's subscriber.
pub use tracing;
/// See [`schemars`]: the validation rules of a command's payload.
pub use validator;
