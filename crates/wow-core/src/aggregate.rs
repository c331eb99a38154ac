//! The aggregate programming model: the trait a team implements, the registry that runs
//! it from JSON, quarantine of an aggregate whose code panicked (SPEC PX-1), and the
//! given → when → expect test kit.
pub use crate::domain::aggregate::{
    typed_events, AggregateRegistry, AggregateRuntime, AggregateSpec, Decided, DecodedCommand,
    DuplicateAggregateName, Expect, Given, QuarantinedAggregate, QuarantinedAggregates,
    RegistrationError, ReservedCommandName, TypedAggregateRuntime, UnknownAggregate,
    RESERVED_COMMAND_NAMES,
};
pub use crate::model::aggregate::{
    check_access, check_command, is_lifecycle_command, is_lifecycle_event, state_schema_of,
    AccessRefused, Aggregate, AggregateError, AggregateScope, AggregateState, CommandContext,
    DecodeDomainError, DomainError, Lifecycle, LifecycleEvent, AGGREGATE_DELETED,
    AGGREGATE_RECOVERED, DELETE_AGGREGATE, LIFECYCLE_REVISION, RECOVER_AGGREGATE,
};
pub use crate::model::services::{Refusal, ServiceFailure, ServiceNeed, Services};
