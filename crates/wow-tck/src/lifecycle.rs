//! An aggregate's whole life through a processing node (SPEC DM-6): its soft delete releases
//! its unique keys and cancels its deadlines in the delete's own atomic write, and its recover
//! claims the keys again (refused `DuplicateKey`, as the recorded decision, when another
//! aggregate took one meanwhile) and schedules its deadlines again, with request ids of the
//! recover's stream.
//!
//! Each case takes a fresh store that keeps history, keys and deadlines, and runs the
//! [`Booking`] example on a node of its own over it, by a clock the case moves. Run them all
//! with [`lifecycle_tck!`](crate::lifecycle_tck).

use std::sync::Arc;

use serde_json::json;
use wow_core::aggregate::{
    AggregateRegistry, TypedAggregateRuntime, DELETE_AGGREGATE, RECOVER_AGGREGATE,
};
use wow_core::command::{CommandKind, JsonCommand};
use wow_core::deadline::{deadline_request_id, DeadlineStore, ScheduledCommand};
use wow_core::eventsourcing::{EventStore, RequestDecision};
use wow_core::id::{self, Clock, ManualClock};
use wow_core::testing_example::{Booking, BookingState, BookingStatus};
use wow_core::unique_key::UniqueKey;
use wow_core::{AggregateId, CommandMessage, CommandResult, ErrorCode};
use wow_runtime::command::WaitPlan;
use wow_runtime::eventsourcing::load_aggregate;
use wow_runtime::pipeline::LocalPipeline;

/// The store under test: its history (and keys) and its deadlines, one database behind both.
#[derive(Clone, Debug)]
pub struct Store {
    /// The event store, which writes keys and deadlines with the stream.
    pub events: Arc<dyn EventStore>,
    /// The same store's deadlines.
    pub deadlines: Arc<dyn DeadlineStore>,
}

impl Store {
    /// `store` as both.
    pub fn of<S: EventStore + DeadlineStore + 'static>(store: Arc<S>) -> Self {
        Self {
            events: store.clone(),
            deadlines: store,
        }
    }
}

const TENANT: &str = "tck";
const T0: i64 = 1_800_000_000_000;
const MINUTE: i64 = 60_000;

/// A node of its own over `store`, running the booking by `clock`.
fn node(store: &Store, clock: &Arc<ManualClock>) -> LocalPipeline {
    let mut registry = AggregateRegistry::new();
    registry
        .register::<Booking>()
        .expect("the booking registers once");
    LocalPipeline::builder(registry, store.events.clone())
        .clock(clock.clone())
        .deadlines(store.deadlines.clone())
        .build()
}

fn booking() -> AggregateId {
    AggregateId::new("demo", "booking", id::new_id(), TENANT)
}

/// A slot no other case takes.
fn slot() -> String {
    format!("slot-{}", id::new_id())
}

fn command(booking: &AggregateId, name: &str, body: serde_json::Value) -> JsonCommand {
    CommandMessage::new(booking.clone(), name, CommandKind::Normal, body)
}

fn hold(booking: &AggregateId, slot: &str, minutes: u32) -> JsonCommand {
    let mut hold = command(booking, "hold", json!({"slot": slot, "minutes": minutes}));
    hold.kind = CommandKind::Create;
    hold
}

fn delete(booking: &AggregateId) -> JsonCommand {
    command(booking, DELETE_AGGREGATE, json!({}))
}

fn recover(booking: &AggregateId) -> JsonCommand {
    command(booking, RECOVER_AGGREGATE, json!({}))
}

async fn send(node: &LocalPipeline, command: JsonCommand) -> CommandResult {
    match node
        .gateway
        .send_and_wait(command, WaitPlan::processed())
        .await
    {
        Ok(result) => result,
        Err(error) => error.result().clone(),
    }
}

async fn sent(node: &LocalPipeline, command: JsonCommand) -> CommandResult {
    let name = command.name.clone();
    let result = send(node, command).await;
    assert!(result.succeeded, "{name} must succeed: {result:?}");
    result
}

async fn slot_holder(store: &Store, slot: &str) -> Option<AggregateId> {
    store
        .events
        .find_key(TENANT, &UniqueKey::new("slot", slot))
        .await
        .expect("a key can be looked up")
        .map(|held| held.aggregate_id)
}

async fn pending(store: &Store, booking: &AggregateId) -> Vec<ScheduledCommand> {
    store
        .deadlines
        .scheduled_for(booking)
        .await
        .expect("the pending deadlines of an aggregate read")
}

/// The booking's state as its history gives it, and whether it is deleted.
async fn state_of(store: &Store, booking: &AggregateId) -> (BookingState, bool) {
    let runtime = TypedAggregateRuntime::<Booking>::new();
    let state = load_aggregate(&runtime, store.events.as_ref(), None, booking)
        .await
        .expect("the booking loads");
    let typed = state
        .downcast_ref::<BookingState>()
        .expect("a booking's state")
        .clone();
    (typed, state.is_deleted())
}

