//! # wow-contracts
//!
//! What a backend or a transport implements, each with its in-memory reference: the event
//! store (five narrow traits and their bundle) and the snapshot store, the command and
//! domain-event buses, consumers and their records (positions, processed messages, the effect
//! journal), views, deadlines and compensation records; [`stores::Stores`] bundles one
//! backend's stores. Each store trait has a forwarding base (a wrapper states only what it
//! changes) and a recording wrapper that proves it forwards.
//!
//! It imports only the model (`wow-model`). `wow-core` re-exports its items under the same
//! module names (`wow_core::eventsourcing`, `wow_core::view`, ...); every durable
//! implementation passes the matching suite of `wow-tck`.

pub mod command;
pub mod compensation;
pub mod deadline;
pub mod event;
pub mod eventsourcing;
pub mod stores;
pub mod view;

/// How this crate was compiled (SPEC PX-1); wow-core's framework measure reads it.
pub fn crate_build() -> wow_model::build::CrateBuild {
    wow_model::crate_build!()
}
