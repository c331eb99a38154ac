//! # The `bank` example domain
//!
//! The domain of docs/http-api.md, a contract which outside tools test against: an `account`
//! aggregate, the `transfer` saga, the `account_balance` projection, the `notifications`
//! outbox, and the void `audit` `note` command.
//!
//! A plain domain library, written against `wow-core` alone, as a team writes one. The
//! service that registers its parts on the `wow-service` builder is behind the `service`
//! feature (`service::service`, the `wow-bank` binary, what `wow serve --example bank`
//! runs); the tests assemble their own in `tests/support`.
//!
//! Read `account.rs` first: it is what a team writes for an aggregate.

pub mod account;
pub mod audit;
pub mod notifications;
pub mod projection;
#[cfg(feature = "service")]
pub mod service;
pub mod transfer;

use wow_core::aggregate::{AggregateRegistry, RegistrationError};
use wow_core::NamedAggregate;

/// The context every bank aggregate belongs to.
pub const CONTEXT: &str = "bank";

/// The bank's aggregates: `account` and `audit`.
pub fn registry() -> Result<AggregateRegistry, RegistrationError> {
    let mut registry = AggregateRegistry::new();
    registry
        .register::<account::Account>()?
        .register::<audit::Audit>()?;
    Ok(registry)
}

/// The aggregates whose history the bank's consumers read.
pub fn consumed_aggregates() -> [NamedAggregate; 1] {
    [NamedAggregate::new(CONTEXT, "account")]
}

/// The names of the bank's views and outboxes, each also its consumer's name: what a
/// rebuild can empty (its rows and processed-message records in the view store, and its
/// positions), to be refilled from history by the next catch-up.
pub const READ_MODELS: [&str; 2] = [projection::NAME, notifications::NAME];
