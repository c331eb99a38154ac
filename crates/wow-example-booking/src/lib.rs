//! # The `booking` example domain
//!
//! A booking service written across aggregates, with no idempotency, join or route code of
//! its own:
//!
//! - a `room`, whose name no other room of the tenant may hold (SPEC DM-1), with a nightly
//!   rate, opened and closed;
//! - a `customer`, with loyalty points;
//! - a `booking` that holds a room's slot: it reads the room and the customer first and is
//!   refused when either does not exist or the room is closed, its append holding only while
//!   both stay as read (SPEC DM-5); the slot is a unique key, so a slot is held once; the
//!   hold expires by a deadline unless it is confirmed (SPEC DM-2);
//! - the `loyalty` saga over bookings and customers (SPEC DM-4): a welcome bonus when a
//!   customer registers, points when a booking is confirmed;
//! - the `room_schedule` view over rooms and bookings (SPEC DM-4): a row per room with its
//!   bookings and each customer's name, listed by whether the room is open.
//!
//! A plain domain library on `wow-core` alone; its service is behind the `service` feature
//! (`service::service`, the `wow-booking` binary, what `wow serve --example booking` runs).

pub mod booking;
pub mod customer;
pub mod loyalty;
pub mod room;
pub mod schedule;
#[cfg(feature = "service")]
pub mod service;

/// The context every booking aggregate belongs to.
pub const CONTEXT: &str = "booking";
