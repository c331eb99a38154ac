//! The aggregate programming model a team implements: the `Aggregate` trait (state,
//! commands, events, the decision and the fold), its typed errors, its lifecycle (soft delete
//! and recover), the access rules of owners and spaces, and the state a store keeps.

mod access;
mod error;
mod lifecycle;
mod model;
mod reads;
mod state;

pub use access::{check_access, AccessRefused, AggregateScope};
pub use error::{check_command, AggregateError};
pub use lifecycle::{
    is_lifecycle_command, is_lifecycle_event, Lifecycle, LifecycleEvent, AGGREGATE_DELETED,
    AGGREGATE_RECOVERED, DELETE_AGGREGATE, LIFECYCLE_REVISION, RECOVER_AGGREGATE,
};
pub use model::{state_schema_of, Aggregate, CommandContext, DecodeDomainError, DomainError};
pub use reads::{AggregateReader, AggregateReads, Read, VersionCondition};
pub use state::AggregateState;
pub use wow_macros::DomainError;
