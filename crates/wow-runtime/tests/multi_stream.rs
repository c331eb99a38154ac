//! Views and sagas over several aggregate types (SPEC DM-4): a room's schedule fed by the
//! room and by the stays that book it, keyed by room, each event folded with its metadata;
//! a saga that follows rooms and stays; each keeping exactly-once per input stream.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use wow_core::aggregate::{Aggregate, AggregateRegistry};
use wow_core::command::{CommandResultError, JsonCommand};
use wow_core::compensation::{
    CompensationStore, FailureQuery, InMemoryCompensationStore, RetrySpec,
};
use wow_core::event::{ConsumerError, DomainEventStream};
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::saga::{MultiStream, MultiStreamSaga, OneOf2, SagaContext};
use wow_core::testing_example::{
    Add, BookRoom, Counter, CounterCommand, Nothing, Room, RoomCommand, RoomEvent, Stay,
    StayCommand, StayEvent,
};
use wow_core::view::{
    EventMeta, InMemoryViewStore, MultiStreamView, ViewInputs, ViewKey, ViewStore,
};
use wow_core::{CommandMessage, CommandStage, ErrorCode};
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::{LocalPipeline, LocalPipelineBuilder};
use wow_runtime::view::MultiStreamProjection;

/// A room's schedule: whether it is open, and who stays, with what the fold saw of each
/// event.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Schedule {
    open: bool,
    stays: Vec<String>,
    /// `aggregate name/id@version owner time>0` of every event folded, in order.
    seen: Vec<String>,
}

#[derive(Debug)]
struct RoomSchedule;

fn seen(meta: &EventMeta<'_>) -> String {
    format!(
        "{}/{}@{} {} {} {}",
        meta.aggregate_id.aggregate_name,
        meta.aggregate_id.id,
        meta.version,
        meta.tenant_id(),
        meta.owner_id,
        meta.time > 0
    )
}

impl MultiStreamView for RoomSchedule {
    type State = Schedule;
    const NAME: &'static str = "room_schedule";
    const INDEXED: &'static [&'static str] = &["open"];

    fn inputs(inputs: ViewInputs<Schedule>) -> ViewInputs<Schedule> {
        inputs
            .on::<Room>(
                |_, meta| Some(meta.aggregate_id.id.clone()),
                |row, event, meta| {
                    row.open = matches!(event, RoomEvent::Opened(_));
                    row.seen.push(seen(meta));
                },
            )
            .on::<Stay>(
                |StayEvent::Booked(book), _| Some(book.room.clone()),
                |row, _, meta| {
                    row.stays.push(meta.aggregate_id.id.clone());
                    row.seen.push(seen(meta));
                },
            )
    }
}

fn registry() -> AggregateRegistry {
    let mut registry = AggregateRegistry::new();
    registry.register::<Room>().unwrap();
    registry.register::<Stay>().unwrap();
    registry.register::<Counter>().unwrap();
    registry
}

fn room_command(tenant: &str, room: &str, command: RoomCommand) -> JsonCommand {
    CommandMessage::of(Room::named_aggregate().aggregate_id(room, tenant), command)
        .into_json()
        .unwrap()
}

fn book(tenant: &str, stay: &str, room: &str) -> JsonCommand {
    CommandMessage::of(
        Stay::named_aggregate().aggregate_id(stay, tenant),
        StayCommand::Book(BookRoom {
            room: room.to_owned(),
        }),
    )
    .into_json()
    .unwrap()
}

async fn projected(pipeline: &LocalPipeline, command: JsonCommand) {
    pipeline
        .gateway
        .send_and_wait(command, WaitPlan::new(CommandStage::Projected))
        .await
        .unwrap();
}

async fn row(views: &InMemoryViewStore, tenant: &str, room: &str) -> (u64, Schedule) {
    let row = views
        .load(&ViewKey::new(RoomSchedule::NAME, tenant, room))
        .await
        .unwrap()
        .expect("the room has a row");
    (row.version, serde_json::from_value(row.state).unwrap())
}

fn with_view(views: &Arc<InMemoryViewStore>) -> LocalPipelineBuilder {
    LocalPipeline::builder(registry(), Arc::new(InMemoryEventStore::new())).projection(Arc::new(
        MultiStreamProjection::<RoomSchedule>::new(views.clone()),
    ))
}

#[tokio::test]
async fn a_row_keyed_by_room_is_fed_by_the_room_and_the_stays_with_their_metadata() {
    let views = Arc::new(InMemoryViewStore::new());
    let pipeline = with_view(&views).build();
    let mut open = room_command("t1", "r-1", RoomCommand::Open(Nothing {}));
    open.header.insert(
        wow_core::command::OWNER_ID_HEADER.to_owned(),
        "alice".to_owned(),
    );
    projected(&pipeline, open).await;
    // Whichever input the command wrote, PROJECTED covers the view.
    projected(&pipeline, book("t1", "s-1", "r-1")).await;
    projected(&pipeline, book("t1", "s-2", "r-1")).await;
    let (version, schedule) = row(&views, "t1", "r-1").await;
    assert_eq!(version, 3, "three streams folded into the row");
    assert!(schedule.open);
    assert_eq!(schedule.stays, ["s-1", "s-2"]);
    assert_eq!(
        schedule.seen,
        [
            "room/r-1@1 t1 alice true",
            "stay/s-1@1 t1  true",
            "stay/s-2@1 t1  true"
        ]
    );
    // Another tenant's room of the same id is another row.
    projected(
        &pipeline,
        room_command("t2", "r-1", RoomCommand::Open(Nothing {})),
    )
    .await;
    projected(
        &pipeline,
        room_command("t2", "r-1", RoomCommand::Close(Nothing {})),
    )
    .await;
    let (version, elsewhere) = row(&views, "t2", "r-1").await;
    assert_eq!(version, 2);
    assert!(!elsewhere.open);
    assert!(elsewhere.stays.is_empty());
    assert_eq!(row(&views, "t1", "r-1").await.1.stays.len(), 2);
}

