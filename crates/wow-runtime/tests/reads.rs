//! Decisions that read other aggregates (SPEC DM-5): a stay is booked only in a room that
//! exists and is open, read from the store, and the booking holds only while the room stays
//! as read; when it moved between the read and the append, the stay is decided again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use wow_core::aggregate::{Aggregate, AggregateRegistry, CommandContext, Refusal};
use wow_core::command::{CommandResultError, JsonCommand};
use wow_core::eventsourcing::{
    AppendChanges, EventStore, EventStoreDecorator, EventStoreError, InMemoryEventStore,
};
use wow_core::testing_example::{
    BookRoom, Nothing, Room, RoomCommand, RoomEvent, RoomState, Stay, StayCommand, StayError,
};
use wow_core::{AggregateId, CommandMessage, CommandResult, DomainEventStream, ErrorCode};
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::LocalPipeline;

const TENANT: &str = "t1";

fn registry() -> AggregateRegistry {
    let mut registry = AggregateRegistry::new();
    registry.register::<Room>().unwrap();
    registry.register::<Stay>().unwrap();
    registry
}

fn room(id: &str) -> AggregateId {
    Room::named_aggregate().aggregate_id(id, TENANT)
}

fn stay() -> AggregateId {
    Stay::named_aggregate().aggregate_id(wow_core::id::new_id(), TENANT)
}

fn open(room_id: &str) -> JsonCommand {
    CommandMessage::of(room(room_id), RoomCommand::Open(Nothing {}))
        .into_json()
        .unwrap()
}

fn close(room_id: &str) -> JsonCommand {
    CommandMessage::of(room(room_id), RoomCommand::Close(Nothing {}))
        .into_json()
        .unwrap()
}

fn book(stay: &AggregateId, room_id: &str) -> JsonCommand {
    CommandMessage::of(
        stay.clone(),
        StayCommand::Book(BookRoom {
            room: room_id.to_owned(),
        }),
    )
    .into_json()
    .unwrap()
}

async fn send(pipeline: &LocalPipeline, command: JsonCommand) -> CommandResult {
    match pipeline
        .gateway
        .send_and_wait(command, WaitPlan::processed())
        .await
    {
        Ok(result) => result,
        Err(CommandResultError::Failed(result)) => *result,
        Err(other) => panic!("the command was not answered: {other:?}"),
    }
}

fn pipeline(store: Arc<dyn EventStore>) -> LocalPipeline {
    LocalPipeline::builder(registry(), store).build()
}

#[tokio::test]
async fn a_stay_in_a_room_that_does_not_exist_is_refused_and_the_refusal_is_its_decision() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let node = pipeline(store.clone());
    let guest = stay();
    let refused = send(&node, book(&guest, "no-such-room").with_request_id("b-1")).await;
    assert_eq!(
        refused.error_code,
        ErrorCode::domain("NoSuchRoom"),
        "{refused:?}"
    );
    assert!(store.load(&guest, 1, u64::MAX).await.unwrap().is_empty());
    // The room appears; the resend of the refused intent is answered as decided (ID-6) and
    // a new intent books it.
    assert!(send(&node, open("no-such-room")).await.succeeded);
    let resent = send(&node, book(&guest, "no-such-room").with_request_id("b-1")).await;
    assert_eq!(resent.error_code, refused.error_code);
    let booked = send(&node, book(&guest, "no-such-room").with_request_id("b-2")).await;
    assert!(booked.succeeded, "{booked:?}");
}

#[tokio::test]
async fn a_stay_reads_the_room_in_its_own_tenant_and_a_closed_room_refuses_it() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let node = pipeline(store);
    assert!(send(&node, open("r-1")).await.succeeded);
    // The same room id in another tenant does not exist for it.
    let mut elsewhere = stay();
    elsewhere.tenant_id = "t2".to_owned();
    let refused = send(&node, book(&elsewhere, "r-1")).await;
    assert_eq!(refused.error_code, ErrorCode::domain("NoSuchRoom"));
    assert!(send(&node, book(&stay(), "r-1")).await.succeeded);
    assert!(send(&node, close("r-1")).await.succeeded);
    let closed = send(&node, book(&stay(), "r-1")).await;
    assert_eq!(closed.error_code, ErrorCode::domain("RoomClosed"));
}

