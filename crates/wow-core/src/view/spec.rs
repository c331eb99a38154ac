//! A given → expect test kit for views, like [`AggregateSpec`](crate::aggregate::AggregateSpec)
//! for aggregates: given the aggregate's events, expect the view's state.
//!
//! ```
//! # use wow_core::testing_example::{Added, Counter, CounterEvent};
//! use wow_core::view::{View, ViewSpec};
//!
//! #[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
//! struct Total {
//!     sum: u64,
//! }
//!
//! #[derive(Debug)]
//! struct CounterTotal;
//!
//! impl View for CounterTotal {
//!     type Aggregate = Counter;
//!     type State = Total;
//!     const NAME: &'static str = "counter_total";
//!     fn apply(state: &mut Total, event: &CounterEvent) {
//!         if let CounterEvent::Added(added) = event {
//!             state.sum += added.by;
//!         }
//!     }
//! }
//!
//! ViewSpec::<CounterTotal>::new()
//!     .given([CounterEvent::Started, CounterEvent::Added(Added { by: 2 })])
//!     .expect_state(Total { sum: 2 })
//!     .expect_version(2);
//! ```

use std::marker::PhantomData;

use crate::aggregate::round_trip;
use wow_model::aggregate::Aggregate;
use wow_model::view::View;

type Event<V> = <<V as View>::Aggregate as Aggregate>::Event;

/// The start of a view spec: which view, before any history is given.
#[derive(Debug)]
pub struct ViewSpec<V: View> {
    view: PhantomData<fn() -> V>,
}

impl<V: View> Default for ViewSpec<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: View> ViewSpec<V> {
    /// A spec of the view `V` for one aggregate.
    pub fn new() -> Self {
        Self { view: PhantomData }
    }

    /// The aggregate's history: each event as its own stream, in order (so the version counts
    /// one per event). See [`ViewSpec::given_streams`].
    #[track_caller]
    pub fn given(self, events: impl IntoIterator<Item = Event<V>>) -> ViewExpect<V> {
        self.given_streams(events.into_iter().map(|event| vec![event]))
    }

    /// The aggregate's history as streams (the events of one command each), in version
    /// order, folded as a projection folds them. Each event goes through its JSON form, and
    /// the state through its stored JSON form after each stream, so a lossy serialization of
    /// either fails here.
    #[track_caller]
    pub fn given_streams(self, streams: impl IntoIterator<Item = Vec<Event<V>>>) -> ViewExpect<V> {
        let mut state = V::State::default();
        let mut version = 0;
        for stream in streams {
            for event in &stream {
                V::apply(&mut state, &round_trip::<V::Aggregate>(event));
            }
            version += 1;
            state = stored::<V>(&state);
        }
        ViewExpect { state, version }
    }
}

/// `state` after a trip through its stored JSON form; panics if it does not come back equal.
#[track_caller]
fn stored<V: View>(state: &V::State) -> V::State {
    let json = match serde_json::to_value(state) {
        Ok(json) => json,
        Err(error) => panic!(
            "view {} state {state:?} does not encode to JSON: {error}",
            V::NAME
        ),
    };
    let back: V::State = match serde_json::from_value(json.clone()) {
        Ok(back) => back,
        Err(error) => panic!(
            "view {} state {json} does not decode from its own JSON: {error}",
            V::NAME
        ),
    };
    assert_eq!(
        &back,
        state,
        "view {} state changes through its JSON form {json}",
        V::NAME
    );
    back
}

/// The view's state after the given history; each `expect_*` checks one thing and returns
/// the spec for more.
#[derive(Debug)]
pub struct ViewExpect<V: View> {
    state: V::State,
    version: u64,
}

impl<V: View> ViewExpect<V> {
    /// Expects the state to equal `expected`.
    #[track_caller]
    pub fn expect_state(self, expected: V::State) -> Self {
        assert_eq!(self.state, expected, "view {} holds another state", V::NAME);
        self
    }

    /// Checks the state with `check` (for a state compared field by field).
    #[track_caller]
    pub fn expect_state_with(self, check: impl FnOnce(&V::State)) -> Self {
        check(&self.state);
        self
    }

    /// Expects the row's version (the number of streams given) to be `version`.
    #[track_caller]
    pub fn expect_version(self, version: u64) -> Self {
        assert_eq!(
            self.version,
            version,
            "view {} is at another version",
            V::NAME
        );
        self
    }

    /// The state.
    pub fn state(&self) -> &V::State {
        &self.state
    }

    /// The version: the number of streams given.
    pub fn version(&self) -> u64 {
        self.version
    }
}