#[tokio::test]
async fn a_wait_for_the_view_by_name_covers_a_stream_of_either_input() {
    let views = Arc::new(InMemoryViewStore::new());
    let pipeline = with_view(&views).build();
    for command in [
        room_command("t1", "r-1", RoomCommand::Open(Nothing {})),
        book("t1", "s-1", "r-1"),
    ] {
        pipeline
            .gateway
            .send_and_wait(
                command,
                WaitPlan::new(CommandStage::Projected).for_function(RoomSchedule::NAME),
            )
            .await
            .unwrap();
    }
    assert_eq!(row(&views, "t1", "r-1").await.1.stays, ["s-1"]);
}

#[tokio::test]
async fn a_redelivered_stream_of_either_input_changes_no_row() {
    let views = Arc::new(InMemoryViewStore::new());
    let pipeline = with_view(&views).build();
    projected(
        &pipeline,
        room_command("t1", "r-1", RoomCommand::Open(Nothing {})),
    )
    .await;
    projected(&pipeline, book("t1", "s-1", "r-1")).await;
    let before = row(&views, "t1", "r-1").await;
    for id in [
        Room::named_aggregate().aggregate_id("r-1", "t1"),
        Stay::named_aggregate().aggregate_id("s-1", "t1"),
    ] {
        let stream = pipeline.store().last(&id).await.unwrap().unwrap();
        pipeline.dispatcher.dispatch(&stream).await;
    }
    assert_eq!(row(&views, "t1", "r-1").await, before);
}

/// Counts, per tenant, every room opened and every stay booked, by sending `add` to the
/// tenant's counter.
#[derive(Debug)]
struct Tally;

#[async_trait]
impl MultiStreamSaga for Tally {
    type Events = OneOf2<Room, Stay>;

    fn name(&self) -> &str {
        "tally"
    }

    async fn on_event(
        &self,
        event: &OneOf2<Room, Stay>,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let by = match event {
            OneOf2::First(RoomEvent::Opened(_)) => 1,
            OneOf2::First(RoomEvent::Closed(_)) => return Ok(()),
            OneOf2::Second(StayEvent::Booked(_)) => 10,
        };
        if by == 10 && stream.aggregate_id.id == "s-poison" {
            return Err(ConsumerError::new(ErrorCode::IllegalState, "poison stay"));
        }
        let counter = Counter::named_aggregate()
            .aggregate_id("tally", stream.aggregate_id.tenant_id.as_str());
        ctx.send_to::<Counter>(counter, CounterCommand::Add(Add { by }))
            .await?;
        Ok(())
    }
}

async fn counter_value(store: &dyn EventStore, tenant: &str) -> u64 {
    let history = store
        .load(
            &Counter::named_aggregate().aggregate_id("tally", tenant),
            1,
            u64::MAX,
        )
        .await
        .unwrap();
    history
        .iter()
        .flat_map(|stream| &stream.body)
        .filter_map(|event| event.body.get("by").and_then(serde_json::Value::as_u64))
        .sum()
}

#[tokio::test]
async fn a_saga_over_two_types_sends_once_per_event_of_either_and_records_its_failures() {
    let failures = Arc::new(InMemoryCompensationStore::new());
    let pipeline = LocalPipeline::builder(registry(), Arc::new(InMemoryEventStore::new()))
        .saga(Arc::new(MultiStream(Tally)))
        .compensation(failures.clone(), RetrySpec::default())
        .build();
    let start = CommandMessage::of(
        Counter::named_aggregate().aggregate_id("tally", "t1"),
        CounterCommand::Start,
    )
    .into_json()
    .unwrap();
    pipeline
        .gateway
        .send_and_wait(start, WaitPlan::processed())
        .await
        .unwrap();
    let handled = |command| {
        let gateway = pipeline.gateway.clone();
        async move {
            gateway
                .send_and_wait(command, WaitPlan::new(CommandStage::SagaHandled))
                .await
        }
    };
    handled(room_command("t1", "r-1", RoomCommand::Open(Nothing {})))
        .await
        .unwrap();
    handled(book("t1", "s-1", "r-1")).await.unwrap();
    assert_eq!(counter_value(pipeline.store().as_ref(), "t1").await, 11);
    // Each input's event redelivered: its command's request id is derived from the event,
    // so the counter's append refuses it as a duplicate (SPEC DS-3).
    for id in [
        Room::named_aggregate().aggregate_id("r-1", "t1"),
        Stay::named_aggregate().aggregate_id("s-1", "t1"),
    ] {
        let stream = pipeline.store().last(&id).await.unwrap().unwrap();
        pipeline.dispatcher.dispatch(&stream).await;
    }
    assert_eq!(counter_value(pipeline.store().as_ref(), "t1").await, 11);
    // A failing step of either input fails the stage, and is recorded (SPEC DS-4).
    let failed = handled(book("t1", "s-poison", "r-1")).await;
    match failed {
        Err(CommandResultError::Failed(result)) => {
            assert_eq!(result.stage, CommandStage::SagaHandled);
            assert_eq!(result.error_code, ErrorCode::IllegalState);
        }
        other => panic!("the poison stay fails its saga step: {other:?}"),
    }
    let records = failures.list(&FailureQuery::default()).await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].consumer, "tally");
    assert_eq!(records[0].aggregate_id.id, "s-poison");
}
