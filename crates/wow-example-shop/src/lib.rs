//! # The `shop` example domain
//!
//! What a shop needs beyond one aggregate at a time: a `product` whose SKU no other product
//! of the tenant may hold, and which may change (the key moves with it, SPEC DM-1).
//!
//! A plain domain library on `wow-core` alone; `wow serve --example shop` serves it (its
//! assembly is `wow-cli/src/shop.rs`), and `docs/real-domains.md` walks through it with
//! `curl`.

pub mod product;

/// The context every shop aggregate belongs to.
pub const CONTEXT: &str = "shop";

/// The key space of product SKUs.
pub const SKU: &str = "sku";
