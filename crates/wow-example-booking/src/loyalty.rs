//! The `loyalty` saga, over bookings and customers (SPEC DM-4): a welcome bonus when a
//! customer registers, and a point per euro when a booking is confirmed. Each command's
//! request id derives from the event (SPEC DS-3), so a redelivered event of either type
//! awards nothing twice.

use wow_core::aggregate::Aggregate;
use wow_core::event::ConsumerError;
use wow_core::saga::{MultiStreamSaga, OneOf2, SagaContext};
use wow_core::DomainEventStream;

use crate::booking::{Booking, BookingEvent};
use crate::customer::{AwardPoints, Customer, CustomerCommand, CustomerEvent};

/// Points a new customer starts with.
pub const WELCOME_POINTS: u64 = 50;

/// Awards loyalty points.
#[derive(Debug, Default)]
pub struct LoyaltySaga;

#[wow_core::async_trait]
impl MultiStreamSaga for LoyaltySaga {
    type Events = OneOf2<Booking, Customer>;

    fn name(&self) -> &str {
        "loyalty"
    }

    async fn on_event(
        &self,
        event: &OneOf2<Booking, Customer>,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let tenant = &stream.aggregate_id.tenant_id;
        let (customer, award) = match event {
            OneOf2::First(BookingEvent::BookingConfirmed(confirmed)) => (
                confirmed.customer.clone(),
                AwardPoints {
                    points: (confirmed.price / 100).max(1),
                    reason: format!("booking {}", stream.aggregate_id.id),
                },
            ),
            OneOf2::Second(CustomerEvent::CustomerRegistered(_)) => (
                stream.aggregate_id.id.clone(),
                AwardPoints {
                    points: WELCOME_POINTS,
                    reason: "welcome".to_owned(),
                },
            ),
            OneOf2::First(_) | OneOf2::Second(CustomerEvent::PointsAwarded(_)) => return Ok(()),
        };
        let target = Customer::named_aggregate().aggregate_id(customer, tenant.clone());
        ctx.send_to::<Customer>(target, CustomerCommand::AwardPoints(award))
            .await?;
        Ok(())
    }
}
