//! The `customer` aggregate: registered with a name, awarded loyalty points (by the `loyalty`
//! saga).

use serde::{Deserialize, Serialize};
use validator::Validate;
use wow_core::aggregate::{Aggregate, CommandContext};
use wow_core::schemars;
use wow_core::{Command, Event};

/// The customer aggregate.
#[derive(Debug)]
pub struct Customer;

/// What a customer is now.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CustomerState {
    /// Their name.
    pub name: String,
    /// Their loyalty points.
    pub points: u64,
}

/// `register`: the customer's name (creates them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Register {
    /// The name: 1 to 100 characters.
    #[validate(length(min = 1, max = 100))]
    #[schemars(length(min = 1, max = 100))]
    pub name: String,
}

/// `award_points`: points and why (sent by the `loyalty` saga).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwardPoints {
    /// The points: at least 1.
    #[validate(range(min = 1))]
    #[schemars(range(min = 1))]
    pub points: u64,
    /// Why: 1 to 100 characters.
    #[validate(length(min = 1, max = 100))]
    #[schemars(length(min = 1, max = 100))]
    pub reason: String,
}

/// The customer's commands.
#[derive(Debug, Clone, PartialEq, Eq, Command)]
pub enum CustomerCommand {
    /// Registers the customer.
    #[command(create, validate)]
    Register(Register),
    /// Awards points.
    #[command(validate)]
    AwardPoints(AwardPoints),
}

/// The customer's events.
#[derive(Debug, Clone, PartialEq, Eq, Event)]
pub enum CustomerEvent {
    /// The customer registered.
    CustomerRegistered(Register),
    /// Points were awarded.
    PointsAwarded(AwardPoints),
}

impl Aggregate for Customer {
    const CONTEXT_NAME: &'static str = crate::CONTEXT;
    const AGGREGATE_NAME: &'static str = "customer";
    type State = CustomerState;
    type Command = CustomerCommand;
    type Event = CustomerEvent;
    type Error = std::convert::Infallible;

    fn handle(
        _: &CustomerState,
        command: CustomerCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<CustomerEvent>, std::convert::Infallible> {
        Ok(vec![match command {
            CustomerCommand::Register(register) => CustomerEvent::CustomerRegistered(register),
            CustomerCommand::AwardPoints(award) => CustomerEvent::PointsAwarded(award),
        }])
    }

    fn apply(state: &mut CustomerState, event: &CustomerEvent) {
        match event {
            CustomerEvent::CustomerRegistered(register) => state.name.clone_from(&register.name),
            CustomerEvent::PointsAwarded(award) => {
                state.points = state.points.saturating_add(award.points);
            }
        }
    }

    fn state_schema() -> serde_json::Value {
        wow_core::aggregate::state_schema_of::<CustomerState>()
    }
}
