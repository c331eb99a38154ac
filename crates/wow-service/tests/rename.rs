//! An aggregate renamed in code (`counter` → `tally`, declared once in `ALIASES`) keeps its
//! history, request ids, snapshot, consumer positions and view across a restart on a durable
//! store, and the former name's routes still reach it. On SQLite and PostgreSQL, with two
//! processes' worth of services starting on one store at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tower::ServiceExt;
use wow_core::testing_example::{Counter, CounterEvent, Tally};
use wow_core::view::View;
use wow_core::AggregateId;
use wow_runtime::eventsourcing::SnapshotStrategy;
use wow_service::{RunningService, Service, ServiceError};

/// Today's name of the counter.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Total {
    /// The sum of the additions, and how many streams it saw.
    sum: u64,
    streams: u64,
}

fn total(state: &mut Total, event: &CounterEvent) {
    state.streams += 1;
    if let CounterEvent::Added(added) = event {
        state.sum += added.by;
    }
}

/// The view as the previous release had it, over `counter`.
#[derive(Debug)]
struct CounterTotal;

impl View for CounterTotal {
    type Aggregate = Counter;
    type State = Total;
    const NAME: &'static str = "counter_total";

    fn apply(state: &mut Total, event: &CounterEvent) {
        total(state, event);
    }
}

/// The same view today, over `tally`.
#[derive(Debug)]
struct TallyTotal;

impl View for TallyTotal {
    type Aggregate = Tally;
    type State = Total;
    const NAME: &'static str = "counter_total";

    fn apply(state: &mut Total, event: &CounterEvent) {
        total(state, event);
    }
}

async fn call(
    app: &Router,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, Value) {
    let (status, body, _) = call_tagged(app, method, path, headers, body).await;
    (status, body)
}

/// As [`call`], with the answer's `ETag` (a state's version).
async fn call_tagged(
    app: &Router,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, Value, Option<String>) {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::from(body.to_owned())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let tag = response
        .headers()
        .get("etag")
        .map(|tag| tag.to_str().unwrap().to_owned());
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        tag,
    )
}

async fn send(
    app: &Router,
    path: &str,
    request_id: &str,
    tenant: &str,
    body: Value,
) -> (StatusCode, Value) {
    let headers = [
        ("Command-Wait-Stage", "PROJECTED"),
        ("Command-Request-Id", request_id),
        ("Command-Tenant-Id", tenant),
    ];
    call(app, "POST", path, &headers, &body.to_string()).await
}

/// The previous release: `counter` with its view, snapshots after every stream.
async fn previous_release(store: &str) -> RunningService {
    Service::builder()
        .aggregate::<Counter>()
        .view::<CounterTotal>()
        .snapshots(SnapshotStrategy::Every(1))
        .store(store)
        .build()
        .await
        .unwrap()
}

/// Today's release: the same aggregate named `tally`.
async fn todays_release(store: &str) -> Result<RunningService, ServiceError> {
    Service::builder()
        .aggregate::<Tally>()
        .view::<TallyTotal>()
        .snapshots(SnapshotStrategy::Every(1))
        .store(store)
        .build()
        .await
}

async fn renamed_aggregate_keeps_everything(store: &str) {
    let before = previous_release(store).await;
    the_previous_release_decides_in_two_tenants(&before.router()).await;
    before.stop().await;

    // Two processes of today's release start on the store at once: one renames, and
    // neither fails.
    let (one, two) = tokio::join!(todays_release(store), todays_release(store));
    let (one, two) = (one.unwrap(), two.unwrap());
    two.stop().await;
    let app = one.router();
    for tenant in ["tenant-a", "tenant-b"] {
        the_renamed_aggregate_keeps_its_state_and_decisions(&app, tenant).await;
        old_and_new_routes_go_on_and_the_view_counts_once(&app, tenant).await;
    }
    nothing_is_left_under_the_former_name(&one).await;
    one.stop().await;

    // A later start finds the rename done.
    let again = todays_release(store).await.unwrap();
    let (status, body, tag) = call_tagged(
        &again.router(),
        "GET",
        "/tally/c1/state",
        &[("Command-Tenant-Id", "tenant-b")],
        "",
    )
    .await;
    assert_eq!(
        (status, tag.as_deref()),
        (StatusCode::OK, Some("\"4\"")),
        "{body}"
    );
    again.stop().await;
}