/// Moves the room between a stay's read and its append, `moves_left` times: what another
/// node's command would do in that window. Each move appends `event` to the room. Reads of
/// rooms fail while `reads_down` is set.
#[derive(Debug)]
struct MovesTheRoom {
    inner: Arc<dyn EventStore>,
    moves_left: AtomicU32,
    event: RoomEvent,
    reads_down: AtomicBool,
}

impl MovesTheRoom {
    fn new(event: RoomEvent) -> Arc<Self> {
        Arc::new(Self {
            inner: Arc::new(InMemoryEventStore::new()),
            moves_left: AtomicU32::new(0),
            event,
            reads_down: AtomicBool::new(false),
        })
    }
}

#[async_trait]
impl EventStoreDecorator for MovesTheRoom {
    fn inner(&self) -> &dyn EventStore {
        &*self.inner
    }

    async fn load(
        &self,
        aggregate_id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        if aggregate_id.aggregate_name == "room" && self.reads_down.load(Ordering::SeqCst) {
            return Err(EventStoreError::Unavailable("rooms cannot be read".into()));
        }
        self.inner.load(aggregate_id, head, tail).await
    }

    async fn append_with(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        let moving = !changes.conditions.is_empty()
            && self
                .moves_left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if moving {
            let read = &changes.conditions[0];
            let last = self
                .inner
                .last(&read.aggregate_id)
                .await?
                .expect("the room exists");
            let mut moved = last.clone();
            moved.version += 1;
            moved.id = wow_core::id::new_id();
            moved.request_id = wow_core::id::new_id();
            moved.body = vec![wow_core::DomainEvent::of(&self.event).expect("the event encodes")];
            self.inner.append(&moved).await?;
        }
        self.inner.append_with(stream, changes).await
    }
}

#[tokio::test]
async fn a_room_that_moved_after_the_read_makes_the_stay_decide_again_on_what_is_there_now() {
    let store = MovesTheRoom::new(RoomEvent::Closed(Nothing {}));
    let node = pipeline(store.clone());
    assert!(send(&node, open("r-1")).await.succeeded);
    store.moves_left.store(1, Ordering::SeqCst);
    let guest = stay();
    let answer = send(&node, book(&guest, "r-1").with_request_id("b-1")).await;
    assert_eq!(
        answer.error_code,
        ErrorCode::domain("RoomClosed"),
        "decided again on the closed room, not booked on the open one: {answer:?}"
    );
    assert!(store
        .inner
        .load(&guest, 1, u64::MAX)
        .await
        .unwrap()
        .is_empty());
    let room_now = store.inner.last(&room("r-1")).await.unwrap().unwrap();
    assert_eq!(room_now.version, 2);
}

#[tokio::test]
async fn a_room_that_keeps_moving_ends_in_a_conflict_and_records_nothing() {
    let store = MovesTheRoom::new(RoomEvent::Opened(Nothing {}));
    let node = pipeline(store.clone());
    assert!(send(&node, open("r-1")).await.succeeded);
    store.moves_left.store(u32::MAX, Ordering::SeqCst);
    let guest = stay();
    let answer = send(&node, book(&guest, "r-1").with_request_id("b-1")).await;
    assert_eq!(
        answer.error_code,
        ErrorCode::EventVersionConflict,
        "{answer:?}"
    );
    assert_eq!(answer.request_id, "b-1", "the answer keeps the ids");
    assert_eq!(answer.aggregate_id, guest.id);
    assert!(store
        .inner
        .load(&guest, 1, u64::MAX)
        .await
        .unwrap()
        .is_empty());
    assert!(
        store
            .inner
            .find_decision(&guest, "b-1")
            .await
            .unwrap()
            .is_none(),
        "never recorded as a decision: the resend decides again"
    );
    store.moves_left.store(0, Ordering::SeqCst);
    let resent = send(&node, book(&guest, "r-1").with_request_id("b-1")).await;
    assert!(resent.succeeded, "{resent:?}");
}

