//! Fresh reads of several rows (SPEC DS-6): a view over several aggregate types (its row and
//! its list) and Wow's queries over the materialized snapshots take the freshness headers,
//! naming the aggregate whose append the answer must include with `Wow-Fresh-Aggregate`; each
//! answers once that append is in, or `408 ViewNotFresh` with how far behind it is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower::ServiceExt;
use wow_core::testing_example::{Counter, CounterEvent};
use wow_core::view::{MultiStreamView, ViewInputs};
use wow_core::Stores;
use wow_service::{RunningService, Service, Settings};

/// Every counter's additions, in one row.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Totals {
    sum: u64,
}

#[derive(Debug)]
struct AllCounters;

impl MultiStreamView for AllCounters {
    type State = Totals;
    const NAME: &'static str = "all_counters";

    fn inputs(inputs: ViewInputs<Totals>) -> ViewInputs<Totals> {
        inputs.on::<Counter>(
            |_, _| Some("all".to_owned()),
            |row, event, _| {
                if let CounterEvent::Added(added) = event {
                    row.sum += added.by;
                }
            },
        )
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

async fn service() -> RunningService {
    let settings = Settings {
        snapshot_queries: true,
        ..Settings::default()
    };
    Service::builder()
        .aggregate::<Counter>()
        .multi_stream_view::<AllCounters>()
        .settings(settings)
        .stores(Stores::in_memory())
        .build()
        .await
        .unwrap()
}

/// Sends `path` waiting only for `SENT` (the views may not have it yet), with `request_id`.
async fn sent(app: &Router, path: &str, request_id: &str, body: &str) {
    let headers = [
        ("Command-Wait-Stage", "SENT"),
        ("Command-Request-Id", request_id),
    ];
    let (status, answer) = call(app, "POST", path, &headers, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

/// A view over several types: its row and its list wait for the append the reader names.
#[tokio::test]
async fn a_view_over_several_types_answers_once_it_has_the_append_named() {
    let service = service().await;
    let app = service.router();
    sent(&app, "/counter/c1/start", "start-c1", "{}").await;
    for round in 1..=20u64 {
        let request_id = format!("add-{round}");
        sent(&app, "/counter/c1/add", &request_id, r#"{"by":1}"#).await;
        let fresh = [
            ("Wow-Fresh-Request", request_id.as_str()),
            ("Wow-Fresh-Aggregate", "counter/c1"),
        ];
        let (status, row) = call(&app, "GET", "/views/all_counters/all", &fresh, "").await;
        assert_eq!(status, StatusCode::OK, "{row}");
        assert!(
            row["state"]["sum"].as_u64().unwrap() >= round,
            "round {round}: {row}"
        );
        let bare = [
            ("Wow-Fresh-Request", request_id.as_str()),
            ("Wow-Fresh-Aggregate", "c1"),
        ];
        let (status, list) = call(&app, "GET", "/views/all_counters", &bare, "").await;
        assert_eq!(status, StatusCode::OK, "{list}");
        assert!(
            list["rows"][0]["state"]["sum"].as_u64().unwrap() >= round,
            "{list}"
        );
    }
    let ahead = [
        ("Wow-Fresh-Version", "99"),
        ("Wow-Fresh-Aggregate", "counter/c1"),
        ("Wow-Fresh-Wait", "30"),
    ];
    let (status, body) = call(&app, "GET", "/views/all_counters", &ahead, "").await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{body}");
    assert_eq!(body["errorCode"], "ViewNotFresh");
    assert_eq!(
        (body["version"].as_u64(), body["wanted"].as_u64()),
        (Some(21), Some(99)),
        "{body}"
    );
    for aggregate in [None, Some("tally/c1"), Some("counter/")] {
        let mut headers = vec![("Wow-Fresh-Version", "1"), ("Wow-Fresh-Wait", "30")];
        headers.extend(aggregate.map(|a| ("Wow-Fresh-Aggregate", a)));
        let (status, body) = call(&app, "GET", "/views/all_counters/all", &headers, "").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{aggregate:?}: {body}");
    }
    service.stop().await;
}

/// Wow's queries over the materialized snapshots wait for the append the reader names of
/// the aggregate `Wow-Fresh-Aggregate` names.
#[tokio::test]
async fn a_snapshot_query_answers_once_it_has_the_append_named() {
    let service = service().await;
    let app = service.router();
    sent(&app, "/counter/c1/start", "start-c1", "{}").await;
    let all = r#"{"condition":{"operator":"ALL"},"limit":10}"#;
    for round in 1..=20u64 {
        let request_id = format!("add-{round}");
        sent(&app, "/counter/c1/add", &request_id, r#"{"by":1}"#).await;
        let fresh = [
            ("Wow-Fresh-Request", request_id.as_str()),
            ("Wow-Fresh-Aggregate", "c1"),
        ];
        let (status, list) = call(&app, "POST", "/counter/snapshot/list", &fresh, all).await;
        assert_eq!(status, StatusCode::OK, "{list}");
        assert!(
            list[0]["version"].as_u64().unwrap() > round,
            "round {round}: {list}"
        );
        let (status, count) = call(
            &app,
            "POST",
            "/counter/snapshot/count",
            &fresh,
            r#"{"operator":"ALL"}"#,
        )
        .await;
        assert_eq!((status, count), (StatusCode::OK, Value::from(1)));
    }
    let ahead = [
        ("Wow-Fresh-Version", "99"),
        ("Wow-Fresh-Aggregate", "counter/c1"),
        ("Wow-Fresh-Wait", "30"),
    ];
    let paged = r#"{"condition":{"operator":"ALL"},"pagination":{"index":1,"size":10}}"#;
    let (status, body) = call(&app, "POST", "/counter/snapshot/paged", &ahead, paged).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{body}");
    assert_eq!(
        (body["errorCode"].as_str(), body["wanted"].as_u64()),
        (Some("ViewNotFresh"), Some(99))
    );
    let unnamed = [("Wow-Fresh-Version", "1")];
    let (status, body) = call(&app, "POST", "/counter/snapshot/list", &unnamed, all).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    service.stop().await;
}
