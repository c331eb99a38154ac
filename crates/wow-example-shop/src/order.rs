//! The `order` aggregate: placed at the price a pricing service quotes (SPEC DM-3), paid, or
//! expired by a deadline when it is not paid in time (SPEC DM-2).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use validator::Validate;
use wow_core::aggregate::{Aggregate, CommandContext, Refusal, ServiceNeed};
use wow_core::deadline::Deadline;
use wow_core::schemars;
use wow_core::{Command, DomainError, Event, NamedAggregate};

use crate::product::Product;

/// The price list the shop asks when an order is placed: a service the order's handler
/// consults (SPEC DM-3). What it answers is recorded in `OrderPlaced`, so history never asks
/// it again.
#[wow_core::async_trait]
pub trait Pricing: Send + Sync + std::fmt::Debug {
    /// The unit price of `sku`, in cents; an error when the price cannot be had now.
    async fn unit_price(&self, sku: &str) -> Result<u64, PricingError>;
}

/// Why a price could not be had: the pricing service is down, slow or has no price.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PricingError(pub String);

/// The pricing service, as the shop is assembled with it.
#[derive(Debug, Clone)]
pub struct Prices(pub Arc<dyn Pricing>);

/// How long an order waits for its payment before it expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderPolicy {
    /// From placing to expiring, in milliseconds.
    pub expire_after_ms: i64,
}

impl Default for OrderPolicy {
    /// Fifteen minutes.
    fn default() -> Self {
        Self {
            expire_after_ms: 15 * 60 * 1000,
        }
    }
}

/// The order aggregate.
#[derive(Debug)]
pub struct Order;

/// Where an order is in its life.
#[derive(
    Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum OrderStatus {
    /// Not placed yet.
    #[default]
    New,
    /// Placed, waiting for its payment until it expires.
    Placed,
    /// Paid.
    Paid,
    /// Not paid in time; its stock was given back.
    Expired,
}

/// What an order is now.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OrderState {
    /// The product ordered.
    pub product: String,
    /// Its SKU.
    pub sku: String,
    /// The units ordered.
    pub quantity: u64,
    /// The price of one unit when it was placed, in cents.
    pub unit_price: u64,
    /// What it costs, in cents.
    pub total: u64,
    /// Where it is.
    pub status: OrderStatus,
    /// When it expires unless paid, in milliseconds since the Unix epoch.
    pub expires_at: Option<i64>,
}

/// `place`: the product, its SKU (what it is priced by) and the units.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Place {
    /// The product's id.
    #[validate(length(min = 1, max = 128))]
    pub product: String,
    /// The product's SKU.
    #[validate(length(min = 1, max = 32))]
    pub sku: String,
    /// The units: 1 to 10,000.
    #[validate(range(min = 1, max = 10_000))]
    pub quantity: u64,
}

/// `pay`: the amount paid, in cents; it must be the order's total.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pay {
    /// The amount, in cents.
    pub amount: u64,
}

/// `expire`: sent by the order's deadline.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Expire {}

/// The order's commands.
#[derive(Debug, Clone, PartialEq, Eq, Command)]
pub enum OrderCommand {
    /// Places the order at the price the pricing service quotes now.
    #[command(create, validate)]
    Place(Place),
    /// Pays it.
    #[command(validate)]
    Pay(Pay),
    /// Expires it, when it was not paid in time; sent by its deadline only (internal: no
    /// caller can expire an order).
    #[command(deadline)]
    Expire(Expire),
}

/// The order was placed, at the price quoted then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderPlaced {
    /// The product.
    pub product: String,
    /// Its SKU.
    pub sku: String,
    /// The units.
    pub quantity: u64,
    /// The price of one unit, in cents, as the pricing service quoted it.
    pub unit_price: u64,
    /// What it costs, in cents.
    pub total: u64,
    /// When it expires unless paid.
    pub expires_at: i64,
}

/// The order was paid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderPaid {
    /// The amount, in cents.
    pub amount: u64,
    /// The product ordered (empty in an order paid before the event named it).
    #[serde(default)]
    pub product: String,
}

/// The order was not paid in time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderExpired {
    /// The product whose stock goes back.
    pub product: String,
    /// The units that go back.
    pub quantity: u64,
}

/// The order's events.
#[derive(Debug, Clone, PartialEq, Eq, Event)]
pub enum OrderEvent {
    /// See [`OrderPlaced`].
    OrderPlaced(OrderPlaced),
    /// See [`OrderPaid`].
    OrderPaid(OrderPaid),
    /// See [`OrderExpired`].
    OrderExpired(OrderExpired),
}

/// The order's business rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, DomainError)]
pub enum OrderError {
    /// Only a placed order is paid or expires.
    #[error("the order is {status:?}, not placed")]
    NotPlaced {
        /// Where it is.
        status: OrderStatus,
    },
    /// The amount paid is not the order's total.
    #[error("the order costs {total}, not {amount}")]
    WrongAmount {
        /// The order's total.
        total: u64,
        /// The amount paid.
        amount: u64,
    },
    /// The quoted price overflows the total.
    #[error("the total overflows")]
    TooExpensive,
    /// The product ordered does not exist in the tenant (or is deleted).
    #[error("no such product")]
    NoSuchProduct,
    /// The SKU given is not the product's.
    #[error("the product's SKU is {sku}")]
    WrongSku {
        /// The product's SKU.
        sku: String,
    },
}

