//! The HTTP history route shows events in today's shape, through the aggregate's upcasters,
//! and says what each upcast event was stored as.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tower::ServiceExt;
use wow_core::aggregate::{Aggregate, AggregateRegistry, CommandContext};
use wow_core::event::{EventShape, Upcasters};
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::{AggregateId, Command, DomainEvent, DomainEventStream, Event};
use wow_http::{router, HttpConfig, HttpState};
use wow_runtime::pipeline::LocalPipeline;

#[derive(Debug)]
struct Meter;

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct MeterState {
    total: u64,
}

#[derive(Debug, Clone, Command)]
enum MeterCommand {
    #[command(create)]
    Install,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Read {
    kwh: u64,
}

#[derive(Debug, Clone, PartialEq, Event)]
enum MeterEvent {
    #[event(name = "installed")]
    Installed,
    #[event(name = "read", revision = "2")]
    Read(Read),
}

impl Aggregate for Meter {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "meter";
    type State = MeterState;
    type Command = MeterCommand;
    type Event = MeterEvent;
    type Error = std::convert::Infallible;

    fn handle(
        _: &MeterState,
        _: MeterCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<MeterEvent>, std::convert::Infallible> {
        Ok(vec![MeterEvent::Installed])
    }

    fn apply(state: &mut MeterState, event: &MeterEvent) {
        if let MeterEvent::Read(read) = event {
            state.total += read.kwh;
        }
    }

    fn upcasters() -> Upcasters {
        // Revision 1 counted watt-hours, under the name `reading`.
        Upcasters::new()
            .rename_event("reading", "read")
            .upcast("read", "1", |body| {
                let wh = body["wh"].as_u64().unwrap_or_default();
                Ok(vec![EventShape::new(
                    "read",
                    "2",
                    json!({"kwh": wh / 1000}),
                )])
            })
    }
}

fn stream(
    id: &AggregateId,
    version: u64,
    name: &str,
    revision: &str,
    body: Value,
) -> DomainEventStream {
    DomainEventStream {
        id: format!("s{version}"),
        request_id: format!("r{version}"),
        command_id: format!("c{version}"),
        aggregate_id: id.clone(),
        version,
        create_time: 1,
        fingerprint: String::new(),
        header: BTreeMap::new(),
        body: vec![DomainEvent {
            id: format!("e{version}"),
            name: name.to_owned(),
            revision: revision.to_owned(),
            body,
        }],
    }
}

#[tokio::test]
async fn history_is_shown_in_todays_shape_with_what_each_event_was_stored_as() {
    let events: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let id = AggregateId::new("demo", "meter", "m-1", wow_core::DEFAULT_TENANT_ID);
    events
        .append(&stream(&id, 1, "installed", "0.0.1", json!(null)))
        .await
        .unwrap();
    events
        .append(&stream(&id, 2, "reading", "1", json!({"wh": 4000})))
        .await
        .unwrap();
    events
        .append(&stream(&id, 3, "read", "2", json!({"kwh": 1})))
        .await
        .unwrap();
    let mut registry = AggregateRegistry::new();
    registry.register::<Meter>().unwrap();
    let pipeline = LocalPipeline::builder(registry, events.clone()).build();
    let app = router(HttpState::new(&pipeline, None, HttpConfig::default()));

    let request = Request::builder()
        .uri("/meter/m-1/event/1/3")
        .header("content-type", "application/json")
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let history: Value = serde_json::from_slice(&bytes).unwrap();
    let upcast = &history[1]["body"][0];
    assert_eq!(upcast["name"], "read");
    assert_eq!(upcast["revision"], "2");
    assert_eq!(upcast["body"], json!({"kwh": 4}));
    assert_eq!(upcast["storedName"], "reading");
    assert_eq!(upcast["storedRevision"], "1");
    assert_eq!(upcast["id"], "e2");
    let current = &history[2]["body"][0];
    assert_eq!(current["body"], json!({"kwh": 1}));
    assert!(current.get("storedRevision").is_none(), "{current}");

    // The state folds the upcast history: 4 + 1.
    let request = Request::builder()
        .uri("/meter/m-1/state")
        .header("content-type", "application/json")
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let state: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(state["total"], 5, "{state}");
    // Nothing was written back.
    assert_eq!(
        events.load(&id, 2, 2).await.unwrap()[0].body[0].name,
        "reading"
    );
}
