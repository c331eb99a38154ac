//! The `product_orders` view, over products and orders (SPEC DM-4): a row per product, with
//! its name, SKU and stock, and each order of it with its units and where it stands. Listed by
//! SKU (`GET /views/product_orders?sku=MUG-1`).

use serde::{Deserialize, Serialize};
use wow_core::schemars;
use wow_core::view::{MultiStreamView, ViewInputs};

use crate::order::{Order, OrderEvent};
use crate::product::{Product, ProductEvent};

/// Where an order of the product stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum OrderLineStatus {
    /// Placed, waiting for its payment.
    Placed,
    /// Paid.
    Paid,
    /// Not paid in time.
    Expired,
}

/// One order of the product.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OrderLine {
    /// The order's id.
    pub order: String,
    /// The units ordered.
    pub quantity: u64,
    /// Where it stands.
    pub status: OrderLineStatus,
    /// Whether the product holds its units (the `stock` saga reserved them).
    pub reserved: bool,
}

/// A product with its orders.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProductOrdersRow {
    /// The product's name.
    pub name: String,
    /// Its SKU.
    pub sku: String,
    /// The units in stock.
    pub stock: u64,
    /// Its orders, in the order they were placed.
    pub orders: Vec<OrderLine>,
}

impl ProductOrdersRow {
    /// The line of `order`, made (placed, nothing reserved) when this is the first event of
    /// it the row sees: a rebuild folds the product's history and each order's apart, so the
    /// product's reservation may come before the order's placing.
    fn line(&mut self, order: &str, quantity: u64) -> &mut OrderLine {
        let at = match self.orders.iter().position(|line| line.order == order) {
            Some(at) => at,
            None => {
                self.orders.push(OrderLine {
                    order: order.to_owned(),
                    quantity,
                    status: OrderLineStatus::Placed,
                    reserved: false,
                });
                self.orders.len() - 1
            }
        };
        &mut self.orders[at]
    }
}

/// The view.
#[derive(Debug)]
pub struct ProductOrders;

impl MultiStreamView for ProductOrders {
    type State = ProductOrdersRow;
    const NAME: &'static str = "product_orders";
    const INDEXED: &'static [&'static str] = &["sku"];

    fn inputs(inputs: ViewInputs<ProductOrdersRow>) -> ViewInputs<ProductOrdersRow> {
        inputs
            .on::<Product>(
                |_, meta| Some(meta.aggregate_id.id.clone()),
                |row, event, _| match event {
                    ProductEvent::ProductCreated(created) => {
                        row.name.clone_from(&created.name);
                        row.sku.clone_from(&created.sku);
                        row.stock = created.stock;
                    }
                    ProductEvent::Renamed(renamed) => row.name.clone_from(&renamed.name),
                    ProductEvent::SkuChanged(changed) => row.sku.clone_from(&changed.to),
                    ProductEvent::StockAdjusted(adjusted) => row.stock = adjusted.stock,
                    ProductEvent::StockReserved(reserved) => {
                        row.stock = reserved.stock;
                        row.line(&reserved.order, reserved.quantity).reserved = true;
                    }
                    ProductEvent::StockReleased(released) => {
                        row.stock = released.stock;
                        row.line(&released.order, released.quantity).reserved = false;
                    }
                },
            )
            .on::<Order>(
                |event, _| {
                    let product = match event {
                        OrderEvent::OrderPlaced(placed) => &placed.product,
                        OrderEvent::OrderPaid(paid) => &paid.product,
                        OrderEvent::OrderExpired(expired) => &expired.product,
                    };
                    Some(product.clone()).filter(|product| !product.is_empty())
                },
                |row, event, meta| {
                    let order = &meta.aggregate_id.id;
                    match event {
                        OrderEvent::OrderPlaced(placed) => {
                            row.line(order, placed.quantity).quantity = placed.quantity;
                        }
                        OrderEvent::OrderPaid(_) => {
                            row.line(order, 0).status = OrderLineStatus::Paid
                        }
                        OrderEvent::OrderExpired(expired) => {
                            row.line(order, expired.quantity).status = OrderLineStatus::Expired;
                        }
                    }
                },
            )
    }
}
