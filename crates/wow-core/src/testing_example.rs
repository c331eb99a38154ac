//! A complete small aggregate, for the examples of the docs and the crate's tests: the counter
//! of the `Aggregate` documentation, and the same counter after a rename.

include!("counter_example.rs");

/// The counter after a rename: today called `tally`, `counter` before (its one alias). It
/// decides and applies as [`Counter`] does.
#[derive(Debug)]
pub struct Tally;

impl Aggregate for Tally {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "tally";
    const ALIASES: &'static [&'static str] = &["counter"];
    type State = CounterState;
    type Command = CounterCommand;
    type Event = CounterEvent;
    type Error = CounterError;

    fn handle(
        state: &CounterState,
        command: CounterCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<CounterEvent>, CounterError> {
        Counter::handle(state, command, ctx)
    }

    fn apply(state: &mut CounterState, event: &CounterEvent) {
        Counter::apply(state, event);
    }
}
