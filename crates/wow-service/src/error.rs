//! Why a service could not start or stopped with an error.

use wow_core::aggregate::RegistrationError;
use wow_runtime::compensation::CompensationError;
use wow_runtime::event::CatchUpError;

use crate::build_check::UncheckedCrate;
use crate::settings::SettingsError;
use crate::store::StoreError;

/// Why a service could not start, or stopped with an error. Each variant says what to fix;
/// none leaves anything running.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// The settings cannot be read (a flag, a `WOW_*` variable or the file).
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The store cannot be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An aggregate's former name could not be re-keyed to today's name
    /// ([`Aggregate::ALIASES`](wow_core::aggregate::Aggregate::ALIASES)); nothing was renamed.
    #[error("renaming an aggregate in the store failed: {0}")]
    Rename(#[from] wow_core::eventsourcing::RenameError),
    /// Two aggregates share a name (or an alias), or a command is named like a query route
    /// (`list`, `count`, ...): a programming error of the service.
    #[error(transparent)]
    DuplicateAggregate(#[from] RegistrationError),
    /// An aggregate consults a service ([`Aggregate::required_services`](wow_core::aggregate::Aggregate::required_services))
    /// that was not given ([`ServiceBuilder::service`](crate::ServiceBuilder::service)): a
    /// programming error of the service, refused before anything starts.
    #[error("aggregate `{aggregate}` needs the service {service}, and none was given: add it with ServiceBuilder::service")]
    MissingService {
        /// The aggregate.
        aggregate: &'static str,
        /// The service's type.
        service: &'static str,
    },
    /// An aggregate's decisions read another aggregate type
    /// ([`Aggregate::reads`](wow_core::aggregate::Aggregate::reads), SPEC DM-5) that the
    /// service does not serve: refused before anything starts. Add it with
    /// [`ServiceBuilder::aggregate`](crate::ServiceBuilder::aggregate).
    #[error("aggregate `{aggregate}` reads aggregate `{read}`, which this service does not serve: add it with ServiceBuilder::aggregate")]
    UnservedRead {
        /// The aggregate that reads.
        aggregate: String,
        /// The aggregate type it reads.
        read: String,
    },
    /// A crate the service runs code of (a registered aggregate's, or wow-core, which stands
    /// for the rest) was compiled so that an arithmetic overflow wraps silently, or with
    /// `panic = "abort"` (SPEC PX-1): the release profile of the team's workspace lacks
    /// `overflow-checks = true`. Refused before anything opens, unless the settings say
    /// [`OverflowChecks::Warn`](crate::OverflowChecks::Warn). The message names each crate and
    /// the `Cargo.toml` lines that fix it.
    #[error("{}", crate::build_check::refusal(.crates))]
    UncheckedBuild {
        /// Each crate at fault, with the aggregates it declares.
        crates: Vec<UncheckedCrate>,
    },
    /// The consumers could not catch up with the history (the store failed on the way);
    /// start again once it answers.
    #[error("catching up from the event store failed: {0}")]
    CatchUp(#[from] CatchUpError),
    /// The index of an aggregate's snapshot queries
    /// ([`Aggregate::QUERY_INDEX`](wow_core::aggregate::Aggregate::QUERY_INDEX)) could not be
    /// made; start again once the store answers.
    #[error("making the snapshot queries' index failed: {0}")]
    QueryIndex(#[from] wow_core::view::ViewStoreError),
    /// The compensation scheduler could not start.
    #[error("the compensation scheduler could not start: {0}")]
    Compensation(#[from] CompensationError),
    /// The listen address cannot be bound (in use, not an address, not allowed).
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// The server failed (its limits cannot be served with, say).
    #[error("the server failed: {0}")]
    Serve(std::io::Error),
    /// NATS could not be reached or set up (gateway and processor roles).
    #[cfg(feature = "nats")]
    #[error(transparent)]
    Nats(#[from] wow_nats::NatsError),
    /// The settings ask for what this build was compiled without (the gateway or processor
    /// role without the `nats` feature): build wow-service with the feature named.
    #[error(
        "{what} needs wow-service's `{feature}` feature, which this build was compiled without"
    )]
    NotBuiltIn {
        /// What was asked for.
        what: String,
        /// The feature that provides it.
        feature: &'static str,
    },
    /// The tokio runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}
