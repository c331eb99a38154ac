//! The runtime: what runs commands and events over the contracts. Aggregates run from JSON,
//! the request-id check, the gateway, waiting, the processing node, the dispatch of appended
//! streams to consumers, catch-up, sagas, views as projections, compensation, and the local
//! pipeline that wires one process; the given → when → expect test kits run this same code.
//!
//! Rule: the runtime imports the contracts and the model, never the reverse; within it,
//! ownership runs one way (gateway → bus → node → event bus → dispatcher), with no object
//! loop closed by a setter.

pub(crate) mod aggregate;
pub(crate) mod command;
pub(crate) mod compensation;
pub(crate) mod event;
pub(crate) mod eventsourcing;
pub(crate) mod idempotency;
pub(crate) mod metrics;
pub(crate) mod outbox;
pub(crate) mod pipeline;
pub(crate) mod saga;
pub(crate) mod view;
