//! # wow-service
//!
//! A team's own wow-rs service in one page: name the aggregates, views, sagas and consumers
//! it runs, and [`ServiceBuilder::run`] does the rest that every service needs:
//!
//! - **settings** from flags, `WOW_*` variables and a TOML file, as `wow serve` ([`Settings`]);
//! - **logging** through `tracing` to standard error, filtered by `RUST_LOG`;
//! - **one store** by URL (`memory://`, `sqlite://PATH`, `postgres://...`) serving every
//!   contract: events, snapshots, consumer positions, compensation records, views, effects;
//! - **catch-up** of every registered consumer over the history of every aggregate it reads,
//!   before the first request;
//! - the **compensation scheduler**, started and stopped with the service;
//! - the **HTTP API** of wow-http, each view's `GET` route and its `/openapi.json` entry;
//! - a **graceful stop** on SIGINT or SIGTERM that writes every consumer position.
//!
//! ```no_run
//! # use wow_core::testing_example::Counter;
//! use wow_service::Service;
//!
//! fn main() -> std::process::ExitCode {
//!     Service::builder()
//!         .aggregate::<Counter>()
//!         .store("sqlite://./data/counter.db")
//!         .run()
//! }
//! ```
//!
//! For tests, [`ServiceBuilder::build`] starts it without a socket ([`RunningService`]).
//!
//! # What a team's crate depends on
//!
//! This crate re-exports what a service's code names ([`wow_core`], [`wow_http`], [`axum`],
//! [`serde`], [`tokio`], [`clap`], ...) at the versions it is built with; a domain crate needs
//! `wow-core` only. The derives name crates by absolute path: depend on `serde` and
//! `validator` too, or write `#[serde(crate = "wow_service::serde")]`. A team's workspace
//! sets `overflow-checks = true` in `[profile.release]`, or the start refuses the build
//! ([`ServiceError::UncheckedBuild`], SPEC PX-1).

mod args;
mod build_check;
mod builder;
#[cfg(feature = "nats")]
mod distributed;
#[cfg(not(feature = "nats"))]
#[path = "distributed_off.rs"]
mod distributed;
mod error;
mod fresh_consumer;
mod generations;
mod multi_view_route;
mod read_route;
mod running;
mod serve;
mod settings;
mod store;
mod tasks;
pub mod telemetry;
mod view_route;

pub use args::ServeArgs;
pub use build_check::{OverflowChecks, UncheckedCrate};
pub use builder::{Service, ServiceBuilder, ServiceContext};
pub use error::ServiceError;
pub use read_route::ReadRequest;
pub use running::RunningService;
pub use settings::{
    CommandStorage, DistributedSettings, Role, Settings, SettingsError, DEFAULT_BODY_LIMIT,
    DEFAULT_DEADLINE_POLL, DEFAULT_LISTEN, DEFAULT_RETRY_EVERY, DEFAULT_STORE,
    DEFAULT_WAIT_TIMEOUT,
};
pub use store::{open_store, StoreError};
pub use tasks::BackgroundContext;
pub use telemetry::{init_logging, shutdown_telemetry};

pub use {
    async_trait, axum, clap, schemars, serde, serde_json, tokio, validator, wow_core, wow_http,
    wow_runtime,
};