/// The previous release starts and adds to `counter` c1 in two tenants, and rejects a second
/// start.
async fn the_previous_release_decides_in_two_tenants(app: &Router) {
    for tenant in ["tenant-a", "tenant-b"] {
        let (status, body) = send(app, "/counter/c1/start", "r-start", tenant, json!({})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = send(app, "/counter/c1/add", "r-add", tenant, json!({"by": 5})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        // A rejection is a decision of its request id too (SPEC ID-6).
        let (status, body) = send(app, "/counter/c1/start", "r-again", tenant, json!({})).await;
        assert!(status.is_client_error(), "{status} {body}");
    }
}

/// Under today's name, `tenant`'s c1 has its state, and a resend of a request decided under
/// the former name is still that decision (an append or a rejection).
async fn the_renamed_aggregate_keeps_its_state_and_decisions(app: &Router, tenant: &str) {
    let tenant_header = [("Command-Tenant-Id", tenant)];
    let (status, body, tag) = call_tagged(app, "GET", "/tally/c1/state", &tenant_header, "").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (tag.as_deref(), body["value"].as_u64()),
        (Some("\"2\""), Some(5)),
        "{body}"
    );
    // A resend of a request decided under the former name is still that decision.
    let (status, body) = send(app, "/tally/c1/add", "r-add", tenant, json!({"by": 5})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["errorCode"], "DuplicateRequestId", "{body}");
    let (status, body) = send(app, "/tally/c1/start", "r-again", tenant, json!({})).await;
    assert!(status.is_client_error(), "{status} {body}");
    assert_ne!(body["errorCode"], "Ok", "{body}");
}

/// An old client's route reaches today's aggregate, under today's name, as does today's; the
/// view went on from its rows: every stream counted once, none twice.
async fn old_and_new_routes_go_on_and_the_view_counts_once(app: &Router, tenant: &str) {
    let (status, body) = send(
        app,
        "/counter/c1/add",
        "r-old-route",
        tenant,
        json!({"by": 2}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["aggregateVersion"], 3, "{body}");
    assert_eq!(body["aggregateName"], "tally", "{body}");
    let (status, body) = send(app, "/tally/c1/add", "r-new", tenant, json!({"by": 3})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["aggregateVersion"], 4, "{body}");
    // The view went on from its rows: every stream counted once, none twice.
    let (status, body) = call(
        app,
        "GET",
        "/tally/c1/view/counter_total",
        &[("Command-Tenant-Id", tenant)],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], json!({"sum": 10, "streams": 4}), "{body}");
}

/// The history is under today's name, whole; nothing is left under the former name.
async fn nothing_is_left_under_the_former_name(service: &RunningService) {
    let store_events = service.stores().events.clone();
    let history = store_events
        .load(
            &AggregateId::new("demo", "tally", "c1", "tenant-a"),
            1,
            u64::MAX,
        )
        .await
        .unwrap();
    assert_eq!(history.len(), 4);
    let old = store_events
        .load(
            &AggregateId::new("demo", "counter", "c1", "tenant-a"),
            1,
            u64::MAX,
        )
        .await
        .unwrap();
    assert!(old.is_empty(), "nothing is left under the former name");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_aggregate_keeps_everything_on_sqlite() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("renamed.db").display());
    renamed_aggregate_keeps_everything(&store).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_aggregate_keeps_everything_on_postgres() {
    let base = std::env::var("WOW_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    if let Err(error) = std::net::TcpStream::connect("127.0.0.1:5432") {
        wow_tck::skip::unavailable(
            wow_tck::skip::Requirement::Backends,
            &format!("no PostgreSQL at 127.0.0.1:5432 ({error})"),
        );
        return;
    }
    let unique = wow_core::id::new_id().replace('-', "");
    let schema = format!("rename_{}", &unique[unique.len() - 12..]);
    renamed_aggregate_keeps_everything(&format!("{base}?schema={schema}")).await;
    let _ = std::process::Command::new("psql")
        .args([
            &base,
            "-qc",
            &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
        ])
        .output();
}
