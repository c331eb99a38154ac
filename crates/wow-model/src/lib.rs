//! # wow-model
//!
//! The model of wow-rs: plain data and the traits a team implements for its own types. No
//! I/O, no task, and nothing of the rest of the framework: the store contracts are
//! `wow-contracts`, the programming model run from JSON and the test kits are `wow-core`,
//! which re-exports this crate's items under the same module names (`wow_core::aggregate`,
//! `wow_core::command`, ...). A domain crate depends on `wow-core`.

pub mod aggregate;
pub mod aggregate_id;
pub mod build;
pub mod command;
pub mod deadline;
pub mod error;
pub mod error_code;
pub mod event;
pub mod eventsourcing;
pub mod id;
pub mod outbox;
pub mod panic;
pub mod query;
pub mod services;
pub mod unique_key;
pub mod view;
