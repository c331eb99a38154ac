//! The `stock` saga: a placed order holds its units of the product, and an expired one gives
//! them back (SPEC DS-3: each command's request id derives from the event, so a redelivered
//! event reserves once).
//!
//! It acts across owners (SPEC TN-2, [`Saga::acts_across_owners`]): in the shop a product
//! belongs to the owner who listed it, the seller, and an order to the owner who placed it,
//! the buyer, and holding the seller's units for the buyer's order is what the saga is for. A
//! saga held to the buyer would refuse every order but a seller's own. What a buyer can do to
//! another owner's product is only this: place an order, which holds its quantity (never more
//! than the product has in stock: the product's own rule) until the order is paid or
//! expires and gives it back. The buyer cannot send `reserve`, `release` or any other
//! command to the product itself (403 `IllegalAccessOwnerAggregate`).

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

    /// A buyer's order holds a seller's stock: see the module's documentation.
    fn acts_across_owners(&self) -> bool {
        true
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
