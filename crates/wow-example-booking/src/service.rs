//! The booking service (feature `service`; `wow serve --example booking` and the
//! `wow-booking` binary).

use wow_service::{Service, ServiceBuilder};

use crate::booking::Booking;
use crate::customer::Customer;
use crate::loyalty::LoyaltySaga;
use crate::room::Room;
use crate::schedule::RoomSchedule;

/// The booking service: `room`, `customer`, `booking`, the `loyalty` saga and the
/// `room_schedule` view. Give it a store (`.store(url)` or `.stores(..)`) and run it.
pub fn service() -> ServiceBuilder {
    Service::builder()
        .aggregate::<Room>()
        .aggregate::<Customer>()
        .aggregate::<Booking>()
        .multi_stream_saga(LoyaltySaga)
        .multi_stream_view::<RoomSchedule>()
}
