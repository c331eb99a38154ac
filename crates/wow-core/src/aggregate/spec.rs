//! A given → when → expect test kit for a team's aggregates, like Wow's `AggregateSpec`.
//!
//! ```
//! # use wow_core::testing_example::{Counter, CounterCommand, CounterEvent, Add, Added};
//! use wow_core::aggregate::AggregateSpec;
//! use wow_core::ErrorCode;
//!
//! AggregateSpec::<Counter>::new()
//!     .given([CounterEvent::Started])
//!     .when(CounterCommand::Add(Add { by: 2 }))
//!     .expect_events([CounterEvent::Added(Added { by: 2 })])
//!     .expect_state(|state| assert_eq!(state.value, 2));
//!
//! AggregateSpec::<Counter>::new()
//!     .given([CounterEvent::Started])
//!     .when(CounterCommand::Add(Add { by: 0 }))
//!     .expect_error_code(ErrorCode::CommandValidation)
//!     .expect_binding_errors(&["by"]);
//! ```

use std::collections::HashMap;
use std::marker::PhantomData;

use futures::future::BoxFuture;

use crate::aggregate::runtime::{changes_of, decide, decode_events};
use wow_contracts::eventsourcing::AppendChanges;
use wow_model::aggregate::{
    Aggregate, AggregateError, AggregateReader, AggregateReads, AggregateState, CommandContext,
};
use wow_model::aggregate_id::{AggregateId, NamedAggregate};
use wow_model::command::CommandBody;
use wow_model::deadline::{Deadline, DeadlineChange};
use wow_model::error_code::ErrorCode;
use wow_model::event::{DomainEvent, DomainEventStream};
use wow_model::id;
use wow_model::services::{ServiceFailure, Services};
use wow_model::unique_key::KeyChange;

/// The start of a spec: which aggregate, before any history is given.
#[derive(Debug)]
pub struct AggregateSpec<A: Aggregate> {
    aggregate_id: AggregateId,
    world: World,
    aggregate: PhantomData<fn() -> A>,
}

impl<A: Aggregate> Default for AggregateSpec<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: Aggregate> AggregateSpec<A> {
    /// A spec for an aggregate of type `A` with the id `spec-aggregate`.
    pub fn new() -> Self {
        Self {
            aggregate_id: A::named_aggregate()
                .aggregate_id("spec-aggregate", wow_model::aggregate_id::DEFAULT_TENANT_ID),
            world: World::default(),
            aggregate: PhantomData,
        }
    }

    /// Hands `service` to the handler (SPEC DM-3): a fake of what the service is assembled
    /// with, whose answers the test chooses. Its calls run on the test's thread, so a fake
    /// answers at once (no timer; the command's deadline does not apply in a spec).
    pub fn with_service<T: Send + Sync + 'static>(mut self, service: T) -> Self {
        self.world.services.insert(service);
        self
    }

    /// Gives the aggregate `B` with id `id` (in the spec's tenant) the history `events`, each
    /// event its own stream, for the handler's [`CommandContext::read`] (SPEC DM-5): the
    /// handler reads its state at version `events.len()`. No events: it does not exist.
    /// Any other id of `B` reads as not existing; a type never given here cannot be read.
    #[track_caller]
    pub fn with_aggregate<B: Aggregate>(
        mut self,
        id: impl Into<String>,
        events: impl IntoIterator<Item = B::Event>,
    ) -> Self {
        let mut state = B::State::default();
        let mut version = 0;
        for event in events {
            B::apply(&mut state, &round_trip::<B>(&event));
            version += 1;
        }
        let named = B::named_aggregate();
        self.world.others.initial.insert(named.clone(), || {
            AggregateState::new(B::State::default(), 0)
        });
        let aggregate_id = named.aggregate_id(id, self.aggregate_id.tenant_id.as_str());
        self.world.others.states.insert(
            aggregate_id,
            AggregateState::new(state, version).with_tenant(&self.aggregate_id.tenant_id),
        );
        self
    }

    /// Uses `id` as the aggregate's id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.aggregate_id.id = id.into();
        self
    }

    /// The aggregate's history before the command: each event as its own stream, in order.
    /// Each event goes through its JSON form, so a lossy serialization shows up here.
    #[track_caller]
    pub fn given(self, events: impl IntoIterator<Item = A::Event>) -> Given<A> {
        let mut state = A::State::default();
        let mut version = 0;
        for event in events {
            let event = round_trip::<A>(&event);
            A::apply(&mut state, &event);
            version += 1;
        }
        Given {
            aggregate_id: self.aggregate_id,
            state,
            version,
            now: None,
            world: self.world,
        }
    }

    /// No history: the aggregate does not exist yet.
    pub fn given_nothing(self) -> Given<A> {
        self.given([])
    }
}

