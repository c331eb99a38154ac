//! The programming model run from JSON, and its test kits: aggregates run by name from
//! JSON commands and events (the registry, quarantine), the saga model and the context a
//! saga sends through, and the given → when → expect kits ([`AggregateSpec`], [`ViewSpec`],
//! [`SagaSpec`], [`OutboxSpec`]) that run this same code without a store. What runs a
//! service over the contracts (the gateway, the processing node, dispatch) is `wow-runtime`.
//!
//! Rule: this layer imports the contracts and the model, never the reverse.
//!
//! [`AggregateSpec`]: crate::domain::aggregate::AggregateSpec
//! [`ViewSpec`]: crate::domain::view::ViewSpec
//! [`SagaSpec`]: crate::domain::saga::SagaSpec
//! [`OutboxSpec`]: crate::domain::outbox::OutboxSpec

pub(crate) mod aggregate;
pub(crate) mod outbox;
pub(crate) mod saga;
pub(crate) mod view;
