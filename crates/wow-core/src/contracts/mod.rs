//! The contracts: what a backend or a transport implements, each with its in-memory reference.
//! The event store and snapshot store, the command and domain-event buses, consumers and
//! their records (positions, processed messages, the effect journal), views, and
//! compensation records; [`stores::Stores`] bundles one backend's stores.
//!
//! Rule: contracts import only the model. Every durable implementation passes the matching
//! suite of `wow-tck`.

pub(crate) mod command;
pub(crate) mod compensation;
pub(crate) mod deadline;
pub(crate) mod event;
pub(crate) mod eventsourcing;
pub(crate) mod stores;
pub(crate) mod view;