#[track_caller]
pub(crate) fn round_trip<A: Aggregate>(event: &A::Event) -> A::Event {
    let stored = match DomainEvent::of(event) {
        Ok(stored) => stored,
        Err(error) => panic!("event {event:?} does not encode to JSON: {error}"),
    };
    match stored.decode::<A::Event>() {
        Ok(decoded) => decoded,
        Err(error) => panic!("event {event:?} does not decode from its own JSON: {error}"),
    }
}

/// A spec with its history given; next comes the command.
#[derive(Debug)]
pub struct Given<A: Aggregate> {
    aggregate_id: AggregateId,
    state: A::State,
    version: u64,
    now: Option<i64>,
    world: World,
}

/// One decision as the node makes it: validation, the existence rules, the handler, and the
/// changes its events make besides history; the state and version after it.
struct Decision<A: Aggregate> {
    outcome: Result<Vec<A::Event>, AggregateError>,
    state: A::State,
    version: u64,
    changes: AppendChanges,
}

fn decide_at<A: Aggregate>(
    world: &World,
    aggregate_id: &AggregateId,
    state: A::State,
    version: u64,
    now: i64,
    command: A::Command,
) -> Decision<A> {
    let command_id = id::new_id();
    let declared = A::reads();
    let reads = AggregateReads::new(&world.others, &declared);
    let ctx = CommandContext {
        aggregate_id,
        version,
        command_id: &command_id,
        request_id: &command_id,
        now,
        services: &world.services,
        deadline: None,
        reads: Some(&reads),
    };
    let outcome = match command.validate() {
        Err(errors) => Err(AggregateError::Validation(errors)),
        // The handler's future runs here, on this thread: a fake service needs no runtime. A
        // panic in it (or in the keys and deadlines the events make) is the node's 500 result
        // (SPEC PX-1), not the test's: `expect_error_code(ErrorCode::InternalServerError)`.
        Ok(()) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            futures::executor::block_on(decide::<A>(&state, command, &ctx))
        }))
        .unwrap_or_else(|payload| {
            Err(AggregateError::HandlerPanicked {
                aggregate_id: Box::new(aggregate_id.clone()),
                message: crate::panic_message(payload.as_ref()),
            })
        }),
    };
    let mut decision = Decision {
        outcome: Err(AggregateError::Encode(serde::de::Error::custom(
            "not decided",
        ))),
        state,
        version,
        changes: AppendChanges::default(),
    };
    decision.outcome = outcome.and_then(|events| {
        let events: Vec<A::Event> = events.iter().map(round_trip::<A>).collect();
        // The same comparison the node makes before it appends.
        let state = &decision.state;
        decision.changes = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            changes_of::<A>(state, &events, &ctx)
        }))
        .unwrap_or_else(|payload| {
            Err(AggregateError::HandlerPanicked {
                aggregate_id: Box::new(aggregate_id.clone()),
                message: crate::panic_message(payload.as_ref()),
            })
        })?;
        if !events.is_empty() {
            decision.changes.conditions = reads.conditions_for(aggregate_id);
        }
        for event in &events {
            A::apply(&mut decision.state, event);
        }
        if !events.is_empty() {
            decision.version += 1;
        }
        Ok(events)
    });
    decision
}

impl<A: Aggregate> Given<A> {
    /// Decides at `now` (milliseconds since the Unix epoch) instead of the wall clock: the
    /// handler's `ctx.now`, and where [`Expect::advance`] starts from.
    pub fn at(mut self, now: i64) -> Self {
        self.now = Some(now);
        self
    }

