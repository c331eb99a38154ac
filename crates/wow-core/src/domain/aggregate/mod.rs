mod quarantine;
mod registry;
mod runtime;
mod spec;

pub use quarantine::{QuarantinedAggregate, QuarantinedAggregates};
pub use registry::{
    AggregateRegistry, DuplicateAggregateName, RegistrationError, ReservedCommandName,
    UnknownAggregate, RESERVED_COMMAND_NAMES,
};
pub use runtime::{AggregateRuntime, Decided, DecodedCommand, TypedAggregateRuntime};
pub(crate) use spec::round_trip;
pub use spec::{typed_events, AggregateSpec, Expect, Given};
