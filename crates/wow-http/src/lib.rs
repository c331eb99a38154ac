//! # wow-http
//!
//! The HTTP API of docs/http-api.md, generated from the aggregate registry: no route is written
//! per command. Commands answer with a `CommandResult` as JSON, or one server-sent event per
//! stage; history, state and the outcome look-up (SPEC TO-1) read the event store; bad input
//! is a 4xx with a `CommandResult` that says what is wrong, and records nothing.
//!
//! The router needs a gateway and the query side, not a whole pipeline: a process that only
//! runs a gateway serves it too ([`HttpState::for_gateway`]); [`HttpState::new`] is the
//! shorthand for a process running the whole [`LocalPipeline`](wow_runtime::pipeline::LocalPipeline).
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use wow_runtime::command::CommandGateway;
//! # use wow_core::eventsourcing::EventStore;
//! # async fn demo(gateway: CommandGateway, events: Arc<dyn EventStore>) {
//! use wow_http::{HttpConfig, HttpState, QuerySide};
//! let state = HttpState::for_gateway(gateway, QuerySide::new(events), HttpConfig::default());
//! let app = wow_http::router(state);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await.unwrap();
//! let stop = std::future::pending(); // the service's own stop: Ctrl-C, SIGTERM
//! wow_http::serve(listener, app, wow_http::ServerLimits::default(), stop).await.unwrap();
//! # }
//! ```

mod access;
mod auth;
mod binding;
mod commands;
mod compensation;
mod config;
mod consumers;
mod create_id;
mod dsl_queries;
mod error;
mod extract;
mod fallback;
pub mod fresh;
mod ids;
mod input;
mod lag;
mod metrics;
mod openapi;
mod operator;
mod operator_deadlines;
mod prefix;
mod queries;
mod reads;
mod rebuilds;
mod routes;
mod rules;
mod server;
mod service_routes;
mod state;
mod status;
mod strict_json;
mod ui;

pub use access::gated;
pub use auth::{caller_tenant, NoTenant, Tenant};
pub use binding::{InvalidBinding, TokenBinding};
pub use compensation::TOTAL_HEADER;
pub use config::{HttpConfig, ReadLimits};
pub use create_id::derived_aggregate_id;
pub use fallback::error_fallbacks;
pub use metrics::HttpMetrics;
pub use operator::check_operator_token;
pub use routes::{router, routes};
pub use server::{serve, InvalidLimits, ServerLimits, MAX_READ_TIMEOUT};
pub use state::{HttpState, NodeStatus, QuerySide};
pub use status::{status_for, ERROR_CODE_HEADER, REPLAYED_HEADER};
