mod error;
mod model;
mod state;

pub use error::{check_command, AggregateError};
pub use model::{Aggregate, CommandContext, DecodeDomainError, DomainError};
pub use state::AggregateState;
pub use wow_macros::DomainError;
