//! The `room_schedule` view, over rooms and bookings (SPEC DM-4): a row per room, with its
//! name, rate and whether it is open, and each booking of it with its night, its customer's
//! name and where it stands. Listed by whether the room is open
//! (`GET /views/room_schedule?open=true`).

use serde::{Deserialize, Serialize};
use wow_core::schemars;
use wow_core::view::{MultiStreamView, ViewInputs};

use crate::booking::{Booking, BookingEvent, BookingStatus};
use crate::room::{Room, RoomEvent};

/// One booking in a room's schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Entry {
    /// The booking's id.
    pub booking: String,
    /// The night.
    pub night: String,
    /// The customer's name.
    pub customer_name: String,
    /// Where it stands.
    pub status: BookingStatus,
}

/// A room's schedule.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Schedule {
    /// The room's name.
    pub name: String,
    /// Its rate, in cents.
    pub rate: u64,
    /// Whether it takes bookings.
    pub open: bool,
    /// Its bookings, in the order they were held.
    pub bookings: Vec<Entry>,
}

/// The view.
#[derive(Debug)]
pub struct RoomSchedule;

impl MultiStreamView for RoomSchedule {
    type State = Schedule;
    const NAME: &'static str = "room_schedule";
    const INDEXED: &'static [&'static str] = &["open"];

    fn inputs(inputs: ViewInputs<Schedule>) -> ViewInputs<Schedule> {
        inputs
            .on::<Room>(
                |_, meta| Some(meta.aggregate_id.id.clone()),
                |row, event, _| match event {
                    RoomEvent::RoomOpened(open) => {
                        row.name.clone_from(&open.name);
                        row.rate = open.rate;
                        row.open = true;
                    }
                    RoomEvent::RoomClosed(_) => row.open = false,
                    RoomEvent::RoomReopened(_) => row.open = true,
                },
            )
            .on::<Booking>(
                |event, _| {
                    Some(match event {
                        BookingEvent::NightHeld(held) => held.room.clone(),
                        BookingEvent::BookingConfirmed(confirmed) => confirmed.room.clone(),
                        BookingEvent::HoldExpired(expired) => expired.room.clone(),
                    })
                },
                |row, event, meta| {
                    let booking = &meta.aggregate_id.id;
                    let status = match event {
                        BookingEvent::NightHeld(held) => {
                            row.bookings.push(Entry {
                                booking: booking.clone(),
                                night: held.night.clone(),
                                customer_name: held.customer_name.clone(),
                                status: BookingStatus::Held,
                            });
                            return;
                        }
                        BookingEvent::BookingConfirmed(_) => BookingStatus::Confirmed,
                        BookingEvent::HoldExpired(_) => BookingStatus::Expired,
                    };
                    if let Some(entry) = row.bookings.iter_mut().find(|e| &e.booking == booking) {
                        entry.status = status;
                    }
                },
            )
    }
}
