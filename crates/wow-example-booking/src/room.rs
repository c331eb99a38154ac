//! The `room` aggregate: opened with a name unique in its tenant and a nightly rate, closed
//! to new bookings, opened again.

use serde::{Deserialize, Serialize};
use validator::Validate;
use wow_core::aggregate::{Aggregate, CommandContext};
use wow_core::schemars;
use wow_core::unique_key::UniqueKey;
use wow_core::{Command, DomainError, Event};

/// The room aggregate.
#[derive(Debug)]
pub struct Room;

/// What a room is now.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RoomState {
    /// Its name: no other room of the tenant holds it.
    pub name: String,
    /// Its price per night, in cents.
    pub rate: u64,
    /// Whether it takes bookings.
    pub open: bool,
}

/// `open`: the room's name and rate (creates it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Open {
    /// The name: 1 to 100 characters.
    #[validate(length(min = 1, max = 100))]
    #[schemars(length(min = 1, max = 100))]
    pub name: String,
    /// The price per night, in cents: at least 1.
    #[validate(range(min = 1))]
    #[schemars(range(min = 1))]
    pub rate: u64,
}

/// `close` and `reopen` take nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Nothing {}

/// The room's commands.
#[derive(Debug, Clone, PartialEq, Eq, Command)]
pub enum RoomCommand {
    /// Opens the room, claiming its name.
    #[command(create, validate)]
    Open(Open),
    /// Closes it to new bookings.
    Close(Nothing),
    /// Opens it again.
    Reopen(Nothing),
}

/// The room's events.
#[derive(Debug, Clone, PartialEq, Eq, Event)]
pub enum RoomEvent {
    /// The room was opened with its name and rate.
    RoomOpened(Open),
    /// The room takes no new bookings.
    RoomClosed(Nothing),
    /// The room takes bookings again.
    RoomReopened(Nothing),
}

/// The room's business rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, DomainError)]
pub enum RoomError {
    /// Closing a closed room.
    #[error("the room is already closed")]
    AlreadyClosed,
    /// Reopening an open room.
    #[error("the room is already open")]
    AlreadyOpen,
}

impl Aggregate for Room {
    const CONTEXT_NAME: &'static str = crate::CONTEXT;
    const AGGREGATE_NAME: &'static str = "room";
    type State = RoomState;
    type Command = RoomCommand;
    type Event = RoomEvent;
    type Error = RoomError;

    fn handle(
        state: &RoomState,
        command: RoomCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<RoomEvent>, RoomError> {
        match command {
            RoomCommand::Open(open) => Ok(vec![RoomEvent::RoomOpened(open)]),
            RoomCommand::Close(_) if !state.open => Err(RoomError::AlreadyClosed),
            RoomCommand::Close(nothing) => Ok(vec![RoomEvent::RoomClosed(nothing)]),
            RoomCommand::Reopen(_) if state.open => Err(RoomError::AlreadyOpen),
            RoomCommand::Reopen(nothing) => Ok(vec![RoomEvent::RoomReopened(nothing)]),
        }
    }

    fn apply(state: &mut RoomState, event: &RoomEvent) {
        match event {
            RoomEvent::RoomOpened(open) => {
                state.name.clone_from(&open.name);
                state.rate = open.rate;
                state.open = true;
            }
            RoomEvent::RoomClosed(_) => state.open = false,
            RoomEvent::RoomReopened(_) => state.open = true,
        }
    }

    fn unique_keys(state: &RoomState) -> Option<Vec<UniqueKey>> {
        Some(
            Some(&state.name)
                .filter(|name| !name.is_empty())
                .map(|name| UniqueKey::new("room_name", name.clone()))
                .into_iter()
                .collect(),
        )
    }

    fn state_schema() -> serde_json::Value {
        wow_core::aggregate::state_schema_of::<RoomState>()
    }
}