fn placed_only(state: &OrderState) -> Result<(), OrderError> {
    if state.status == OrderStatus::Placed {
        Ok(())
    } else {
        Err(OrderError::NotPlaced {
            status: state.status,
        })
    }
}

impl Aggregate for Order {
    const CONTEXT_NAME: &'static str = crate::CONTEXT;
    const AGGREGATE_NAME: &'static str = "order";
    type State = OrderState;
    type Command = OrderCommand;
    type Event = OrderEvent;
    type Error = OrderError;

    /// Placing needs the product (SPEC DM-5: it must exist, with the SKU given, and the order
    /// is recorded only while the product is as read) and a price; the other commands decide
    /// in [`handle`](Self::handle).
    async fn decide(
        state: &OrderState,
        command: OrderCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<OrderEvent>, Refusal<OrderError>> {
        let OrderCommand::Place(place) = command else {
            return Ok(Self::handle(state, command, ctx)?);
        };
        let product = ctx.read::<Product>(&place.product).await?;
        if !product.is_live() {
            return Err(OrderError::NoSuchProduct.into());
        }
        if product.state.sku != place.sku {
            return Err(OrderError::WrongSku {
                sku: product.state.sku,
            }
            .into());
        }
        let Prices(pricing) = ctx.service::<Prices>()?;
        let unit_price = ctx.call("pricing", pricing.unit_price(&place.sku)).await?;
        let total = unit_price
            .checked_mul(place.quantity)
            .ok_or(OrderError::TooExpensive)?;
        let policy = ctx
            .services
            .get::<OrderPolicy>()
            .copied()
            .unwrap_or_default();
        Ok(vec![OrderEvent::OrderPlaced(OrderPlaced {
            product: place.product,
            sku: place.sku,
            quantity: place.quantity,
            unit_price,
            total,
            expires_at: ctx.now.saturating_add(policy.expire_after_ms),
        })])
    }

    fn reads() -> Vec<NamedAggregate> {
        vec![Product::named_aggregate()]
    }

    fn handle(
        state: &OrderState,
        command: OrderCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<OrderEvent>, OrderError> {
        match command {
            // Decided in `decide`, with its price; never reaches here from the node.
            OrderCommand::Place(_) => Err(OrderError::NotPlaced {
                status: state.status,
            }),
            OrderCommand::Pay(Pay { amount }) => {
                placed_only(state)?;
                if amount != state.total {
                    return Err(OrderError::WrongAmount {
                        total: state.total,
                        amount,
                    });
                }
                Ok(vec![OrderEvent::OrderPaid(OrderPaid {
                    amount,
                    product: state.product.clone(),
                })])
            }
            OrderCommand::Expire(_) => {
                placed_only(state)?;
                Ok(vec![OrderEvent::OrderExpired(OrderExpired {
                    product: state.product.clone(),
                    quantity: state.quantity,
                })])
            }
        }
    }

    fn apply(state: &mut OrderState, event: &OrderEvent) {
        match event {
            OrderEvent::OrderPlaced(placed) => {
                state.product.clone_from(&placed.product);
                state.sku.clone_from(&placed.sku);
                state.quantity = placed.quantity;
                state.unit_price = placed.unit_price;
                state.total = placed.total;
                state.expires_at = Some(placed.expires_at);
                state.status = OrderStatus::Placed;
            }
            OrderEvent::OrderPaid(_) => state.status = OrderStatus::Paid,
            OrderEvent::OrderExpired(_) => state.status = OrderStatus::Expired,
        }
    }

    /// An unpaid order expires at its time; a paid or expired one has nothing pending.
    fn deadlines(state: &OrderState) -> Option<Vec<Deadline<OrderCommand>>> {
        Some(match (state.status, state.expires_at) {
            (OrderStatus::Placed, Some(at)) => {
                vec![Deadline::new("expire", at, OrderCommand::Expire(Expire {}))]
            }
            _ => Vec::new(),
        })
    }

    fn required_services() -> Vec<ServiceNeed> {
        vec![ServiceNeed::of::<Prices>()]
    }

    fn state_schema() -> serde_json::Value {
        wow_core::aggregate::state_schema_of::<OrderState>()
    }
}

/// A price list fixed in advance: every SKU it lists at its price, the others at
/// `default_price`. What `wow serve --example shop` is assembled with.
#[derive(Debug, Clone, Default)]
pub struct PriceList {
    /// Prices by SKU, in cents.
    pub prices: std::collections::BTreeMap<String, u64>,
    /// The price of an SKU the list does not name, in cents; `None`: no price (placing such
    /// an order fails as a service failure).
    pub default_price: Option<u64>,
}

#[wow_core::async_trait]
impl Pricing for PriceList {
    async fn unit_price(&self, sku: &str) -> Result<u64, PricingError> {
        self.prices
            .get(sku)
            .copied()
            .or(self.default_price)
            .ok_or_else(|| PricingError(format!("no price for `{sku}`")))
    }
}
