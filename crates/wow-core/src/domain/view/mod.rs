//! The view test kit: given an aggregate's events, expect a view's state, without a store.

mod spec;

pub use spec::{ViewExpect, ViewSpec};
