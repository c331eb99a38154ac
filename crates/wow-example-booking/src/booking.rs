//! The `booking` aggregate: holds one night of a room for a customer, at the room's rate,
//! until it is confirmed or its hold expires.
//!
//! Holding reads the room and the customer from the store (SPEC DM-5): a hold for a room or
//! customer that does not exist, or for a closed room, is refused, and a hold is recorded
//! only while the room and the customer are still as read (a room closed meanwhile makes the
//! node decide again, and refuse). The night is a unique key (SPEC DM-1): a second hold of
//! the same room and night is refused `DuplicateKey`. A hold expires by its deadline
//! (SPEC DM-2) unless it is confirmed first.

use serde::{Deserialize, Serialize};
use validator::Validate;
use wow_core::aggregate::{Aggregate, CommandContext, Refusal};
use wow_core::deadline::Deadline;
use wow_core::schemars;
use wow_core::unique_key::UniqueKey;
use wow_core::{Command, DomainError, Event, NamedAggregate};

use crate::customer::Customer;
use crate::room::Room;

/// How long a hold lasts unless it is confirmed, by default, in minutes.
pub const HOLD_MINUTES: u32 = 15;

/// The booking aggregate.
#[derive(Debug)]
pub struct Booking;

/// Where a booking stands.
#[derive(
    Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum BookingStatus {
    /// Not held yet.
    #[default]
    New,
    /// Held until `expires_at`, unless confirmed.
    Held,
    /// Confirmed: it keeps its night.
    Confirmed,
    /// Expired: its night is free.
    Expired,
}

/// What a booking is now.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BookingState {
    /// The room.
    pub room: String,
    /// The customer.
    pub customer: String,
    /// The night, `YYYY-MM-DD`.
    pub night: String,
    /// The price, in cents: the room's rate when it was held.
    pub price: u64,
    /// Where it stands.
    pub status: BookingStatus,
    /// When a held booking expires, in milliseconds since the Unix epoch.
    pub expires_at: Option<i64>,
}

/// `hold`: the room, the customer and the night.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hold {
    /// The room's id.
    #[validate(length(min = 1, max = 64))]
    #[schemars(length(min = 1, max = 64))]
    pub room: String,
    /// The customer's id.
    #[validate(length(min = 1, max = 64))]
    #[schemars(length(min = 1, max = 64))]
    pub customer: String,
    /// The night, `YYYY-MM-DD`.
    #[validate(length(equal = 10))]
    #[schemars(regex(pattern = r"^\d{4}-\d{2}-\d{2}$"))]
    pub night: String,
    /// Minutes until the hold expires unless confirmed (default 15).
    #[serde(default)]
    #[validate(range(min = 1, max = 1440))]
    pub minutes: Option<u32>,
}

/// `confirm` and `expire` take nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Nothing {}

/// The booking's commands.
#[derive(Debug, Clone, PartialEq, Eq, Command)]
pub enum BookingCommand {
    /// Holds the night.
    #[command(create, validate)]
    Hold(Hold),
    /// Confirms the hold: it no longer expires.
    Confirm(Nothing),
    /// Expires the hold; sent by its deadline only.
    #[command(deadline)]
    Expire(Nothing),
}

/// A night held: what the decision read of the room and the customer is in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// The room.
    pub room: String,
    /// The customer.
    pub customer: String,
    /// The customer's name when the night was held.
    pub customer_name: String,
    /// The night.
    pub night: String,
    /// The room's rate when the night was held.
    pub price: u64,
    /// When the hold expires unless confirmed.
    pub expires_at: i64,
}

/// A hold confirmed, with what the `loyalty` saga awards points for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confirmed {
    /// The room.
    pub room: String,
    /// The customer.
    pub customer: String,
    /// The price paid.
    pub price: u64,
}

/// A hold expired: its night is free.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expired {
    /// The room.
    pub room: String,
}

/// The booking's events.
#[derive(Debug, Clone, PartialEq, Eq, Event)]
pub enum BookingEvent {
    /// See [`Held`].
    NightHeld(Held),
    /// See [`Confirmed`].
    BookingConfirmed(Confirmed),
    /// See [`Expired`].
    HoldExpired(Expired),
}