/// A delete releases the booking's slot in the delete's own write, so another booking holds
/// it at once; the recover of a booking whose slot is still free claims it again at the
/// recover's version.
pub async fn a_delete_releases_the_keys_and_a_recover_claims_them_again(store: Store) {
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let (first, second, slot) = (booking(), booking(), slot());
    sent(&node, hold(&first, &slot, 15)).await;
    assert_eq!(slot_holder(&store, &slot).await, Some(first.clone()));

    sent(&node, delete(&first)).await;
    assert_eq!(
        slot_holder(&store, &slot).await,
        None,
        "a deleted booking holds no slot"
    );
    let recovered = sent(&node, recover(&first)).await;
    assert_eq!(recovered.aggregate_version, Some(3));
    let held = store
        .events
        .find_key(TENANT, &UniqueKey::new("slot", &slot))
        .await
        .unwrap()
        .expect("the recover claims the slot again");
    assert_eq!((held.aggregate_id, held.version), (first.clone(), 3));
    let (state, deleted) = state_of(&store, &first).await;
    assert!(!deleted);
    assert_eq!(state.status, BookingStatus::Held);

    // Deleted again, the slot is free for another booking.
    sent(&node, delete(&first)).await;
    sent(&node, hold(&second, &slot, 15)).await;
    assert_eq!(slot_holder(&store, &slot).await, Some(second));
}

/// A recover whose slot another booking took meanwhile is refused `DuplicateKey`, recorded as
/// the recover's decision (its resend, on another node, gets the same answer and appends
/// nothing); the booking stays deleted and the slot its taker's. Once the slot is free, a new
/// recover takes it back.
pub async fn a_recover_whose_key_another_aggregate_took_is_refused_and_recorded(store: Store) {
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let (first, second, slot) = (booking(), booking(), slot());
    sent(&node, hold(&first, &slot, 15)).await;
    sent(&node, delete(&first)).await;
    sent(&node, hold(&second, &slot, 1)).await;

    let recover_first = recover(&first).with_request_id("recover-first");
    let refused = send(&node, recover_first.clone()).await;
    assert_eq!(refused.error_code, ErrorCode::DuplicateKey, "{refused:?}");
    assert!(
        refused.error_msg.contains(&slot) && !refused.error_msg.contains(&second.id),
        "the refusal names the slot, not its holder: {}",
        refused.error_msg
    );
    let mut resend = recover_first;
    resend.id = id::new_id();
    let replayed = send(&self::node(&store, &clock), resend).await;
    assert_eq!(replayed.error_code, ErrorCode::DuplicateKey, "{replayed:?}");
    let decision = store
        .events
        .find_decision(&first, "recover-first")
        .await
        .unwrap()
        .expect("the refusal is the recover's recorded decision");
    assert!(matches!(
        decision,
        RequestDecision::Rejected(ref record) if record.error_code == ErrorCode::DuplicateKey
    ));
    let history = store.events.load(&first, 1, u64::MAX).await.unwrap();
    assert_eq!(history.len(), 2, "the refused recover appends nothing");
    assert!(
        state_of(&store, &first).await.1,
        "the booking stays deleted"
    );
    assert_eq!(slot_holder(&store, &slot).await, Some(second.clone()));
    assert!(
        pending(&store, &first).await.is_empty(),
        "a refused recover schedules nothing"
    );

    // The taker's hold expires, which frees the slot: a new recover takes it back.
    clock.advance(MINUTE);
    let expiry = pending(&store, &second).await.remove(0);
    sent(&node, wow_runtime::deadline::fired_command(&expiry)).await;
    assert_eq!(slot_holder(&store, &slot).await, None);
    sent(&node, recover(&first)).await;
    assert_eq!(slot_holder(&store, &slot).await, Some(first));
}

/// A delete cancels the booking's expiry in the delete's own write, so nothing fires into the
/// deleted booking; the recover schedules it again at its time, with the request id of the
/// recover's stream (a new firing, never the replay of one refused while it was deleted).
pub async fn a_delete_suspends_the_deadlines_and_a_recover_restores_them(store: Store) {
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let (booking, slot) = (booking(), slot());
    sent(&node, hold(&booking, &slot, 15)).await;
    let scheduled = pending(&store, &booking).await;
    assert_eq!(scheduled.len(), 1);
    assert_eq!(scheduled[0].request_id, deadline_request_id("expire", 1));

    sent(&node, delete(&booking)).await;
    assert!(
        pending(&store, &booking).await.is_empty(),
        "a deleted booking has no deadline pending"
    );
    assert!(store
        .deadlines
        .due(i64::MAX, 100)
        .await
        .unwrap()
        .iter()
        .all(|row| row.owner != booking));

    clock.advance(5 * MINUTE);
    sent(&node, recover(&booking)).await;
    let restored = pending(&store, &booking).await;
    assert_eq!(restored.len(), 1, "the recover schedules the expiry again");
    assert_eq!(restored[0].name, "expire");
    assert_eq!(
        restored[0].due_at,
        T0 + 15 * MINUTE,
        "at the time the state says"
    );
    assert_eq!(restored[0].request_id, deadline_request_id("expire", 3));
    assert_eq!(restored[0].command, "expire");
}

