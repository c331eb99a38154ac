//! The trait a team implements once per view.

use std::fmt::Debug;

use serde::{de::DeserializeOwned, Serialize};

use crate::model::aggregate::Aggregate;

/// A read model of one aggregate type: a state per (tenant, aggregate id), folded from that
/// aggregate's own typed events.
///
/// `apply` is pure and infallible, like [`Aggregate::apply`]: replaying an aggregate's
/// history through it, stream by stream in version order, rebuilds the view, which is what a
/// rebuild does. The state is stored as JSON, so it must survive a JSON round trip
/// unchanged (the [`ViewSpec`](crate::domain::view::ViewSpec) kit checks that).
///
/// ```
/// use wow_core::testing_example::{Counter, CounterEvent};
/// use wow_core::view::View;
///
/// #[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Total {
///     additions: u64,
///     sum: u64,
/// }
///
/// #[derive(Debug)]
/// struct CounterTotal;
///
/// impl View for CounterTotal {
///     type Aggregate = Counter;
///     type State = Total;
///     const NAME: &'static str = "counter_total";
///
///     fn apply(state: &mut Total, event: &CounterEvent) {
///         if let CounterEvent::Added(added) = event {
///             state.additions += 1;
///             state.sum = state.sum.saturating_add(added.by);
///         }
///     }
/// }
/// ```
pub trait View: Send + Sync + 'static {
    /// The aggregate whose events the view folds.
    type Aggregate: Aggregate;
    /// The view's value for one aggregate; `Default` is the value before its first event.
    type State: Serialize
        + DeserializeOwned
        + Default
        + Clone
        + Debug
        + PartialEq
        + Send
        + Sync
        + 'static;
    /// The view's name: unique within a store, its consumer name, and the `view` of its keys.
    const NAME: &'static str;

    /// Folds one event into the state.
    fn apply(state: &mut Self::State, event: &<Self::Aggregate as Aggregate>::Event);
}
