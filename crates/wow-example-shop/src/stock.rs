//! The `stock` saga: a placed order holds its units of the product, and an expired one gives
//! them back (SPEC DS-3: each command's request id derives from the event, so a redelivered
//! event reserves once).

use wow_core::aggregate::Aggregate;
use wow_core::event::ConsumerError;
use wow_core::saga::{Saga, SagaContext, StepError};
use wow_core::DomainEventStream;

use crate::order::{Order, OrderEvent};
use crate::product::{Product, ProductCommand, Release, Reserve};

/// Reserves and releases an order's stock.
#[derive(Debug, Default)]
pub struct StockSaga;

#[wow_core::async_trait]
impl Saga for StockSaga {
    type Aggregate = Order;

    fn name(&self) -> &str {
        "stock"
    }

    async fn on_event(
        &self,
        event: &OrderEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let order = &stream.aggregate_id;
        let (product, command) = match event {
            OrderEvent::OrderPlaced(placed) => (
                &placed.product,
                ProductCommand::Reserve(Reserve {
                    order: order.id.clone(),
                    quantity: placed.quantity,
                }),
            ),
            OrderEvent::OrderExpired(expired) => (
                &expired.product,
                ProductCommand::Release(Release {
                    order: order.id.clone(),
                }),
            ),
            OrderEvent::OrderPaid(_) => return Ok(()),
        };
        let target =
            Product::named_aggregate().aggregate_id(product.clone(), order.tenant_id.clone());
        match ctx.send_to::<Product>(target, command).await {
            Ok(_) => Ok(()),
            // Out of stock, or no such product: the order stays unreserved and expires in its
            // time; nothing to give back then.
            Err(StepError::Rejected { .. } | StepError::NotFound(_)) => Ok(()),
            Err(other) => Err(other.into()),
        }
    }
}
