//! The shop as a service (`wow serve --example shop`): its product, whose SKU is a unique key
//! (SPEC DM-1), registered on the library's builder.

use wow_core::Stores;
use wow_example_shop::product::Product;
use wow_service::{Service, ServiceBuilder};

/// The shop on `stores`.
pub(crate) fn service(stores: Stores) -> ServiceBuilder {
    Service::builder().aggregate::<Product>().stores(stores)
}
