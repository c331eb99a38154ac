//! # wow-tck
//!
//! The conformance suites every wow-rs backend runs (SPEC ES-2): each contract written once,
//! as plain async functions over a fresh store, and a macro per suite that stamps out one
//! `#[tokio::test]` per case. A backend is done when the whole suite passes against it:
//!
//! ```ignore
//! mod event_store {
//!     wow_tck::event_store_tck!(|| async { std::sync::Arc::new(my_backend::Store::open_fresh().await) });
//! }
//! ```
//!
//! The factory is called once per case and must return a fresh, empty store (for a database,
//! its own schema or file), so that cases run in parallel. The calling crate needs `tokio`
//! (with `macros` and `rt-multi-thread`) among its dev-dependencies.
//!
//! The cases panic on a broken promise, as tests do; that is why this crate allows
//! `unwrap` and `expect`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod deadline;
pub mod downstream;
pub mod downstream_runtime;
pub mod event_store;
pub mod fixtures;
pub mod generations;
pub mod lifecycle;
pub mod migration;
pub mod parking;
pub mod processed_message;
pub mod query;
pub mod query_bounds;
pub mod rename;
pub mod skip;
pub mod snapshot_store;
mod suites;
pub mod view_store;
