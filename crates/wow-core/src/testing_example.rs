//! Complete small aggregates, for the examples of the docs and the tests of every crate: the
//! counter of the `Aggregate` documentation and the same counter after a rename; a member
//! whose handle is a unique key; a hold that expires by a deadline; a booking that holds a
//! slot (a key) and expires (a deadline), as its delete and recover must keep them.

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
    /// Confirms it: it no longer expires. Callers send it, and the auto-confirm saga
    /// schedules it.
    #[command(deadline, public)]
    Confirm(Nothing),
    /// Expires it; sent by its deadline only.
    #[command(deadline)]
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

/// A booking of a slot, as the issue of SPEC DM-6 met it: holding a slot claims it (key space
/// `slot`, SPEC DM-1) and schedules the hold's expiry (`expire`, SPEC DM-2); confirming it
/// cancels the expiry and keeps the slot; an expired booking gives the slot up. Deleting the
/// booking releases the slot and suspends the expiry; recovering it takes both back.
#[derive(Debug)]
pub struct Booking;

/// Where a booking stands.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BookingStatus {
    /// Not held yet.
    #[default]
    New,
    /// Held, expiring at its time unless confirmed.
    Held,
    /// Confirmed: it keeps its slot.
    Confirmed,
    /// Expired: its slot is free.
    Expired,
}

/// The booking's state.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct BookingState {
    /// The slot it holds or held.
    pub slot: Option<String>,
    /// Where it stands.
    pub status: BookingStatus,
    /// When a held booking expires.
    pub expires_at: Option<i64>,
}

/// Which slot to hold, and for how long.
#[derive(
    Debug, Clone, PartialEq, Serialize, Deserialize, validator::Validate, schemars::JsonSchema,
)]
pub struct HoldSlot {
    /// The slot.
    #[validate(length(min = 1))]
    pub slot: String,
    /// Minutes until the hold expires unless confirmed.
    #[validate(range(min = 1))]
    pub minutes: u32,
}

/// The booking's commands.
#[derive(Debug, Clone, PartialEq, Command)]
pub enum BookingCommand {
    /// Holds the slot.
    #[command(create, validate)]
    Hold(HoldSlot),
    /// Confirms the hold: it no longer expires.
    Confirm(Nothing),
    /// Expires the hold; sent by its deadline only.
    #[command(deadline)]
    Expire(Nothing),
}

/// A slot held until a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotHeld {
    /// The slot.
    pub slot: String,
    /// When the hold expires unless confirmed, in milliseconds since the Unix epoch.
    pub expires_at: i64,
}

/// The booking's events.
#[derive(Debug, Clone, PartialEq, Event)]
pub enum BookingEvent {
    /// The slot is held.
    Held(SlotHeld),
    /// The hold is confirmed.
    Confirmed(Nothing),
    /// The hold expired.
    Expired(Nothing),
}

/// The booking's business rules.
#[derive(Debug, thiserror::Error, DomainError)]
pub enum BookingError {
    /// Only a held booking is confirmed or expires.
    #[error("the booking is not held")]
    NotHeld,
}

impl Aggregate for Booking {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "booking";
    type State = BookingState;
    type Command = BookingCommand;
    type Event = BookingEvent;
    type Error = BookingError;

