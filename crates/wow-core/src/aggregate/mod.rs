//! The aggregate programming model: the trait a team implements, the registry that runs it
//! from JSON, and the given → when → expect test kit.

mod error;
mod model;
mod quarantine;
mod registry;
mod runtime;
mod spec;
mod state;

#[doc(hidden)]
#[path = "counter_example.rs"]
pub mod testing_example;

pub use error::{check_command, AggregateError};
pub use model::{Aggregate, CommandContext, DecodeDomainError, DomainError};
pub use quarantine::{QuarantinedAggregate, QuarantinedAggregates};
pub use registry::{AggregateRegistry, DuplicateAggregateName};
pub use runtime::{AggregateRuntime, DecodedCommand, TypedAggregateRuntime};
pub(crate) use spec::round_trip;
pub use spec::{typed_events, AggregateSpec, Expect, Given};
pub use state::AggregateState;
pub use wow_macros::DomainError;