    /// Validates `command` and decides on it as the processing node would: validation, then
    /// the existence rules of its kind, then the handler.
    pub fn when(self, command: A::Command) -> Expect<A> {
        let now = self.now.unwrap_or_else(id::now_millis);
        let decision = decide_at::<A>(
            &self.world,
            &self.aggregate_id,
            self.state,
            self.version,
            now,
            command,
        );
        Expect {
            outcome: decision.outcome,
            state: decision.state,
            version: decision.version,
            changes: decision.changes,
            aggregate_id: self.aggregate_id,
            now,
            fired: Vec::new(),
            world: self.world,
        }
    }
}

/// What the command came to; each `expect_*` checks one thing and returns the spec for more.
#[derive(Debug)]
pub struct Expect<A: Aggregate> {
    outcome: Result<Vec<A::Event>, AggregateError>,
    state: A::State,
    version: u64,
    changes: AppendChanges,
    aggregate_id: AggregateId,
    now: i64,
    fired: Vec<A::Command>,
    world: World,
}

impl<A: Aggregate> Expect<A> {
    /// The events the command produced.
    #[track_caller]
    pub fn events(&self) -> &[A::Event] {
        match &self.outcome {
            Ok(events) => events,
            Err(error) => panic!(
                "expected events, but the command failed with {}: {error}",
                error.error_code()
            ),
        }
    }

    /// Expects exactly these events, in order.
    #[track_caller]
    pub fn expect_events(self, expected: impl IntoIterator<Item = A::Event>) -> Self
    where
        A::Event: PartialEq,
    {
        let expected: Vec<A::Event> = expected.into_iter().collect();
        assert_eq!(
            self.events(),
            expected.as_slice(),
            "the command produced other events"
        );
        self
    }

    /// Expects the command to succeed without recording anything (SPEC RQ-13).
    #[track_caller]
    pub fn expect_no_events(self) -> Self {
        assert!(
            self.events().is_empty(),
            "expected no events, got {:?}",
            self.events()
        );
        self
    }

    /// Expects the command to fail with `code`.
    #[track_caller]
    pub fn expect_error_code(self, code: ErrorCode) -> Self {
        match &self.outcome {
            Ok(events) => panic!("expected error {code}, but the command produced {events:?}"),
            Err(error) => assert_eq!(
                error.error_code(),
                code,
                "the command failed otherwise: {error}"
            ),
        }
        self
    }

    /// Expects validation to fail on exactly these fields (in any order).
    #[track_caller]
    pub fn expect_binding_errors(self, fields: &[&str]) -> Self {
        match &self.outcome {
            Err(AggregateError::Validation(errors)) => {
                let mut got: Vec<&str> = errors.iter().map(|e| e.name.as_str()).collect();
                let mut want = fields.to_vec();
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(got, want, "validation failed on other fields: {errors:?}");
            }
            other => panic!("expected validation errors on {fields:?}, got {other:?}"),
        }
        self
    }

    /// Expects the decision to make exactly these changes to the aggregate's unique keys
    /// (SPEC DM-1), releases first, as the node hands them to the store with the stream.
    #[track_caller]
    pub fn expect_keys(self, expected: impl IntoIterator<Item = KeyChange>) -> Self {
        let expected: Vec<KeyChange> = expected.into_iter().collect();
        assert_eq!(
            self.changes.keys, expected,
            "the decision changes other keys"
        );
        self
    }

    /// Expects the decision's append to depend on exactly these aggregates being at these
    /// versions (SPEC DM-5), `(aggregate name, id, version)` in the order first read: what
    /// its [`CommandContext::read`]s left. A decision with no events leaves none.
    #[track_caller]
    pub fn expect_conditions(self, expected: &[(&str, &str, u64)]) -> Self {
        let got: Vec<(&str, &str, u64)> = self
            .changes
            .conditions
            .iter()
            .map(|c| {
                (
                    c.aggregate_id.aggregate_name.as_str(),
                    c.aggregate_id.id.as_str(),
                    c.version,
                )
            })
            .collect();
        assert_eq!(got, expected, "the decision depends on other aggregates");
        self
    }

    /// The deadline changes the decision makes (SPEC DM-2), in name order, as the node hands
    /// them to the store with the stream.
    pub fn deadline_changes(&self) -> &[DeadlineChange] {
        &self.changes.deadlines
    }

