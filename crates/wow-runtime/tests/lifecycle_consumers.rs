//! An aggregate's delete and recover are seen by its consumers (SPEC DM-6), in their place in
//! the aggregate's version order: a view drops its row's content on the delete and restores
//! it on the recover, another flags the row; a saga reacts to both (and deletes by a typed
//! call); an outbox owes rows for both. Through a running pipeline over the [`Booking`]
//! example, and again on a rebuild.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::json;
use wow_core::aggregate::{AggregateRegistry, LifecycleEvent, DELETE_AGGREGATE, RECOVER_AGGREGATE};
use wow_core::command::{CommandKind, JsonCommand};
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::outbox::{EventMeta, Outbox};
use wow_core::saga::{Saga, SagaContext};
use wow_core::testing_example::{Booking, BookingEvent};
use wow_core::view::{view, InMemoryViewStore, View, ViewStore};
use wow_core::{id, AggregateId, CommandMessage, CommandResult, CommandStage, DomainEventStream};
use wow_runtime::command::WaitPlan;
use wow_runtime::outbox::OutboxProcessor;
use wow_runtime::pipeline::LocalPipeline;
use wow_runtime::view::ViewProjection;

/// What a reader of the board sees of one booking.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct Shown {
    slot: String,
    expired: bool,
}

/// The board's row: what readers see, and what it set aside while the booking is deleted.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct BoardRow {
    shown: Option<Shown>,
    set_aside: Option<Shown>,
}

/// Drops a booking from what readers see when it is deleted, and shows it again as it was
/// when it is recovered.
#[derive(Debug)]
struct SlotBoard;

impl View for SlotBoard {
    type Aggregate = Booking;
    type State = BoardRow;
    const NAME: &'static str = "slot_board";

    fn apply(row: &mut BoardRow, event: &BookingEvent) {
        match event {
            BookingEvent::Held(held) => {
                row.shown = Some(Shown {
                    slot: held.slot.clone(),
                    expired: false,
                })
            }
            BookingEvent::Expired(_) => {
                if let Some(shown) = &mut row.shown {
                    shown.expired = true;
                }
            }
            BookingEvent::Confirmed(_) => {}
        }
    }

    fn on_lifecycle(row: &mut BoardRow, event: LifecycleEvent) {
        match event {
            LifecycleEvent::AggregateDeleted => row.set_aside = row.shown.take(),
            LifecycleEvent::AggregateRecovered => row.shown = row.set_aside.take(),
        }
    }
}

/// Flags a deleted booking's row.
#[derive(Debug)]
struct Flagged;

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct FlaggedRow {
    holds: u32,
    deleted: bool,
}

impl View for Flagged {
    type Aggregate = Booking;
    type State = FlaggedRow;
    const NAME: &'static str = "flagged_bookings";

    fn apply(row: &mut FlaggedRow, event: &BookingEvent) {
        if let BookingEvent::Held(_) = event {
            row.holds += 1;
        }
    }

    fn on_lifecycle(row: &mut FlaggedRow, event: LifecycleEvent) {
        row.deleted = event.deletes();
    }
}

/// Deletes every booking that expired, and notes each delete and recover it sees with the
/// event id its commands' request ids derive from.
#[derive(Debug, Default)]
struct Tidy {
    seen: Mutex<Vec<(String, LifecycleEvent, String)>>,
}

#[async_trait]
impl Saga for Tidy {
    type Aggregate = Booking;

    fn name(&self) -> &str {
        "tidy"
    }

    async fn on_event(
        &self,
        event: &BookingEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        if let BookingEvent::Expired(_) = event {
            ctx.delete::<Booking>(stream.aggregate_id.clone()).await?;
        }
        Ok(())
    }

    async fn on_lifecycle(
        &self,
        event: LifecycleEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        self.seen.lock().unwrap().push((
            stream.aggregate_id.id.clone(),
            event,
            ctx.event_id().to_owned(),
        ));
        Ok(())
    }
}

/// A notice owed to the outside world for each delete and recover.
#[derive(Debug)]
struct Notices;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Notice {
    booking: String,
    what: String,
    version: u64,
}

impl Outbox for Notices {
    type Aggregate = Booking;
    type Row = Notice;
    const NAME: &'static str = "booking_notices";

    fn rows(_: &BookingEvent, _: &EventMeta<'_>) -> Vec<Notice> {
        Vec::new()
    }

    fn lifecycle_rows(event: LifecycleEvent, meta: &EventMeta<'_>) -> Vec<Notice> {
        vec![Notice {
            booking: meta.aggregate_id.to_owned(),
            what: event.event_name().to_owned(),
            version: meta.version,
        }]
    }
}

struct Service {
    pipeline: LocalPipeline,
    views: Arc<dyn ViewStore>,
    tidy: Arc<Tidy>,
    events: Arc<dyn EventStore>,
}

fn service() -> Service {
    let mut registry = AggregateRegistry::new();
    registry.register::<Booking>().unwrap();
    let views: Arc<dyn ViewStore> = Arc::new(InMemoryViewStore::new());
    let events: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let tidy = Arc::new(Tidy::default());
    let pipeline = LocalPipeline::builder(registry, events.clone())
        .projection(Arc::new(ViewProjection::<SlotBoard>::new(views.clone())))
        .projection(Arc::new(ViewProjection::<Flagged>::new(views.clone())))
        .event_processor(Arc::new(OutboxProcessor::<Notices>::new(views.clone())))
        .saga(tidy.clone())
        .build();
    Service {
        pipeline,
        views,
        tidy,
        events,
    }
}

fn booking() -> AggregateId {
    AggregateId::new("demo", "booking", id::new_id(), "t1")
}

