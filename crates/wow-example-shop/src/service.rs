//! The shop as a service (feature `service`; `wow serve --example shop` and the `wow-shop`
//! binary): its product, whose SKU is a unique key
//! (SPEC DM-1), its order, priced by a price list when it is placed (SPEC DM-3) and expired
//! by a deadline when it is not paid in time (SPEC DM-2), and the `stock` saga between them.

use std::sync::Arc;

use wow_service::{Service, ServiceBuilder};

use crate::order::{Order, OrderPolicy, PriceList, Prices};
use crate::product::Product;
use crate::product_orders::ProductOrders;
use crate::stock::StockSaga;

/// How long an order waits for its payment, in milliseconds (default fifteen minutes).
const EXPIRY_VARIABLE: &str = "WOW_SHOP_ORDER_EXPIRY_MS";

/// Every SKU's unit price, in cents, when the price list names none: the example's pricing
/// service quotes 1,200 for everything.
const DEFAULT_PRICE: u64 = 1_200;

/// The shop: `product`, `order`, the `stock` saga, the `product_orders` view, the price list
/// and the order policy
/// (`WOW_SHOP_ORDER_EXPIRY_MS`). Give it a store (`.store(url)` or `.stores(..)`) and run it.
pub fn service() -> ServiceBuilder {
    let policy = std::env::var(EXPIRY_VARIABLE)
        .ok()
        .and_then(|ms| ms.trim().parse::<i64>().ok())
        .filter(|ms| *ms > 0)
        .map_or_else(OrderPolicy::default, |expire_after_ms| OrderPolicy {
            expire_after_ms,
        });
    let prices = PriceList {
        default_price: Some(DEFAULT_PRICE),
        ..PriceList::default()
    };
    Service::builder()
        .aggregate::<Product>()
        .aggregate::<Order>()
        .saga(StockSaga)
        .multi_stream_view::<ProductOrders>()
        .service(Prices(Arc::new(prices)))
        .service(policy)
}