    /// Checks the deadlines the state holds now (after the command, or after
    /// [`advance`](Self::advance)).
    #[track_caller]
    pub fn expect_deadlines(self, check: impl FnOnce(&[Deadline<A::Command>])) -> Self {
        check(&A::deadlines(&self.state).unwrap_or_default());
        self
    }

    /// Moves the clock forward by `by` and fires what comes due, as the scheduler would:
    /// each deadline of the state due by then, earliest first, is decided at its due time
    /// and its events applied (a deadline its own command leaves in place fires once). What
    /// fired is checked with [`expect_fired`](Self::expect_fired); the outcome checked by the
    /// other expectations is then the last fired command's.
    pub fn advance(mut self, by: std::time::Duration) -> Self {
        let until = self
            .now
            .saturating_add(i64::try_from(by.as_millis()).unwrap_or(i64::MAX));
        let mut done: Vec<(String, i64)> = Vec::new();
        loop {
            let mut due: Vec<Deadline<A::Command>> = A::deadlines(&self.state)
                .unwrap_or_default()
                .into_iter()
                .filter(|d| d.due_at <= until && !done.contains(&(d.name.clone(), d.due_at)))
                .collect();
            due.sort_by_key(|d| d.due_at);
            let Some(next) = due.into_iter().next() else {
                break;
            };
            done.push((next.name.clone(), next.due_at));
            let at = next.due_at.max(self.now);
            self.fired.push(next.command.clone());
            let decision = decide_at::<A>(
                &self.world,
                &self.aggregate_id,
                self.state,
                self.version,
                at,
                next.command,
            );
            self.outcome = decision.outcome;
            self.state = decision.state;
            self.version = decision.version;
            self.changes = decision.changes;
        }
        self.now = until;
        self
    }

    /// Expects exactly these commands to have fired, in order, since the spec began.
    #[track_caller]
    pub fn expect_fired(self, expected: impl IntoIterator<Item = A::Command>) -> Self
    where
        A::Command: PartialEq,
    {
        let expected: Vec<A::Command> = expected.into_iter().collect();
        assert_eq!(self.fired, expected, "other commands fired");
        self
    }

    /// Checks the state after the events were applied.
    #[track_caller]
    pub fn expect_state(self, check: impl FnOnce(&A::State)) -> Self {
        check(&self.state);
        self
    }

    /// The aggregate's version after the command (each given event and each accepted command
    /// counts one).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The failure, if the command failed.
    pub fn error(&self) -> Option<&AggregateError> {
        self.outcome.as_ref().err()
    }
}

/// What a spec's handler runs beside: the services (SPEC DM-3) and the other aggregates it
/// can read (SPEC DM-5).
#[derive(Debug, Default)]
struct World {
    services: Services,
    others: GivenAggregates,
}

/// The other aggregates given to a spec, read by its handler as a node reads the store.
#[derive(Debug, Default)]
struct GivenAggregates {
    states: HashMap<AggregateId, AggregateState>,
    /// The state before the first event, for each type given.
    initial: HashMap<NamedAggregate, fn() -> AggregateState>,
}

impl AggregateReader for GivenAggregates {
    fn read_state<'a>(
        &'a self,
        aggregate_id: &'a AggregateId,
    ) -> BoxFuture<'a, Result<AggregateState, ServiceFailure>> {
        let named = NamedAggregate::new(
            aggregate_id.context_name.as_str(),
            aggregate_id.aggregate_name.as_str(),
        );
        let state = match (self.states.get(aggregate_id), self.initial.get(&named)) {
            (Some(state), _) => state.clone(),
            (None, Some(initial)) => initial(),
            (None, None) => panic!(
                "the handler read aggregate {aggregate_id}, whose type the spec was not given: give it with `AggregateSpec::with_aggregate::<{}>`",
                aggregate_id.aggregate_name
            ),
        };
        Box::pin(std::future::ready(Ok(state)))
    }
}

/// Decodes a stored stream into `A`'s typed events; used by tests that read history back.
pub fn typed_events<A: Aggregate>(
    stream: &DomainEventStream,
) -> Result<Vec<A::Event>, AggregateError> {
    decode_events::<A>(stream)
}
