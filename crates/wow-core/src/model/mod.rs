//! The model: plain data and the traits a team implements for its own types. Ids and time,
//! aggregate ids, error codes, command messages and results, stages, streams of domain
//! events, the aggregate and view programming models, and the decisions a store records.
//!
//! Rule: the model imports nothing else of the crate. It does no I/O and holds no task.

pub(crate) mod aggregate;
pub(crate) mod aggregate_id;
pub(crate) mod build;
pub(crate) mod command;
pub(crate) mod deadline;
pub(crate) mod error;
pub(crate) mod error_code;
pub(crate) mod event;
pub(crate) mod eventsourcing;
pub(crate) mod id;
pub(crate) mod outbox;
pub(crate) mod panic;
pub(crate) mod query;
pub(crate) mod services;
pub(crate) mod unique_key;
pub(crate) mod view;
