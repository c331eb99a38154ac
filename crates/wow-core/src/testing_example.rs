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

/// A hold that expires unless it is confirmed (SPEC DM-2): placing it schedules the deadline
/// `expire` for `minutes` later, confirming it cancels the deadline, and when the deadline is
/// due the scheduler sends `expire`, which only a pending hold accepts.
#[derive(Debug)]
pub struct Hold;

/// The hold's state.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldState {
    /// When it expires unless confirmed, while pending.
    pub expires_at: Option<i64>,
    /// Whether it was confirmed.
    pub confirmed: bool,
    /// Whether it expired.
    pub expired: bool,
}

/// How long a hold lasts.
#[derive(
    Debug, Clone, PartialEq, Serialize, Deserialize, validator::Validate, schemars::JsonSchema,
)]
pub struct PlaceHold {
    /// Minutes until it expires.
    #[validate(range(min = 1))]
    pub minutes: u32,
}

/// A command with no fields.
#[derive(
    Debug,
    Clone,
    Default,
    PartialEq,
    Serialize,
    Deserialize,
    validator::Validate,
    schemars::JsonSchema,
)]
pub struct Nothing {}

/// The hold's commands.
#[derive(Debug, Clone, PartialEq, Command)]
pub enum HoldCommand {
    /// Places the hold.
    #[command(create)]
    Place(PlaceHold),
    /// Confirms it: it no longer expires.
    Confirm(Nothing),
    /// Expires it; sent by its deadline.
    Expire(Nothing),
}

/// When a placed hold expires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldPlaced {
    /// Milliseconds since the Unix epoch.
    pub expires_at: i64,
}

/// The hold's events.
#[derive(Debug, Clone, PartialEq, Event)]
pub enum HoldEvent {
    /// Placed, expiring at its time.
    Placed(HoldPlaced),
    /// Confirmed.
    Confirmed(Nothing),
    /// Expired.
    Expired(Nothing),
}

/// The hold's business rules.
#[derive(Debug, thiserror::Error, DomainError)]
pub enum HoldError {
    /// Only a pending hold is confirmed or expires.
    #[error("the hold is no longer pending")]
    NotPending,
}

impl Aggregate for Hold {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "hold";
    type State = HoldState;
    type Command = HoldCommand;
    type Event = HoldEvent;
    type Error = HoldError;

    fn handle(
        state: &HoldState,
        command: HoldCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<HoldEvent>, HoldError> {
        let pending = state.expires_at.is_some() && !state.confirmed && !state.expired;
        match command {
            HoldCommand::Place(place) => Ok(vec![HoldEvent::Placed(HoldPlaced {
                expires_at: ctx.now.saturating_add(i64::from(place.minutes) * 60_000),
            })]),
            HoldCommand::Confirm(_) if pending => Ok(vec![HoldEvent::Confirmed(Nothing {})]),
            HoldCommand::Expire(_) if pending => Ok(vec![HoldEvent::Expired(Nothing {})]),
            HoldCommand::Confirm(_) | HoldCommand::Expire(_) => Err(HoldError::NotPending),
        }
    }

    fn apply(state: &mut HoldState, event: &HoldEvent) {
        match event {
            HoldEvent::Placed(placed) => state.expires_at = Some(placed.expires_at),
            HoldEvent::Confirmed(_) => state.confirmed = true,
            HoldEvent::Expired(_) => state.expired = true,
        }
    }

    fn deadlines(state: &HoldState) -> Option<Vec<wow_core::deadline::Deadline<HoldCommand>>> {
        let pending = !state.confirmed && !state.expired;
        Some(
            state
                .expires_at
                .filter(|_| pending)
                .map(|at| {
                    wow_core::deadline::Deadline::new("expire", at, HoldCommand::Expire(Nothing {}))
                })
                .into_iter()
                .collect(),
        )
    }
}

/// Confirms every hold thirty seconds after it is placed, by a deadline the saga schedules;
/// a hold confirmed sooner cancels it.
#[derive(Debug)]
pub struct AutoConfirm;

#[async_trait::async_trait]
impl crate::saga::Saga for AutoConfirm {
    type Aggregate = crate::testing_example::Hold;

    fn name(&self) -> &str {
        "auto-confirm"
    }

    async fn on_event(
        &self,
        event: &crate::testing_example::HoldEvent,
        stream: &crate::DomainEventStream,
        ctx: &crate::saga::SagaContext<'_>,
    ) -> Result<(), crate::event::ConsumerError> {
        use crate::testing_example::{Hold, HoldCommand, HoldEvent, Nothing};
        match event {
            HoldEvent::Placed(_) => {
                ctx.schedule::<Hold>(
                    "confirm",
                    stream.create_time + 30_000,
                    stream.aggregate_id.clone(),
                    HoldCommand::Confirm(Nothing {}),
                )
                .await
            }
            HoldEvent::Confirmed(_) => ctx.cancel_scheduled("confirm").await.map(drop),
            HoldEvent::Expired(_) => Ok(()),
        }
    }
}