    fn handle(
        state: &BookingState,
        command: BookingCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<BookingEvent>, BookingError> {
        let held = state.status == BookingStatus::Held;
        match command {
            BookingCommand::Hold(hold) => Ok(vec![BookingEvent::Held(SlotHeld {
                slot: hold.slot,
                expires_at: ctx.now.saturating_add(i64::from(hold.minutes) * 60_000),
            })]),
            BookingCommand::Confirm(_) if held => Ok(vec![BookingEvent::Confirmed(Nothing {})]),
            BookingCommand::Expire(_) if held => Ok(vec![BookingEvent::Expired(Nothing {})]),
            BookingCommand::Confirm(_) | BookingCommand::Expire(_) => Err(BookingError::NotHeld),
        }
    }

    fn apply(state: &mut BookingState, event: &BookingEvent) {
        match event {
            BookingEvent::Held(held) => {
                state.slot = Some(held.slot.clone());
                state.expires_at = Some(held.expires_at);
                state.status = BookingStatus::Held;
            }
            BookingEvent::Confirmed(_) => state.status = BookingStatus::Confirmed,
            BookingEvent::Expired(_) => state.status = BookingStatus::Expired,
        }
    }

    fn unique_keys(state: &BookingState) -> Option<Vec<wow_core::unique_key::UniqueKey>> {
        let holds = matches!(state.status, BookingStatus::Held | BookingStatus::Confirmed);
        Some(
            state
                .slot
                .iter()
                .filter(|_| holds)
                .map(|slot| wow_core::unique_key::UniqueKey::new("slot", slot.clone()))
                .collect(),
        )
    }

    fn deadlines(
        state: &BookingState,
    ) -> Option<Vec<wow_core::deadline::Deadline<BookingCommand>>> {
        Some(
            state
                .expires_at
                .filter(|_| state.status == BookingStatus::Held)
                .map(|at| {
                    wow_core::deadline::Deadline::new(
                        "expire",
                        at,
                        BookingCommand::Expire(Nothing {}),
                    )
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

/// A sign-up that reserves a user name while the person confirms their address (SPEC DM-1,
/// Wow's `PreparedValue.ttlAt`): starting it reserves the name (key space `username`) for
/// `hold_ms`, and confirming it claims the name for good. A reservation nobody confirmed in
/// time frees the name by itself; when another sign-up took it meanwhile, the confirmation is
/// refused `DuplicateKey` and nothing is recorded but that refusal.
#[derive(Debug)]
pub struct SignUp;

/// The sign-up's state.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignUpState {
    /// The user name it reserved or took.
    pub name: Option<String>,
    /// Until when the name is reserved, while not confirmed (milliseconds since the Unix
    /// epoch).
    pub reserved_until: Option<i64>,
    /// Whether it was confirmed: the name is then held for good.
    pub confirmed: bool,
}

/// The user name to reserve, and for how long.
#[derive(
    Debug, Clone, PartialEq, Serialize, Deserialize, validator::Validate, schemars::JsonSchema,
)]
pub struct StartSignUp {
    /// The user name.
    #[validate(length(min = 1))]
    pub name: String,
    /// How long the name is held unconfirmed, in milliseconds.
    #[validate(range(min = 1))]
    pub hold_ms: i64,
}

/// The sign-up's commands.
#[derive(Debug, Clone, PartialEq, Command)]
pub enum SignUpCommand {
    /// Starts the sign-up, reserving the name.
    #[command(create)]
    Start(StartSignUp),
    /// Confirms it, taking the name for good.
    Confirm(Nothing),
}

/// A name reserved until a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NameReserved {
    /// The user name.
    pub name: String,
    /// Until when (milliseconds since the Unix epoch).
    pub until: i64,
}

/// The sign-up's events.
#[derive(Debug, Clone, PartialEq, Event)]
pub enum SignUpEvent {
    /// The name was reserved.
    NameReserved(NameReserved),
    /// The sign-up was confirmed.
    SignUpConfirmed(Nothing),
}

/// The sign-up's business rules.
#[derive(Debug, thiserror::Error, DomainError)]
pub enum SignUpError {
    /// Only a sign-up that was started and not confirmed is confirmed.
    #[error("the sign-up is not pending")]
    NotPending,
}

impl Aggregate for SignUp {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "sign-up";
    type State = SignUpState;
    type Command = SignUpCommand;
    type Event = SignUpEvent;
    type Error = SignUpError;

    fn handle(
        state: &SignUpState,
        command: SignUpCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<SignUpEvent>, SignUpError> {
        match command {
            SignUpCommand::Start(start) => Ok(vec![SignUpEvent::NameReserved(NameReserved {
                name: start.name,
                until: ctx.now.saturating_add(start.hold_ms),
            })]),
            SignUpCommand::Confirm(_) if !state.confirmed => {
                Ok(vec![SignUpEvent::SignUpConfirmed(Nothing {})])
            }
            SignUpCommand::Confirm(_) => Err(SignUpError::NotPending),
        }
    }

    fn apply(state: &mut SignUpState, event: &SignUpEvent) {
        match event {
            SignUpEvent::NameReserved(reserved) => {
                state.name = Some(reserved.name.clone());
                state.reserved_until = Some(reserved.until);
            }
            SignUpEvent::SignUpConfirmed(_) => {
                state.confirmed = true;
                state.reserved_until = None;
            }
        }
    }

    fn unique_keys(state: &SignUpState) -> Option<Vec<wow_core::unique_key::UniqueKey>> {
        Some(
            state
                .name
                .iter()
                .map(|name| {
                    let key = wow_core::unique_key::UniqueKey::new("username", name.clone());
                    match state.reserved_until {
                        Some(until) => key.reserved_until(until),
                        None => key,
                    }
                })
                .collect(),
        )
    }
}

/// A room that can be opened and closed: what a [`Stay`] reads before it books one (SPEC
/// DM-5).
#[derive(Debug)]
pub struct Room;

/// The room's state.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomState {
    /// Whether it takes bookings.
    pub open: bool,
}

/// The room's commands.
#[derive(Debug, Clone, PartialEq, Command)]
pub enum RoomCommand {
    /// Opens the room (creates it).
    #[command(create)]
    Open(Nothing),
    /// Closes the room to new stays.
    Close(Nothing),
}

/// The room's events.
#[derive(Debug, Clone, PartialEq, Event)]
pub enum RoomEvent {
    /// The room takes bookings.
    Opened(Nothing),
    /// The room takes no more bookings.
    Closed(Nothing),
}

impl Aggregate for Room {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "room";
    type State = RoomState;
    type Command = RoomCommand;
    type Event = RoomEvent;
    type Error = std::convert::Infallible;

    fn handle(
        _: &RoomState,
        command: RoomCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<RoomEvent>, std::convert::Infallible> {
        Ok(vec![match command {
            RoomCommand::Open(_) => RoomEvent::Opened(Nothing {}),
            RoomCommand::Close(_) => RoomEvent::Closed(Nothing {}),
        }])
    }

    fn apply(state: &mut RoomState, event: &RoomEvent) {
        state.open = matches!(event, RoomEvent::Opened(_));
    }
}

/// A stay in a [`Room`]: booked only while the room exists and is open, a decision that
/// reads another aggregate and holds only while that room stays as read (SPEC DM-5).
#[derive(Debug)]
pub struct Stay;

/// The stay's state.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct StayState {
    /// The room booked.
    pub room: Option<String>,
}

/// Which room to book.
#[derive(
    Debug, Clone, PartialEq, Serialize, Deserialize, validator::Validate, schemars::JsonSchema,
)]
pub struct BookRoom {
    /// The room's id.
    #[validate(length(min = 1))]
    pub room: String,
}