/// The booking's business rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, DomainError)]
pub enum BookingError {
    /// The room does not exist in the tenant (or is deleted).
    #[error("no such room")]
    NoSuchRoom,
    /// The room takes no bookings.
    #[error("the room is closed")]
    RoomClosed,
    /// The customer does not exist in the tenant (or is deleted).
    #[error("no such customer")]
    NoSuchCustomer,
    /// Only a held booking is confirmed or expires.
    #[error("the booking is not held")]
    NotHeld,
}

impl Aggregate for Booking {
    const CONTEXT_NAME: &'static str = crate::CONTEXT;
    const AGGREGATE_NAME: &'static str = "booking";
    type State = BookingState;
    type Command = BookingCommand;
    type Event = BookingEvent;
    type Error = BookingError;

    fn reads() -> Vec<NamedAggregate> {
        vec![Room::named_aggregate(), Customer::named_aggregate()]
    }

    /// Holding reads the room and the customer; the other commands decide in `handle`.
    async fn decide(
        state: &BookingState,
        command: BookingCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<BookingEvent>, Refusal<BookingError>> {
        let BookingCommand::Hold(hold) = command else {
            return Ok(Self::handle(state, command, ctx)?);
        };
        let room = ctx.read::<Room>(&hold.room).await?;
        if !room.is_live() {
            return Err(BookingError::NoSuchRoom.into());
        }
        if !room.state.open {
            return Err(BookingError::RoomClosed.into());
        }
        let customer = ctx.read::<Customer>(&hold.customer).await?;
        if !customer.is_live() {
            return Err(BookingError::NoSuchCustomer.into());
        }
        let minutes = i64::from(hold.minutes.unwrap_or(HOLD_MINUTES));
        Ok(vec![BookingEvent::NightHeld(Held {
            room: hold.room,
            customer: hold.customer,
            customer_name: customer.state.name,
            night: hold.night,
            price: room.state.rate,
            expires_at: ctx.now.saturating_add(minutes * 60_000),
        })])
    }

    fn handle(
        state: &BookingState,
        command: BookingCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<BookingEvent>, BookingError> {
        let held = state.status == BookingStatus::Held;
        match command {
            // Decided in `decide`, which reads the room and the customer.
            BookingCommand::Hold(_) => Err(BookingError::NoSuchRoom),
            BookingCommand::Confirm(_) if held => {
                Ok(vec![BookingEvent::BookingConfirmed(Confirmed {
                    room: state.room.clone(),
                    customer: state.customer.clone(),
                    price: state.price,
                })])
            }
            BookingCommand::Expire(_) if held => Ok(vec![BookingEvent::HoldExpired(Expired {
                room: state.room.clone(),
            })]),
            BookingCommand::Confirm(_) | BookingCommand::Expire(_) => Err(BookingError::NotHeld),
        }
    }

    fn apply(state: &mut BookingState, event: &BookingEvent) {
        match event {
            BookingEvent::NightHeld(held) => {
                state.room.clone_from(&held.room);
                state.customer.clone_from(&held.customer);
                state.night.clone_from(&held.night);
                state.price = held.price;
                state.expires_at = Some(held.expires_at);
                state.status = BookingStatus::Held;
            }
            BookingEvent::BookingConfirmed(_) => state.status = BookingStatus::Confirmed,
            BookingEvent::HoldExpired(_) => state.status = BookingStatus::Expired,
        }
    }

    /// The room's night, while held or confirmed: held once.
    fn unique_keys(state: &BookingState) -> Option<Vec<UniqueKey>> {
        let holds = matches!(state.status, BookingStatus::Held | BookingStatus::Confirmed);
        Some(if holds {
            vec![UniqueKey::new(
                "room_night",
                format!("{}/{}", state.room, state.night),
            )]
        } else {
            Vec::new()
        })
    }

    fn deadlines(state: &BookingState) -> Option<Vec<Deadline<BookingCommand>>> {
        Some(match (state.status, state.expires_at) {
            (BookingStatus::Held, Some(at)) => vec![Deadline::new(
                "expire",
                at,
                BookingCommand::Expire(Nothing {}),
            )],
            _ => Vec::new(),
        })
    }

    fn state_schema() -> serde_json::Value {
        wow_core::aggregate::state_schema_of::<BookingState>()
    }
}