fn command(booking: &AggregateId, name: &str, body: serde_json::Value) -> JsonCommand {
    CommandMessage::new(booking.clone(), name, CommandKind::Normal, body)
}

/// Sends `command` and waits until every consumer handled its stream.
async fn handled(service: &Service, command: JsonCommand) -> CommandResult {
    let name = command.name.clone();
    let result = service
        .pipeline
        .gateway
        .send_and_wait(command, WaitPlan::new(CommandStage::SagaHandled))
        .await
        .unwrap_or_else(|error| panic!("{name}: {error:?}"));
    assert!(result.succeeded, "{name}: {result:?}");
    result
}

async fn hold(service: &Service, booking: &AggregateId, slot: &str) {
    let mut hold = command(booking, "hold", json!({"slot": slot, "minutes": 15}));
    hold.kind = CommandKind::Create;
    handled(service, hold).await;
}

async fn board(service: &Service, booking: &AggregateId) -> (BoardRow, u64) {
    view::<SlotBoard>(service.views.as_ref(), "t1", &booking.id)
        .await
        .unwrap()
        .expect("the board has a row")
}

async fn flagged(service: &Service, booking: &AggregateId) -> FlaggedRow {
    view::<Flagged>(service.views.as_ref(), "t1", &booking.id)
        .await
        .unwrap()
        .expect("the flagged view has a row")
        .0
}

#[tokio::test]
async fn a_view_drops_a_deleted_aggregates_row_and_restores_it_on_recover() {
    let service = service();
    let booking = booking();
    hold(&service, &booking, "s-1").await;
    let shown = Some(Shown {
        slot: "s-1".to_owned(),
        expired: false,
    });
    assert_eq!(board(&service, &booking).await.0.shown, shown);

    handled(&service, command(&booking, DELETE_AGGREGATE, json!({}))).await;
    let (row, version) = board(&service, &booking).await;
    assert_eq!(row.shown, None, "a deleted booking is not shown");
    assert_eq!(version, 2, "the delete is folded in its place");
    assert!(flagged(&service, &booking).await.deleted);

    handled(&service, command(&booking, RECOVER_AGGREGATE, json!({}))).await;
    let (row, version) = board(&service, &booking).await;
    assert_eq!(row.shown, shown, "the recovered booking is shown as it was");
    assert_eq!(version, 3);
    assert_eq!(
        flagged(&service, &booking).await,
        FlaggedRow {
            holds: 1,
            deleted: false
        }
    );
}

#[tokio::test]
async fn a_saga_and_an_outbox_see_the_delete_and_the_recover() {
    let service = service();
    let booking = booking();
    hold(&service, &booking, "s-2").await;
    // The booking expires; the saga deletes it by a typed call, then sees its own delete.
    handled(&service, command(&booking, "expire", json!({}))).await;
    let history = service.events.load(&booking, 1, u64::MAX).await.unwrap();
    assert_eq!(history.len(), 3, "held, expired, deleted by the saga");
    let deleted_by = &history[2];
    assert_eq!(
        LifecycleEvent::of_stream(deleted_by),
        Some(LifecycleEvent::AggregateDeleted)
    );
    assert!(
        deleted_by.request_id.starts_with(&history[1].body[0].id),
        "the saga's delete has a request id derived from the event that caused it: {}",
        deleted_by.request_id
    );
    handled(&service, command(&booking, RECOVER_AGGREGATE, json!({}))).await;

    let seen = service.tidy.seen.lock().unwrap().clone();
    let history = service.events.load(&booking, 1, u64::MAX).await.unwrap();
    assert_eq!(
        seen,
        vec![
            (
                booking.id.clone(),
                LifecycleEvent::AggregateDeleted,
                history[2].body[0].id.clone()
            ),
            (
                booking.id.clone(),
                LifecycleEvent::AggregateRecovered,
                history[3].body[0].id.clone()
            ),
        ],
        "the saga sees both, keyed by the built-in events"
    );

    let notices: Vec<Notice> = OutboxProcessor::<Notices>::new(service.views.clone())
        .rows()
        .await
        .unwrap()
        .into_iter()
        .map(|entry| entry.row)
        .collect();
    assert_eq!(
        notices,
        vec![
            Notice {
                booking: booking.id.clone(),
                what: "DefaultAggregateDeleted".to_owned(),
                version: 3
            },
            Notice {
                booking: booking.id.clone(),
                what: "DefaultAggregateRecovered".to_owned(),
                version: 4
            },
        ]
    );
}

#[tokio::test]
async fn a_rebuilt_view_folds_the_delete_and_the_recover_as_the_live_one_did() {
    let service = service();
    let booking = booking();
    hold(&service, &booking, "s-3").await;
    handled(&service, command(&booking, DELETE_AGGREGATE, json!({}))).await;
    let live_deleted = board(&service, &booking).await;
    handled(&service, command(&booking, RECOVER_AGGREGATE, json!({}))).await;
    let live = board(&service, &booking).await;

    let rebuilt_store: Arc<dyn ViewStore> = Arc::new(InMemoryViewStore::new());
    let rebuilt = ViewProjection::<SlotBoard>::new(rebuilt_store.clone());
    let history = service.events.load(&booking, 1, u64::MAX).await.unwrap();
    for (index, stream) in history.iter().enumerate() {
        rebuilt.handle(stream).await.unwrap();
        if index == 1 {
            let row = view::<SlotBoard>(rebuilt_store.as_ref(), "t1", &booking.id)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(row, live_deleted);
        }
    }
    let row = view::<SlotBoard>(rebuilt_store.as_ref(), "t1", &booking.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row, live);
}
