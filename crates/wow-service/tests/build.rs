//! A service gathered by the builder and started without a socket: views projected and
//! served, routes merged, catch-up on start, the store chosen by the settings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tower::ServiceExt;
use wow_core::testing_example::{Counter, CounterEvent};
use wow_core::view::View;
use wow_core::Stores;
use wow_service::{RunningService, Service, ServiceError, Settings, StoreError};

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Total {
    /// The sum of the additions.
    sum: u64,
}

#[derive(Debug)]
struct CounterTotal;

impl View for CounterTotal {
    type Aggregate = Counter;
    type State = Total;
    const NAME: &'static str = "counter_total";

    fn apply(state: &mut Total, event: &CounterEvent) {
        if let CounterEvent::Added(added) = event {
            state.sum += added.by;
        }
    }
}

async fn call(
    app: &Router,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, Value) {
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
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Starts counter `id` and adds `by`, waiting until the projections ran.
async fn count(service: &RunningService, id: &str, by: u64) {
    let app = service.router();
    let projected = [("Command-Wait-Stage", "PROJECTED")];
    let (status, body) = call(
        &app,
        "POST",
        &format!("/counter/{id}/start"),
        &projected,
        "{}",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let add = json!({ "by": by }).to_string();
    let (status, body) = call(
        &app,
        "POST",
        &format!("/counter/{id}/add"),
        &projected,
        &add,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// The counter and its `counter_total` view, built on `stores`.
async fn counter_with_total(stores: Stores) -> RunningService {
    Service::builder()
        .aggregate::<Counter>()
        .view::<CounterTotal>()
        .stores(stores)
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_view_is_projected_and_served_in_the_callers_tenant() {
    let service = counter_with_total(Stores::in_memory()).await;
    count(&service, "c1", 2).await;
    let app = service.router();

    let (status, body) = call(&app, "GET", "/counter/c1/view/counter_total", &[], "").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"aggregateId": "c1", "version": 2, "state": {"sum": 2}})
    );

    let other = [("Command-Tenant-Id", "other")];
    let (status, body) = call(&app, "GET", "/counter/c1/view/counter_total", &other, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["errorCode"], "NotFound");
    let (status, body) = call(&app, "GET", "/counter/c%20/view/counter_total", &[], "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // An id that is not UTF-8 once decoded: the API's JSON 400, not axum's text/plain one.
    let (status, body) = call(&app, "GET", "/counter/c%FF/view/counter_total", &[], "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["errorCode"], "IllegalArgument", "{body}");
    // The built-in routes beside it still answer.
    let (status, body) = call(&app, "GET", "/counter/c1/state", &[], "").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = call(&app, "POST", "/counter/c1/view/counter_total", &[], "{}").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    service.stop().await;
}

/// SPEC DS-6: a reader that names a command's request id (or the version it answered) gets
/// a row that includes it, whatever the view had folded in when the read came; a row that
/// cannot get there within the wait is `408 ViewNotFresh` with how far behind it is.
#[tokio::test]
async fn a_fresh_read_includes_the_append_it_names_or_says_how_far_behind_the_view_is() {
    let service = counter_with_total(Stores::in_memory()).await;
    count(&service, "c1", 1).await;
    let app = service.router();
    let path = "/counter/c1/view/counter_total";
    for round in 1..=20u64 {
        let request_id = format!("add-{round}");
        let sent = [
            ("Command-Wait-Stage", "SENT"),
            ("Command-Request-Id", request_id.as_str()),
        ];
        let (status, body) = call(&app, "POST", "/counter/c1/add", &sent, r#"{"by":1}"#).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let fresh = [("Wow-Fresh-Request", request_id.as_str())];
        let (status, row) = call(&app, "GET", path, &fresh, "").await;
        assert_eq!(status, StatusCode::OK, "{row}");
        assert!(
            row["version"].as_u64().unwrap() >= round + 2,
            "round {round}: {row}"
        );
        let (status, row) = call(&app, "GET", path, &[("Wow-Fresh-Version", "3")], "").await;
        assert_eq!(status, StatusCode::OK, "{row}");
    }

    let ahead = [("Wow-Fresh-Version", "99"), ("Wow-Fresh-Wait", "30")];
    let (status, body) = call(&app, "GET", path, &ahead, "").await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{body}");
    assert_eq!(body["errorCode"], "ViewNotFresh");
    assert_eq!(
        (body["version"].as_u64(), body["wanted"].as_u64()),
        (Some(22), Some(99))
    );
    assert_eq!(body["lag"], 77);
    let unknown = [("Wow-Fresh-Request", "never-sent"), ("Wow-Fresh-Wait", "0")];
    let (status, body) = call(&app, "GET", path, &unknown, "").await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{body}");
    assert!(body["wanted"].is_null(), "not appended yet: {body}");
    let both = [("Wow-Fresh-Version", "3"), ("Wow-Fresh-Request", "add-1")];
    let (status, row) = call(&app, "GET", path, &both, "").await;
    assert_eq!(status, StatusCode::OK, "both conditions hold: {row}");
    for bad in [
        [("Wow-Fresh-Version", "soon"), ("Wow-Fresh-Wait", "1")],
        [("Wow-Fresh-Version", "3"), ("Wow-Fresh-Wait", "-1")],
        [("Wow-Fresh-Request", ""), ("Wow-Fresh-Wait", "1")],
        [("Wow-Fresh-Version", "3"), ("Wow-Fresh-Wait", "5001")],
    ] {
        let (status, body) = call(&app, "GET", path, &bad, "").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}: {body}");
    }
    service.stop().await;
}

#[tokio::test]
async fn openapi_lists_the_view_route_with_the_state_schema() {
    let service = counter_with_total(Stores::in_memory()).await;
    let (status, document) = call(&service.router(), "GET", "/openapi.json", &[], "").await;
    assert_eq!(status, StatusCode::OK);
    let operation = &document["paths"]["/counter/{id}/view/counter_total"]["get"];
    let row = &operation["responses"]["200"]["content"]["application/json"]["schema"];
    assert_eq!(
        row["properties"]["state"]["properties"]["sum"]["type"],
        "integer"
    );
    let declared: Vec<&str> = operation["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(declared.contains(&"id"), "{declared:?}");
}

#[tokio::test]
async fn a_restart_catches_a_new_view_up_with_the_whole_history() {
    let stores = Stores::in_memory();
    let first = Service::builder()
        .aggregate::<Counter>()
        .stores(stores.clone())
        .build()
        .await
        .unwrap();
    count(&first, "c1", 5).await;
    first.stop().await;

    let second = counter_with_total(stores).await;
    let caught_up: Vec<&str> = second.caught_up().iter().map(|(c, _)| c.as_str()).collect();
    assert!(caught_up.contains(&"counter_total"), "{caught_up:?}");
    let (status, body) = call(
        &second.router(),
        "GET",
        "/counter/c1/view/counter_total",
        &[],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"]["sum"], 5);
}

#[tokio::test]
async fn own_routes_are_merged_with_their_openapi_paths() {
    let paths =
        json!({"/counter/{id}/hello": {"get": {"responses": {"200": {"description": "hi"}}}}});
    let service = Service::builder()
        .aggregate::<Counter>()
        .routes(
            |cx| {
                let registered = cx.gateway.registry().iter().count();
                Router::new().route(
                    "/counter/{id}/hello",
                    get(move || async move { format!("{registered} aggregate") }),
                )
            },
            paths.as_object().unwrap().clone(),
        )
        .stores(Stores::in_memory())
        .build()
        .await
        .unwrap();
    let app = service.router();
    let (status, _) = call(&app, "GET", "/counter/c1/hello", &[], "").await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(&app, "GET", "/counter/%C3/hello", &[], "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["errorCode"], "IllegalArgument", "{body}");
    let (status, body) = call(&app, "DELETE", "/counter/c1/hello", &[], "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(body["errorCode"], "MethodNotAllowed");
    let (_, document) = call(&app, "GET", "/openapi.json", &[], "").await;
    assert!(document["paths"]["/counter/{id}/hello"]["get"].is_object());
}

#[tokio::test]
async fn two_aggregates_of_one_name_fail_the_start() {
    let error = Service::builder()
        .aggregate::<Counter>()
        .aggregate::<Counter>()
        .stores(Stores::in_memory())
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(error, ServiceError::DuplicateAggregate(_)),
        "{error}"
    );
}

#[tokio::test]
async fn the_settings_store_wins_over_the_services_own() {
    let settings = Settings {
        store: Some("memory://".to_owned()),
        ..Settings::default()
    };
    Service::builder()
        .aggregate::<Counter>()
        .store("nosuch://store")
        .settings(settings)
        .build()
        .await
        .unwrap();
    let error = Service::builder()
        .aggregate::<Counter>()
        .store("nosuch://store")
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(error, ServiceError::Store(StoreError::Unsupported(_))),
        "{error}"
    );
}

#[tokio::test]
async fn serve_on_answers_until_told_to_stop() {
    let service = Service::builder()
        .aggregate::<Counter>()
        .stores(Stores::in_memory())
        .build()
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(service.serve_on(listener, async move {
        let _ = stopped.await;
    }));
    let health = reqwest::get(format!("http://{address}/health"))
        .await
        .unwrap();
    assert_eq!(health.status(), reqwest::StatusCode::OK);
    stop.send(()).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), served)
        .await
        .expect("stops within its grace")
        .unwrap()
        .unwrap();
    assert!(reqwest::get(format!("http://{address}/health"))
        .await
        .is_err());
}

#[tokio::test]
async fn an_address_that_cannot_be_bound_is_a_listen_error() {
    let settings = Settings {
        listen: "not-an-address".to_owned(),
        ..Settings::default()
    };
    let error = Service::builder()
        .aggregate::<Counter>()
        .stores(Stores::in_memory())
        .settings(settings)
        .serve()
        .await
        .unwrap_err();
    assert!(matches!(error, ServiceError::Listen { .. }), "{error}");
    assert!(error.to_string().contains("not-an-address"), "{error}");
}

#[test]
fn the_builder_moves_between_threads_and_the_running_service_is_shared() {
    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync>() {}
    send::<wow_service::ServiceBuilder>();
    send_sync::<RunningService>();
    send_sync::<wow_service::Settings>();
}
