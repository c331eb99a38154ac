//! The `product` aggregate: created with an SKU unique in its tenant, renamed, given another
//! SKU (the key moves), its stock adjusted.

use serde::{Deserialize, Serialize};
use validator::{Validate, ValidationError};
use wow_core::aggregate::{Aggregate, CommandContext};
use wow_core::schemars;
use wow_core::unique_key::UniqueKey;
use wow_core::{Command, DomainError, Event};

use crate::SKU;

/// The product aggregate.
#[derive(Debug)]
pub struct Product;

/// What a product is now.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProductState {
    /// Its stock keeping unit: no other product of the tenant holds it.
    pub sku: String,
    /// Its name.
    pub name: String,
    /// The units in stock.
    pub stock: u64,
    /// The units each order holds, by order id: taken out of `stock`.
    #[serde(default)]
    pub reserved: std::collections::BTreeMap<String, u64>,
}

/// `create`: the SKU, the name and the stock to start with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Create {
    /// The SKU: 1 to 32 of `A-Z`, `0-9` and `-`.
    #[validate(custom(function = "sku"))]
    #[schemars(regex(pattern = r"^[A-Z0-9-]{1,32}$"))]
    pub sku: String,
    /// The name: 1 to 200 characters.
    #[validate(length(min = 1, max = 200))]
    #[schemars(length(min = 1, max = 200))]
    pub name: String,
    /// The units in stock to start with.
    #[serde(default)]
    pub stock: u64,
}

/// `rename`: the new name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rename {
    /// The name: 1 to 200 characters.
    #[validate(length(min = 1, max = 200))]
    #[schemars(length(min = 1, max = 200))]
    pub name: String,
}

/// `change_sku`: the SKU the product takes instead of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeSku {
    /// The SKU: 1 to 32 of `A-Z`, `0-9` and `-`.
    #[validate(custom(function = "sku"))]
    #[schemars(regex(pattern = r"^[A-Z0-9-]{1,32}$"))]
    pub sku: String,
}

/// `adjust_stock`: units added (positive) or taken out (negative).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdjustStock {
    /// The change.
    #[validate(range(min = -1_000_000_000, max = 1_000_000_000))]
    pub by: i64,
}

/// `reserve`: the units an order holds until it is paid or expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reserve {
    /// The order.
    #[validate(length(min = 1, max = 128))]
    pub order: String,
    /// The units.
    #[validate(range(min = 1, max = 10_000))]
    pub quantity: u64,
}

/// `release`: an order gives its units back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Release {
    /// The order.
    #[validate(length(min = 1, max = 128))]
    pub order: String,
}

/// An SKU is 1 to 32 of `A-Z`, `0-9` and `-`.
fn sku(sku: &str) -> Result<(), ValidationError> {
    let fits = (1..=32).contains(&sku.len())
        && sku
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-');
    if fits {
        Ok(())
    } else {
        Err(ValidationError::new("sku").with_message("must be 1 to 32 of A-Z, 0-9 and -".into()))
    }
}

/// The product's commands.
#[derive(Debug, Clone, Command)]
pub enum ProductCommand {
    /// Creates the product, claiming its SKU.
    #[command(create, validate)]
    Create(Create),
    /// Renames it.
    #[command(validate)]
    Rename(Rename),
    /// Gives it another SKU: the new one is claimed and its old one released in one write.
    #[command(validate)]
    ChangeSku(ChangeSku),
    /// Adjusts its stock.
    #[command(validate)]
    AdjustStock(AdjustStock),
    /// Holds units for an order (sent by the `stock` saga when the order is placed).
    #[command(validate)]
    Reserve(Reserve),
    /// Gives an order's units back (sent when the order expires); nothing when it holds none.
    #[command(validate)]
    Release(Release),
}

/// The product was created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProductCreated {
    /// Its SKU.
    pub sku: String,
    /// Its name.
    pub name: String,
    /// The units in stock.
    pub stock: u64,
}

/// The product was renamed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Renamed {
    /// The new name.
    pub name: String,
}

/// The product took another SKU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkuChanged {
    /// The SKU it gave up.
    pub from: String,
    /// The SKU it holds now.
    pub to: String,
}

/// The stock changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockAdjusted {
    /// The change.
    pub by: i64,
    /// The units in stock after it.
    pub stock: u64,
}

/// Units were held for an order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockReserved {
    /// The order.
    pub order: String,
    /// The units.
    pub quantity: u64,
    /// The units in stock after it.
    pub stock: u64,
}

/// An order's units went back into stock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockReleased {
    /// The order.
    pub order: String,
    /// The units.
    pub quantity: u64,
    /// The units in stock after it.
    pub stock: u64,
}

