//! The trait a team implements once per view.

use std::fmt::Debug;

use serde::{de::DeserializeOwned, Serialize};

use crate::aggregate::{Aggregate, LifecycleEvent};

/// A read model of one aggregate type: a state per (tenant, aggregate id), folded from that
/// aggregate's own typed events.
///
/// `apply` is pure and infallible, like [`Aggregate::apply`]: replaying an aggregate's
/// history through it, stream by stream in version order, rebuilds the view, which is what a
/// rebuild does. The state is stored as JSON, so it must survive a JSON round trip
/// unchanged (the `ViewSpec` (wow-core) kit checks that).
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
    /// The version of the view's definition (its `apply`, its state's shape). Raise it when
    /// a change to either means the stored rows are no longer what the view would fold: the
    /// next start rebuilds the view from history beside the rows it serves, and swaps to the
    /// new rows once they have caught up, so readers never see an empty or partial view.
    const VERSION: u32 = 0;

    /// Folds one event into the state.
    fn apply(state: &mut Self::State, event: &<Self::Aggregate as Aggregate>::Event);

    /// Folds the aggregate's soft delete or recover into the state (SPEC DM-6), in its place
    /// in the aggregate's version order, with the same guarantees as `apply` (pure,
    /// infallible, replayed by a rebuild). The default leaves the state as it is: the row
    /// goes on showing the aggregate as it was.
    ///
    /// A view that flags the row sets a field (`deleted: true`, and back on the recover); one
    /// that drops it from what readers see moves its content aside on the delete and back on
    /// the recover (the row stays, so that the recover finds it, and the version order with
    /// it). Filter on the field in lists and queries, and answer a read of a flagged row as
    /// not found where the domain wants that.
    ///
    /// ```
    /// use wow_core::aggregate::LifecycleEvent;
    /// use wow_core::testing_example::{Counter, CounterEvent};
    /// use wow_core::view::View;
    ///
    /// #[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Row {
    ///     sum: u64,
    ///     deleted: bool,
    /// }
    ///
    /// #[derive(Debug)]
    /// struct Sums;
    ///
    /// impl View for Sums {
    ///     type Aggregate = Counter;
    ///     type State = Row;
    ///     const NAME: &'static str = "sums";
    ///
    ///     fn apply(row: &mut Row, event: &CounterEvent) {
    ///         if let CounterEvent::Added(added) = event {
    ///             row.sum = row.sum.saturating_add(added.by);
    ///         }
    ///     }
    ///
    ///     fn on_lifecycle(row: &mut Row, event: LifecycleEvent) {
    ///         row.deleted = event.deletes();
    ///     }
    /// }
    /// ```
    fn on_lifecycle(state: &mut Self::State, event: LifecycleEvent) {
        let _ = (state, event);
    }
}
