//! # The `shop` example domain
//!
//! What a shop needs beyond one aggregate at a time: a `product` whose SKU no other product
//! of the tenant may hold, and which may change (the key moves with it, SPEC DM-1); an
//! `order` priced by a pricing service when it is placed (SPEC DM-3) and expired by a
//! deadline when it is not paid in time (SPEC DM-2); the `stock` saga, which holds a
//! placed order's units and gives an expired order's back; and the `product_orders` view over
//! products and orders (SPEC DM-4).
//!
//! A plain domain library on `wow-core` alone; its service is behind the `service` feature
//! (`service::service`, the `wow-shop` binary, what `wow serve --example shop` runs), and
//! `docs/real-domains.md` walks through it with `curl`.

pub mod order;
pub mod product;
pub mod product_orders;
#[cfg(feature = "service")]
pub mod service;
pub mod stock;

/// The context every shop aggregate belongs to.
pub const CONTEXT: &str = "shop";

/// The key space of product SKUs.
pub const SKU: &str = "sku";