/// An expiry whose time passed while the booking was deleted is due at once after the
/// recover, and firing it expires the booking (with the recover's request id, so it is not
/// the replay of anything refused before) and frees its slot.
pub async fn a_deadline_that_passed_while_deleted_fires_after_the_recover(store: Store) {
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let (booking, slot) = (booking(), slot());
    sent(&node, hold(&booking, &slot, 15)).await;
    let first_schedule = pending(&store, &booking).await.remove(0);
    sent(&node, delete(&booking)).await;
    // The old schedule, fired late by a scheduler that read it before the delete: refused,
    // and recorded under its own request id.
    clock.advance(60 * MINUTE);
    // A scheduler that read the row before the delete fires it: the delete cancelled it, so
    // the firing is no longer pending.
    let late = send(&node, wow_runtime::deadline::fired_command(&first_schedule)).await;
    assert_eq!(late.error_code, ErrorCode::DeadlineNotPending);

    sent(&node, recover(&booking)).await;
    let due = store
        .deadlines
        .due(clock.now_millis(), 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|row| row.owner == booking)
        .collect::<Vec<_>>();
    assert_eq!(due.len(), 1, "the passed expiry is due at once: {due:?}");
    assert_ne!(due[0].request_id, first_schedule.request_id);
    let fired = sent(&node, wow_runtime::deadline::fired_command(&due[0])).await;
    assert_eq!(fired.aggregate_version, Some(4));
    assert_eq!(
        state_of(&store, &booking).await.0.status,
        BookingStatus::Expired
    );
    assert_eq!(slot_holder(&store, &slot).await, None);
    assert!(pending(&store, &booking).await.is_empty());
}

/// A confirmed booking (its slot held, no expiry pending) deleted and recovered comes back as
/// it was: the slot held again, still no expiry.
pub async fn a_recover_restores_only_what_the_state_holds(store: Store) {
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let (booking, slot) = (booking(), slot());
    sent(&node, hold(&booking, &slot, 15)).await;
    sent(&node, command(&booking, "confirm", json!({}))).await;
    assert!(pending(&store, &booking).await.is_empty());
    sent(&node, delete(&booking)).await;
    assert_eq!(slot_holder(&store, &slot).await, None);
    sent(&node, recover(&booking)).await;
    assert_eq!(slot_holder(&store, &slot).await, Some(booking.clone()));
    assert!(
        pending(&store, &booking).await.is_empty(),
        "a confirmed booking has no expiry to restore"
    );
}

/// SPEC DM-6: a firing that a later event overtook (the booking was confirmed, which cancelled
/// its expiry, while the expiry's command was on its way) is refused `DeadlineNotPending`,
/// recorded as the decision under the firing's request id (a resend gets the same answer),
/// and the handler never runs.
pub async fn a_firing_a_later_event_overtook_is_refused_and_recorded(store: Store) {
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let booking = booking();
    sent(&node, hold(&booking, &slot(), 1)).await;
    let row = pending(&store, &booking).await.remove(0);
    sent(&node, command(&booking, "confirm", json!({}))).await;
    assert!(
        pending(&store, &booking).await.is_empty(),
        "confirming cancels the expiry"
    );
    clock.advance(2 * MINUTE);
    for attempt in ["the firing", "its resend"] {
        let refused = send(&node, wow_runtime::deadline::fired_command(&row)).await;
        assert_eq!(
            refused.error_code,
            ErrorCode::DeadlineNotPending,
            "{attempt}: {refused:?}"
        );
    }
    let decision = store
        .events
        .find_decision(&booking, &row.request_id)
        .await
        .expect("a decision can be looked up");
    assert!(
        matches!(&decision, Some(RequestDecision::Rejected(_))),
        "{decision:?}"
    );
    assert_eq!(
        state_of(&store, &booking).await.0.status,
        BookingStatus::Confirmed
    );
}

/// SPEC DM-6: with no scheduler running (one held back, or late), a command that reaches the
/// booking after its expiry came due is decided after the expiry: the node fires the overdue
/// deadline first, with the schedule's request id, and the late confirm meets an expired
/// booking. The scheduler, when it comes, has nothing left to fire.
pub async fn a_command_after_an_overdue_deadline_is_decided_after_it(store: Store) {
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let booking = booking();
    sent(&node, hold(&booking, &slot(), 1)).await;
    let row = pending(&store, &booking).await.remove(0);
    clock.advance(MINUTE + 1);
    let late = send(&node, command(&booking, "confirm", json!({}))).await;
    assert!(!late.succeeded, "{late:?}");
    assert_eq!(late.error_code.as_str(), "NotHeld", "{late:?}");
    assert_eq!(
        state_of(&store, &booking).await.0.status,
        BookingStatus::Expired
    );
    assert!(pending(&store, &booking).await.is_empty());
    let expiry = store
        .events
        .find_request(&booking, &row.request_id)
        .await
        .expect("a request can be looked up")
        .expect("the expiry was appended under its schedule's request id");
    assert_eq!(expiry.version, 2);
    let scheduler = node.deadline_scheduler(store.deadlines.clone());
    let pass = scheduler.fire_due().await.expect("a pass runs");
    assert_eq!(pass.fired, 0, "{pass:?}");
}