#[tokio::test]
async fn a_read_the_store_cannot_answer_is_a_service_failure_and_the_resend_decides() {
    let store = MovesTheRoom::new(RoomEvent::Opened(Nothing {}));
    let node = pipeline(store.clone());
    assert!(send(&node, open("r-1")).await.succeeded);
    store.reads_down.store(true, Ordering::SeqCst);
    let guest = stay();
    let failed = send(&node, book(&guest, "r-1").with_request_id("b-1")).await;
    assert_eq!(failed.error_code, ErrorCode::ServiceFailed, "{failed:?}");
    assert_eq!(failed.request_id, "b-1");
    assert!(store
        .inner
        .find_decision(&guest, "b-1")
        .await
        .unwrap()
        .is_none());
    store.reads_down.store(false, Ordering::SeqCst);
    let booked = send(&node, book(&guest, "r-1").with_request_id("b-1")).await;
    assert!(booked.succeeded, "{booked:?}");
}

/// Reads a room without declaring it in `reads`.
#[derive(Debug)]
struct Undeclared;

impl Aggregate for Undeclared {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "undeclared";
    type State = RoomState;
    type Command = StayCommand;
    type Event = wow_core::testing_example::StayEvent;
    type Error = StayError;

    fn handle(
        _: &RoomState,
        _: StayCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<Self::Event>, StayError> {
        Err(StayError::NoSuchRoom)
    }

    async fn decide(
        _: &RoomState,
        command: StayCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<Self::Event>, Refusal<StayError>> {
        let StayCommand::Book(book) = command;
        let _room = ctx.read::<Room>(&book.room).await?;
        Ok(vec![wow_core::testing_example::StayEvent::Booked(book)])
    }

    fn apply(_: &mut RoomState, _: &Self::Event) {}
}

#[tokio::test]
async fn a_read_the_aggregate_does_not_declare_is_a_service_failure_and_records_nothing() {
    let mut registry = registry();
    registry.register::<Undeclared>().unwrap();
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let node = LocalPipeline::builder(registry, store.clone()).build();
    assert!(send(&node, open("r-1")).await.succeeded);
    let id = Undeclared::named_aggregate().aggregate_id("u-1", TENANT);
    let failed = send(
        &node,
        CommandMessage::of(
            id.clone(),
            StayCommand::Book(BookRoom {
                room: "r-1".to_owned(),
            }),
        )
        .into_json()
        .unwrap()
        .with_request_id("u-1"),
    )
    .await;
    assert_eq!(failed.error_code, ErrorCode::ServiceFailed);
    assert!(failed.error_msg.contains("reads"), "{}", failed.error_msg);
    assert!(store.find_decision(&id, "u-1").await.unwrap().is_none());
}

#[test]
fn the_registry_names_what_is_read_and_what_is_not_served() {
    let mut registry = AggregateRegistry::new();
    registry.register::<Stay>().unwrap();
    assert!(registry.is_read_by_others("room"));
    assert!(!registry.is_read_by_others("stay"));
    let unserved = registry.unserved_reads();
    assert_eq!(unserved.len(), 1);
    assert_eq!(unserved[0].0, "stay");
    assert_eq!(unserved[0].1, Room::named_aggregate());
    registry.register::<Room>().unwrap();
    assert!(registry.unserved_reads().is_empty());
}

#[test]
fn the_test_kit_reads_given_aggregates_and_shows_the_conditions() {
    use wow_core::aggregate::AggregateSpec;
    use wow_core::testing_example::{RoomEvent, StayEvent};
    AggregateSpec::<Stay>::new()
        .with_aggregate::<Room>("r-1", [RoomEvent::Opened(Nothing {})])
        .given_nothing()
        .when(StayCommand::Book(BookRoom {
            room: "r-1".to_owned(),
        }))
        .expect_events([StayEvent::Booked(BookRoom {
            room: "r-1".to_owned(),
        })])
        .expect_conditions(&[("room", "r-1", 1)]);
    AggregateSpec::<Stay>::new()
        .with_aggregate::<Room>(
            "r-1",
            [RoomEvent::Opened(Nothing {}), RoomEvent::Closed(Nothing {})],
        )
        .given_nothing()
        .when(StayCommand::Book(BookRoom {
            room: "r-1".to_owned(),
        }))
        .expect_error_code(ErrorCode::domain("RoomClosed"))
        .expect_conditions(&[]);
    AggregateSpec::<Stay>::new()
        .with_aggregate::<Room>("r-1", [])
        .given_nothing()
        .when(StayCommand::Book(BookRoom {
            room: "r-2".to_owned(),
        }))
        .expect_error_code(ErrorCode::domain("NoSuchRoom"));
}
