//! `/health` reports what the store says of itself (`details.store`), within a short time
//! even when the store never answers, and stays `UP`: a lost store comes back by itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;
use wow_core::eventsourcing::{
    ConnectionUse, EventStore, InMemoryEventStore, StoreCheck, StoreHealth,
};
use wow_http::{router, HttpConfig, HttpState, QuerySide};
use wow_runtime::pipeline::LocalPipeline;

/// A store that is a standby: reachable, refusing writes.
#[derive(Debug)]
struct Standby;

#[async_trait::async_trait]
impl StoreHealth for Standby {
    async fn check(&self, _within: Duration) -> StoreCheck {
        StoreCheck::reachable(false)
            .with_error("the server is read-only")
            .with_connections(ConnectionUse {
                open: 2,
                max: 16,
                idle: 2,
                waiting: 0,
            })
            .lost_for(Some(Duration::from_millis(1500)))
    }
}

/// A store whose check never ends (it ignores its time).
#[derive(Debug)]
struct Hung;

#[async_trait::async_trait]
impl StoreHealth for Hung {
    async fn check(&self, _within: Duration) -> StoreCheck {
        futures::future::pending().await
    }
}

async fn health_of(store: Arc<dyn StoreHealth>) -> (StatusCode, Value) {
    let events: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let pipeline =
        LocalPipeline::builder(wow_example_bank::registry().unwrap(), events.clone()).build();
    let state = HttpState::for_gateway(
        pipeline.gateway.clone(),
        QuerySide::new(events).with_store_health(store),
        HttpConfig::default(),
    );
    let request = Request::builder()
        .uri("/health")
        .body(Body::empty())
        .unwrap();
    let response = router(state).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn health_reports_a_read_only_store_with_its_connections() {
    let (status, body) = health_of(Arc::new(Standby)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "UP");
    let store = &body["details"]["store"];
    assert_eq!(store["status"], "READ_ONLY", "{body}");
    assert_eq!(store["reachable"], true);
    assert_eq!(store["writable"], false);
    assert_eq!(store["connections"]["max"], 16);
    assert_eq!(store["lostForMs"], 1500);
}

#[tokio::test]
async fn health_answers_within_its_bound_when_the_store_never_does() {
    let started = Instant::now();
    let (status, body) = health_of(Arc::new(Hung)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["details"]["store"]["status"], "DOWN", "{body}");
    assert!(started.elapsed() < Duration::from_secs(3));
}
