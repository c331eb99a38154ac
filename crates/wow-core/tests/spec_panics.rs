//! The test kit reports a handler's panic as the node answers it (SPEC PX-1): a failed
//! command with `InternalServerError`, not a failed test, so a spec asserts it like any other
//! outcome.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use wow_core::aggregate::{Aggregate, AggregateSpec, CommandContext};
use wow_core::testing_example::{Add, Counter, CounterCommand, CounterEvent};
use wow_core::ErrorCode;

/// A counter whose `add` of 13 panics, the way an unchecked index or an `expect` would.
#[derive(Debug)]
struct Superstitious;

impl Aggregate for Superstitious {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "superstitious";
    type State = <Counter as Aggregate>::State;
    type Command = CounterCommand;
    type Event = CounterEvent;
    type Error = <Counter as Aggregate>::Error;

    fn handle(
        state: &Self::State,
        command: CounterCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<CounterEvent>, Self::Error> {
        if let CounterCommand::Add(Add { by: 13 }) = command {
            panic!("thirteen");
        }
        Counter::handle(state, command, ctx)
    }

    fn apply(state: &mut Self::State, event: &CounterEvent) {
        Counter::apply(state, event);
    }
}

#[test]
fn a_panicking_handler_is_the_nodes_internal_server_error_not_the_tests_panic() {
    let expect = AggregateSpec::<Superstitious>::new()
        .given([CounterEvent::Started])
        .when(CounterCommand::Add(Add { by: 13 }))
        .expect_error_code(ErrorCode::InternalServerError);
    assert!(
        expect.error().unwrap().to_string().contains("thirteen"),
        "{:?}",
        expect.error()
    );
    assert_eq!(expect.version(), 1, "nothing was recorded");
    AggregateSpec::<Superstitious>::new()
        .given([CounterEvent::Started])
        .when(CounterCommand::Add(Add { by: 2 }))
        .expect_state(|state| assert_eq!(state.value, 2));
}
