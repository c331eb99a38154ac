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

/// A member's handle, unique in its tenant (key space `handle`, SPEC DM-1): registered once,
/// changed later (the key moves), and `admin` is reserved (a business rejection).
#[derive(Debug)]
pub struct Member;

/// The member's state: the handle it holds, once registered.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct MemberState {
    /// The handle.
    pub handle: Option<String>,
}

/// A handle to take.
#[derive(
    Debug, Clone, PartialEq, Serialize, Deserialize, validator::Validate, schemars::JsonSchema,
)]
pub struct Handle {
    /// The handle.
    #[validate(length(min = 1))]
    pub handle: String,
}

/// The member's commands.
#[derive(Debug, Clone, Command)]
pub enum MemberCommand {
    /// Creates the member with its handle.
    #[command(create)]
    Register(Handle),
    /// Changes its handle.
    ChangeHandle(Handle),
}

/// The member's events.
#[derive(Debug, Clone, PartialEq, Event)]
pub enum MemberEvent {
    /// The member took a handle, first or instead of the one it had.
    HandleTaken(Handle),
}

/// The member's business rules.
#[derive(Debug, thiserror::Error, DomainError)]
pub enum MemberError {
    /// `admin` belongs to no member.
    #[error("the handle `admin` is reserved")]
    Reserved,
}

impl Aggregate for Member {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "member";
    type State = MemberState;
    type Command = MemberCommand;
    type Event = MemberEvent;
    type Error = MemberError;

    fn handle(
        _: &MemberState,
        command: MemberCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<MemberEvent>, MemberError> {
        let (MemberCommand::Register(handle) | MemberCommand::ChangeHandle(handle)) = command;
        if handle.handle == "admin" {
            return Err(MemberError::Reserved);
        }
        Ok(vec![MemberEvent::HandleTaken(handle)])
    }

    fn apply(state: &mut MemberState, event: &MemberEvent) {
        let MemberEvent::HandleTaken(taken) = event;
        state.handle = Some(taken.handle.clone());
    }

    fn unique_keys(state: &MemberState) -> Option<Vec<wow_core::unique_key::UniqueKey>> {
        Some(
            state
                .handle
                .iter()
                .map(|handle| wow_core::unique_key::UniqueKey::new("handle", handle.clone()))
                .collect(),
        )
    }
}
