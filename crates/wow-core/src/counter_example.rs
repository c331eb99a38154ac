use serde::{Deserialize, Serialize};
use wow_core::aggregate::{Aggregate, CommandContext};
use wow_core::{Command, DomainError, Event};

/// A counter that starts once and adds positive amounts.
#[derive(Debug)]
pub struct Counter;

/// The counter's state.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct CounterState {
    /// The sum so far.
    pub value: u64,
}

/// Add `by` to the counter; `by` is at least 1.
#[derive(Debug, Clone, Serialize, Deserialize, validator::Validate, schemars::JsonSchema)]
pub struct Add {
    /// The amount.
    #[validate(range(min = 1))]
    pub by: u64,
}

/// The counter's commands.
#[derive(Debug, Clone, Command)]
pub enum CounterCommand {
    /// Creates the counter.
    #[command(create)]
    Start,
    /// Adds to it.
    #[command(validate)]
    Add(Add),
}

/// `by` was added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Added {
    /// The amount.
    pub by: u64,
}

/// The counter's events.
#[derive(Debug, Clone, PartialEq, Event)]
pub enum CounterEvent {
    /// The counter was created.
    Started,
    /// An amount was added.
    Added(Added),
}

/// The counter's business rules.
#[derive(Debug, thiserror::Error, DomainError)]
pub enum CounterError {
    /// The sum would not fit.
    #[error("the counter would overflow")]
    Overflow,
}

impl Aggregate for Counter {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "counter";
    type State = CounterState;
    type Command = CounterCommand;
    type Event = CounterEvent;
    type Error = CounterError;

    fn handle(
        state: &CounterState,
        command: CounterCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<CounterEvent>, CounterError> {
        match command {
            CounterCommand::Start => Ok(vec![CounterEvent::Started]),
            CounterCommand::Add(add) => {
                state
                    .value
                    .checked_add(add.by)
                    .ok_or(CounterError::Overflow)?;
                Ok(vec![CounterEvent::Added(Added { by: add.by })])
            }
        }
    }

    fn apply(state: &mut CounterState, event: &CounterEvent) {
        if let CounterEvent::Added(added) = event {
            state.value += added.by;
        }
    }
}

