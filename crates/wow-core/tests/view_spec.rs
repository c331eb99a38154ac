//! Tests of ViewSpec over the crate's Counter example.
#![allow(clippy::unwrap_used)]

mod support;

use serde::{Deserialize, Serialize};
use support::add;

use wow_core::testing_example::{Counter, CounterEvent};
use wow_core::view::*;

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct Seen {
    started: bool,
    additions: Vec<u64>,
}

#[derive(Debug)]
struct CounterLog;

impl View for CounterLog {
    type Aggregate = Counter;
    type State = Seen;
    const NAME: &'static str = "counter_log";

    fn apply(state: &mut Seen, event: &CounterEvent) {
        match event {
            CounterEvent::Started => state.started = true,
            CounterEvent::Added(added) => state.additions.push(added.by),
        }
    }
}

#[test]
fn folds_given_events_one_stream_each() {
    ViewSpec::<CounterLog>::new()
        .given([CounterEvent::Started, add(1), add(2)])
        .expect_state(Seen {
            started: true,
            additions: vec![1, 2],
        })
        .expect_version(3);
}

#[test]
fn folds_given_streams_one_version_each() {
    let spec = ViewSpec::<CounterLog>::new()
        .given_streams([vec![CounterEvent::Started], vec![add(4), add(5)]])
        .expect_state_with(|state| assert_eq!(state.additions, [4, 5]));
    assert_eq!(spec.version(), 2);
    assert!(spec.state().started);
}

#[test]
fn no_history_is_the_default_state() {
    ViewSpec::<CounterLog>::new()
        .given([])
        .expect_state(Seen::default())
        .expect_version(0);
}

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct Lossy {
    #[serde(skip)]
    sum: u64,
}

#[derive(Debug)]
struct LossyView;

impl View for LossyView {
    type Aggregate = Counter;
    type State = Lossy;
    const NAME: &'static str = "lossy";

    fn apply(state: &mut Lossy, event: &CounterEvent) {
        if let CounterEvent::Added(added) = event {
            state.sum += added.by;
        }
    }
}

#[test]
#[should_panic(expected = "changes through its JSON form")]
fn a_state_that_does_not_survive_json_fails_the_spec() {
    ViewSpec::<LossyView>::new().given([add(1)]);
}
