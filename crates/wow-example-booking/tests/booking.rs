//! The booking service end to end over HTTP, on SQLite and on PostgreSQL: holds refused for
//! a room or customer that does not exist or a closed room (SPEC DM-5), a night held once
//! (DM-1), points awarded by the saga over bookings and customers and the room's schedule
//! over rooms and bookings (DM-4), listed by an indexed field, and the schedule rebuilt from
//! history after a restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use wow_core::Stores;
use wow_service::RunningService;

/// A booking service served on a free port until stopped.
struct Served {
    base: String,
    stores: Stores,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    async fn start(store: &str) -> Self {
        let running: RunningService = wow_example_booking::service::service()
            .store(store)
            .build()
            .await
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let stores = running.stores().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = running
                .serve_on(listener, async {
                    let _ = stopped.await;
                })
                .await;
        });
        Self {
            base,
            stores,
            stop: Some(stop),
            task,
        }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(30), &mut self.task)
            .await
            .expect("the service stops")
            .unwrap();
    }

    async fn send(&self, path: &str, stage: &str, body: Value) -> (StatusCode, Value) {
        let response = Client::new()
            .post(format!("{}/{path}", self.base))
            .header("Command-Wait-Stage", stage)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn ok(&self, path: &str, stage: &str, body: Value) -> Value {
        let (status, answer) = self.send(path, stage, body).await;
        assert_eq!(status, StatusCode::OK, "{path}: {answer}");
        answer
    }

    async fn refused(&self, path: &str, body: Value) -> (StatusCode, String) {
        let (status, answer) = self.send(path, "PROCESSED", body).await;
        (
            status,
            answer["errorCode"].as_str().unwrap_or("").to_owned(),
        )
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = Client::new()
            .get(format!("{}/{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

fn hold(room: &str, customer: &str, night: &str) -> Value {
    json!({"room": room, "customer": customer, "night": night})
}

async fn rows_where(served: &Served, query: &str) -> Vec<String> {
    let (status, page) = served.get(&format!("views/room_schedule?{query}")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The whole story on `store`, then a restart whose start rebuilds the emptied schedule.
async fn a_booking_across_aggregates(store: &str) {
    let served = Served::start(store).await;
    a_hold_needs_a_room_and_a_registered_customer(&served).await;
    a_night_is_held_once_and_scheduled(&served).await;
    a_closed_room_is_refused_and_listed_by_its_indexed_field(&served).await;
    let before = a_confirmation_awards_points_and_confirms_the_schedule(&served).await;
    let stores = served.stores.clone();
    served.stop().await;

    // A rebuild: the rows and records emptied, the positions reset; the next start folds
    // the whole history of rooms and bookings again.
    stores.views.clear("room_schedule").await.unwrap();
    stores.positions.reset("room_schedule").await.unwrap();
    let served = Served::start(store).await;
    let (_, after) = served.get("views/room_schedule/r-1").await;
    assert_eq!(
        after, before,
        "the schedule rebuilt from history is the one it was"
    );
    assert_eq!(rows_where(&served, "open=false").await, ["r-2"]);
    let (_, customer) = served.get("customer/c-1/state").await;
    assert_eq!(customer["points"], 170, "the saga awarded nothing twice");
    served.stop().await;
}

/// A hold of a room that does not exist, then of a customer that does not, is refused; the
/// customer registered gets the welcome bonus.
async fn a_hold_needs_a_room_and_a_registered_customer(served: &Served) {
    let (status, code) = served
        .refused("booking/b-0/hold", hold("r-1", "c-1", "2026-12-24"))
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "NoSuchRoom")
    );
    served
        .ok(
            "room/r-1/open",
            "PROCESSED",
            json!({"name": "Sea view", "rate": 12000}),
        )
        .await;
    let (_, code) = served
        .refused("booking/b-0/hold", hold("r-1", "c-1", "2026-12-24"))
        .await;
    assert_eq!(code, "NoSuchCustomer");
    served
        .ok(
            "customer/c-1/register",
            "SAGA_HANDLED",
            json!({"name": "Ann"}),
        )
        .await;
    let (_, customer) = served.get("customer/c-1/state").await;
    assert_eq!(customer["points"], 50, "the welcome bonus: {customer}");
}

/// A hold shows in the room's schedule; a second hold of the same night is a duplicate key.
async fn a_night_is_held_once_and_scheduled(served: &Served) {
    served
        .ok(
            "booking/b-1/hold",
            "PROJECTED",
            hold("r-1", "c-1", "2026-12-24"),
        )
        .await;
    let (status, row) = served.get("views/room_schedule/r-1").await;
    assert_eq!(status, StatusCode::OK, "{row}");
    assert_eq!(row["state"]["name"], "Sea view");
    assert_eq!(
        row["state"]["bookings"],
        json!([{"booking": "b-1", "night": "2026-12-24", "customer_name": "Ann", "status": "Held"}])
    );
    let (status, code) = served
        .refused("booking/b-2/hold", hold("r-1", "c-1", "2026-12-24"))
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "DuplicateKey")
    );
}

/// A closed room refuses holds; the schedule lists rooms by its indexed field, pages them, and
/// refuses a filter on another field or a bad value.
async fn a_closed_room_is_refused_and_listed_by_its_indexed_field(served: &Served) {
    served
        .ok(
            "room/r-2/open",
            "PROCESSED",
            json!({"name": "Garden", "rate": 9000}),
        )
        .await;
    served.ok("room/r-2/close", "PROJECTED", json!({})).await;
    let (_, code) = served
        .refused("booking/b-3/hold", hold("r-2", "c-1", "2026-12-24"))
        .await;
    assert_eq!(code, "RoomClosed");
    assert_eq!(rows_where(served, "open=true").await, ["r-1"]);
    assert_eq!(rows_where(served, "open=false").await, ["r-2"]);
    assert_eq!(rows_where(served, "limit=1").await, ["r-1"]);
    assert_eq!(rows_where(served, "after=r-1").await, ["r-2"]);
    let (status, _) = served.get("views/room_schedule?name=Garden").await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "lists filter on indexed fields only"
    );
    let (status, _) = served.get("views/room_schedule?open=maybe").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = served.get("views/room_schedule/no-such-room").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A confirmation: the saga awards a point per euro, the schedule says Confirmed. The room's
/// schedule row.
async fn a_confirmation_awards_points_and_confirms_the_schedule(served: &Served) -> Value {
    served
        .ok("booking/b-1/confirm", "SAGA_HANDLED", json!({}))
        .await;
    let (_, customer) = served.get("customer/c-1/state").await;
    assert_eq!(customer["points"], 170, "50 + a point per euro: {customer}");
    let (_, before) = served.get("views/room_schedule/r-1").await;
    assert_eq!(before["state"]["bookings"][0]["status"], "Confirmed");
    before
}

#[tokio::test]
async fn a_booking_across_aggregates_on_sqlite() {
    let path = std::env::temp_dir().join(format!("booking-{}.db", wow_core::id::new_id()));
    a_booking_across_aggregates(&format!("sqlite://{}", path.display())).await;
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn a_booking_across_aggregates_on_postgres() {
    let Some(base) = postgres() else {
        return;
    };
    let unique = wow_core::id::new_id().replace('-', "");
    let schema = format!("booking_{}", &unique[unique.len() - 12..]);
    a_booking_across_aggregates(&format!("{base}?schema={schema}")).await;
    // The test's own schema goes (a failure to drop it is only litter).
    let _ = std::process::Command::new("psql")
        .args([
            base.as_str(),
            "-q",
            "-c",
            &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
        ])
        .output();
}

/// The PostgreSQL test server's URL, or `None` (said loudly) when it cannot be reached and
/// is not required.
fn postgres() -> Option<String> {
    let base = std::env::var("WOW_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    if let Err(error) = std::net::TcpStream::connect("127.0.0.1:5432") {
        wow_tck::skip::unavailable(
            wow_tck::skip::Requirement::Backends,
            &format!("no PostgreSQL at 127.0.0.1:5432 ({error})"),
        );
        return None;
    }
    Some(base)
}
