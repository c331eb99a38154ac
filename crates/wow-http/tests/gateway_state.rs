//! The router over a gateway and a query side, with no pipeline handed to it: what a
//! gateway-only process serves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_http::{router, HttpConfig, HttpState, QuerySide};
use wow_runtime::pipeline::LocalPipeline;

async fn call(app: &axum::Router, method: &str, path: &str, body: &str) -> (StatusCode, Value) {
    let (status, body, _) = call_tagged(app, method, path, body).await;
    (status, body)
}

/// As [`call`], with the answer's `ETag`.
async fn call_tagged(
    app: &axum::Router,
    method: &str,
    path: &str,
    body: &str,
) -> (StatusCode, Value, Option<String>) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_owned()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let tag = response
        .headers()
        .get("etag")
        .map(|tag| tag.to_str().unwrap().to_owned());
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        tag,
    )
}

#[tokio::test]
async fn a_gateway_and_a_query_side_serve_commands_and_reads() {
    let events: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    // The node runs here only so that commands are decided; the state never sees it.
    let pipeline =
        LocalPipeline::builder(wow_example_bank::registry().unwrap(), events.clone()).build();
    let state = HttpState::for_gateway(
        pipeline.gateway.clone(),
        QuerySide::new(events),
        HttpConfig::default(),
    );
    let app = router(state);

    let (status, body) = call(
        &app,
        "POST",
        "/account/a1/open",
        r#"{"name":"Ann","balance":5}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body, tag) = call_tagged(&app, "GET", "/account/a1/state", "").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(tag.as_deref(), Some("\"1\""));
    assert_eq!(body["balance"], 5);

    // No consumers run behind this state: the compensation routes say so, and the
    // quarantine is empty.
    let (status, body) = call(&app, "GET", "/compensation/failures", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = call(&app, "GET", "/health", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["details"]["quarantinedCount"], 0);
}

#[tokio::test]
async fn the_pipeline_shorthand_is_the_gateway_and_its_whole_query_side() {
    let events: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let pipeline = LocalPipeline::builder(wow_example_bank::registry().unwrap(), events).build();
    let queries = QuerySide::of_pipeline(&pipeline);
    assert!(
        queries.compensation.is_none(),
        "built without a compensation store"
    );
    assert!(queries.snapshots.is_none());
    let state = HttpState::new(&pipeline, None, HttpConfig::default());
    assert_eq!(
        state.registry().iter().count(),
        pipeline.gateway.registry().iter().count()
    );
}
