//! The aggregate programming model: the trait a team implements, the registry that runs
//! it from JSON, quarantine of an aggregate whose code panicked (SPEC PX-1), and the
//! given → when → expect test kit.

mod quarantine;
mod registry;
mod runtime;
mod spec;

pub use quarantine::{QuarantinedAggregate, QuarantinedAggregates};
pub use registry::{
    AggregateRegistry, DuplicateAggregateName, RegistrationError, ReservedCommandName,
    UnknownAggregate, RESERVED_COMMAND_NAMES,
};
pub(crate) use runtime::decode_events;
pub use runtime::{AggregateRuntime, Decided, DecodedCommand, TypedAggregateRuntime};
pub(crate) use spec::round_trip;
pub use spec::{typed_events, AggregateSpec, Expect, Given};

pub use wow_model::aggregate::{
    check_access, check_command, is_lifecycle_command, is_lifecycle_event, state_schema_of,
    AccessRefused, Aggregate, AggregateError, AggregateReader, AggregateReads, AggregateScope,
    AggregateState, CommandContext, DecodeDomainError, DomainError, Lifecycle, LifecycleEvent,
    Read, VersionCondition, AGGREGATE_DELETED, AGGREGATE_RECOVERED, DELETE_AGGREGATE,
    LIFECYCLE_REVISION, RECOVER_AGGREGATE,
};
pub use wow_model::services::{Refusal, ServiceFailure, ServiceNeed, Services};