/// The stay's commands.
#[derive(Debug, Clone, PartialEq, Command)]
pub enum StayCommand {
    /// Books the room (creates the stay).
    #[command(create)]
    Book(BookRoom),
}

/// The stay's events.
#[derive(Debug, Clone, PartialEq, Event)]
pub enum StayEvent {
    /// The room is booked.
    Booked(BookRoom),
}

/// The stay's business rules.
#[derive(Debug, thiserror::Error, DomainError)]
pub enum StayError {
    /// The room does not exist (or is deleted).
    #[error("no such room")]
    NoSuchRoom,
    /// The room is closed.
    #[error("the room is closed")]
    RoomClosed,
}

impl Aggregate for Stay {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "stay";
    type State = StayState;
    type Command = StayCommand;
    type Event = StayEvent;
    type Error = StayError;

    fn reads() -> Vec<wow_core::NamedAggregate> {
        vec![Room::named_aggregate()]
    }

    fn handle(
        _: &StayState,
        _: StayCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<StayEvent>, StayError> {
        // Every command reads the room: see `decide`.
        Err(StayError::NoSuchRoom)
    }

    async fn decide(
        _: &StayState,
        command: StayCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<StayEvent>, wow_core::aggregate::Refusal<StayError>> {
        let StayCommand::Book(book) = command;
        let room = ctx.read::<Room>(&book.room).await?;
        if !room.is_live() {
            return Err(wow_core::aggregate::Refusal::Rejected(
                StayError::NoSuchRoom,
            ));
        }
        if !room.state.open {
            return Err(wow_core::aggregate::Refusal::Rejected(
                StayError::RoomClosed,
            ));
        }
        Ok(vec![StayEvent::Booked(book)])
    }

    fn apply(state: &mut StayState, event: &StayEvent) {
        let StayEvent::Booked(book) = event;
        state.room = Some(book.room.clone());
    }
}
