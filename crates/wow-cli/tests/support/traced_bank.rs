//! The bank served in this process for the SPEC OB-1 tests: a transfer sent over HTTP with a
//! `traceparent`, and the stored streams' headers read back.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use serde_json::Value;
use tower::ServiceExt;
use wow_core::Stores;
use wow_service::RunningService;

/// The trace and parent span the caller's request names.
pub(crate) const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub(crate) const PARENT_ID: &str = "00f067aa0ba902b7";

pub(crate) fn traceparent() -> String {
    format!("00-{TRACE_ID}-{PARENT_ID}-01")
}

pub(crate) async fn bank() -> RunningService {
    wow_example_bank::service::service()
        .stores(Stores::in_memory())
        .build()
        .await
        .unwrap()
}

pub(crate) async fn call(
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

/// Opens `a` with 100 and `b` with 5, then transfers 30 from `a` to `b` with the test's
/// `traceparent`, waiting until the saga handled it (both its commands processed).
pub(crate) async fn open_and_transfer(app: &Router) {
    open_and_transfer_traced(app, &traceparent()).await;
}

/// [`open_and_transfer`] with the transfer's request naming `traceparent`.
pub(crate) async fn open_and_transfer_traced(app: &Router, traceparent: &str) {
    for (id, balance) in [("a", 100), ("b", 5)] {
        let body = format!(r#"{{"name":"{id}","balance":{balance}}}"#);
        let (status, answer) = call(app, "POST", &format!("/account/{id}/open"), &[], &body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    let headers = [
        ("traceparent", traceparent),
        ("tracestate", "vendor=1"),
        ("Command-Request-Id", "transfer-1"),
        ("Command-Wait-Stage", "SAGA_HANDLED"),
    ];
    let (status, answer) = call(
        app,
        "POST",
        "/account/a/transfer",
        &headers,
        r#"{"to":"b","amount":30}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let sent = answer["result"]["commands"].as_array().unwrap();
    assert_eq!(sent.len(), 2, "{answer}");
}

/// The headers of `account`'s stored streams, in version order.
pub(crate) async fn stream_headers(app: &Router, account: &str) -> Vec<Value> {
    let (status, streams) = call(
        app,
        "GET",
        &format!("/account/{account}/event/1/10"),
        &[],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{streams}");
    streams
        .as_array()
        .unwrap()
        .iter()
        .map(|stream| stream["header"].clone())
        .collect()
}