/// The product's events.
#[derive(Debug, Clone, PartialEq, Eq, Event)]
pub enum ProductEvent {
    /// See [`ProductCreated`].
    ProductCreated(ProductCreated),
    /// See [`Renamed`].
    Renamed(Renamed),
    /// See [`SkuChanged`].
    SkuChanged(SkuChanged),
    /// See [`StockAdjusted`].
    StockAdjusted(StockAdjusted),
    /// See [`StockReserved`].
    StockReserved(StockReserved),
    /// See [`StockReleased`].
    StockReleased(StockReleased),
}

/// The product's business rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, DomainError)]
pub enum ProductError {
    /// More units would be taken out than are in stock.
    #[error("only {stock} in stock")]
    OutOfStock {
        /// The units in stock.
        stock: u64,
    },
    /// The order holds another quantity of this product already.
    #[error("order `{order}` holds units of this product already")]
    Reserved {
        /// The order.
        order: String,
    },
    /// The product holds this SKU already.
    #[error("the product's SKU is `{sku}` already")]
    SameSku {
        /// Its SKU.
        sku: String,
    },
}

impl Aggregate for Product {
    const CONTEXT_NAME: &'static str = crate::CONTEXT;
    const AGGREGATE_NAME: &'static str = "product";
    type State = ProductState;
    type Command = ProductCommand;
    type Event = ProductEvent;
    type Error = ProductError;

    fn handle(
        state: &ProductState,
        command: ProductCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<ProductEvent>, ProductError> {
        Ok(vec![match command {
            ProductCommand::Create(Create { sku, name, stock }) => {
                ProductEvent::ProductCreated(ProductCreated { sku, name, stock })
            }
            ProductCommand::Rename(Rename { name }) => ProductEvent::Renamed(Renamed { name }),
            ProductCommand::ChangeSku(ChangeSku { sku }) if sku == state.sku => {
                return Err(ProductError::SameSku { sku })
            }
            ProductCommand::ChangeSku(ChangeSku { sku }) => ProductEvent::SkuChanged(SkuChanged {
                from: state.sku.clone(),
                to: sku,
            }),
            ProductCommand::AdjustStock(AdjustStock { by }) => {
                let stock = state
                    .stock
                    .checked_add_signed(by)
                    .ok_or(ProductError::OutOfStock { stock: state.stock })?;
                ProductEvent::StockAdjusted(StockAdjusted { by, stock })
            }
            ProductCommand::Reserve(Reserve { order, quantity }) => {
                if let Some(held) = state.reserved.get(&order) {
                    // The order's reservation was made already (a resent intent).
                    return Ok(if *held == quantity {
                        Vec::new()
                    } else {
                        return Err(ProductError::Reserved { order });
                    });
                }
                let stock = state
                    .stock
                    .checked_sub(quantity)
                    .ok_or(ProductError::OutOfStock { stock: state.stock })?;
                ProductEvent::StockReserved(StockReserved {
                    order,
                    quantity,
                    stock,
                })
            }
            ProductCommand::Release(Release { order }) => {
                let Some(quantity) = state.reserved.get(&order).copied() else {
                    return Ok(Vec::new());
                };
                ProductEvent::StockReleased(StockReleased {
                    order,
                    quantity,
                    stock: state.stock.saturating_add(quantity),
                })
            }
        }])
    }

    fn apply(state: &mut ProductState, event: &ProductEvent) {
        match event {
            ProductEvent::ProductCreated(created) => {
                state.sku.clone_from(&created.sku);
                state.name.clone_from(&created.name);
                state.stock = created.stock;
            }
            ProductEvent::Renamed(renamed) => state.name.clone_from(&renamed.name),
            ProductEvent::SkuChanged(changed) => state.sku.clone_from(&changed.to),
            ProductEvent::StockAdjusted(adjusted) => state.stock = adjusted.stock,
            ProductEvent::StockReserved(reserved) => {
                state.stock = reserved.stock;
                state
                    .reserved
                    .insert(reserved.order.clone(), reserved.quantity);
            }
            ProductEvent::StockReleased(released) => {
                state.stock = released.stock;
                state.reserved.remove(&released.order);
            }
        }
    }

    /// The product's SKU, once it has one: claimed by `create`, moved by `change_sku`.
    fn unique_keys(state: &ProductState) -> Option<Vec<UniqueKey>> {
        Some(if state.sku.is_empty() {
            Vec::new()
        } else {
            vec![UniqueKey::new(SKU, state.sku.clone())]
        })
    }

    fn state_schema() -> serde_json::Value {
        wow_core::aggregate::state_schema_of::<ProductState>()
    }
}
