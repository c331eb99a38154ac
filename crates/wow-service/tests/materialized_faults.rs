//! The materialized snapshots (snapshot queries on, the default) when the view store fails
//! (SPEC ST-5, DS-4): a document that cannot be read is no snapshot, so a restarted node's
//! load and a state read fold the history and decide and answer as without it; a document
//! that cannot be read or written fails the `snapshot` consumer after the append, recorded as
//! any consumer's failure and written, at the aggregate's latest version, when it is retried
//! with the store back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use serde_json::Value;
use tower::ServiceExt;
use wow_core::event::{ProcessError, Processed};
use wow_core::query::{DocumentQuery, Filter};
use wow_core::testing_example::Counter;
use wow_core::view::{ViewFilter, ViewKey, ViewRow, ViewStore, ViewStoreError, ViewUpdate};
use wow_core::Stores;
use wow_service::{RunningService, Service, Settings};

/// A view store whose materialized snapshots (views `wow.snapshot.*`) can be made unreadable
/// and unwritable; every other view is the inner store's.
#[derive(Debug)]
struct Faulty {
    inner: Arc<dyn ViewStore>,
    unreadable: AtomicBool,
    unwritable: AtomicBool,
}

fn snapshot_view(view: &str) -> bool {
    view.starts_with("wow.snapshot.")
}

impl Faulty {
    fn read_fails(&self, view: &str) -> Result<(), ViewStoreError> {
        if self.unreadable.load(Ordering::SeqCst) && snapshot_view(view) {
            return Err(ViewStoreError::Unavailable(
                "the test's store is down".into(),
            ));
        }
        Ok(())
    }

    fn write_fails(&self, view: &str) -> bool {
        self.unwritable.load(Ordering::SeqCst) && snapshot_view(view)
    }
}

#[async_trait]
impl ViewStore for Faulty {
    async fn update(
        &self,
        key: &ViewKey,
        message_id: &str,
        work: ViewUpdate,
    ) -> Result<Processed, ProcessError> {
        if self.write_fails(&key.view) {
            return Err(ProcessError::Store("the test's store is down".into()));
        }
        self.inner.update(key, message_id, work).await
    }

    async fn put_newer(&self, row: ViewRow) -> Result<bool, ViewStoreError> {
        if self.write_fails(&row.key.view) {
            return Err(ViewStoreError::Unavailable(
                "the test's store is down".into(),
            ));
        }
        self.inner.put_newer(row).await
    }

    async fn load(&self, key: &ViewKey) -> Result<Option<ViewRow>, ViewStoreError> {
        self.read_fails(&key.view)?;
        self.inner.load(key).await
    }

    async fn list(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &ViewFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        self.read_fails(view)?;
        self.inner.list(view, tenant_id, filter, after, limit).await
    }

    async fn query(
        &self,
        view: &str,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        self.read_fails(view)?;
        self.inner.query(view, tenant_id, query).await
    }

    async fn count(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, ViewStoreError> {
        self.read_fails(view)?;
        self.inner.count(view, tenant_id, filter).await
    }

    async fn scan(
        &self,
        view: &str,
        after: Option<&ViewKey>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        self.read_fails(view)?;
        self.inner.scan(view, after, limit).await
    }

    async fn clear(&self, view: &str) -> Result<(), ViewStoreError> {
        self.inner.clear(view).await
    }

    async fn declare_query_index(&self, view: &str) -> Result<(), ViewStoreError> {
        self.inner.declare_query_index(view).await
    }

    async fn declare_field_index(&self, view: &str, field: &str) -> Result<(), ViewStoreError> {
        self.inner.declare_field_index(view, field).await
    }
}

/// `method path` with `body`, a command waiting for `PROJECTED`.
async fn call(app: &Router, method: &str, path: &str, body: &str) -> (StatusCode, Value) {
    call_until(app, method, path, body, "PROJECTED").await
}

/// `method path` with `body`, a command waiting for `stage`.
async fn call_until(
    app: &Router,
    method: &str,
    path: &str,
    body: &str,
    stage: &str,
) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .header("Command-Wait-Stage", stage)
        .body(Body::from(body.to_owned()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The counter served over `stores` with `faulty` as its view store.
async fn counter_service(stores: &Stores, faulty: Arc<Faulty>) -> RunningService {
    let mut stores = stores.clone();
    stores.views = faulty;
    let settings = Settings {
        // Retries by hand only: the test retries once the store is back.
        retry_every: None,
        ..Settings::default()
    };
    Service::builder()
        .aggregate::<Counter>()
        .settings(settings)
        .stores(stores)
        .build()
        .await
        .unwrap()
}

fn faulty() -> Arc<Faulty> {
    Arc::new(Faulty {
        inner: Stores::in_memory().views,
        unreadable: AtomicBool::new(false),
        unwritable: AtomicBool::new(false),
    })
}

#[tokio::test]
async fn an_unreadable_snapshot_is_no_snapshot_loads_fold_the_history() {
    let (stores, views) = (Stores::in_memory(), faulty());
    let service = counter_service(&stores, views.clone()).await;
    let app = service.router();
    let (status, answer) = call(&app, "POST", "/counter/c1/start", "{}").await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, answer) = call(&app, "POST", "/counter/c1/add", r#"{"by":2}"#).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    service.stop().await;

    // A restarted service (nothing cached) whose documents cannot be read: the node's load
    // folds the history instead, and decides right.
    views.unreadable.store(true, Ordering::SeqCst);
    let service = counter_service(&stores, views.clone()).await;
    let app = service.router();
    // (The `snapshot` consumer cannot read the document it would fold either: that stage
    // fails and is recorded; the command's own part is what this test is about.)
    let (status, answer) =
        call_until(&app, "POST", "/counter/c1/add", r#"{"by":3}"#, "PROCESSED").await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["aggregateVersion"], 3, "{answer}");
    let (status, state) = call(&app, "GET", "/counter/c1/state", "").await;
    assert_eq!(status, StatusCode::OK, "{state}");
    assert_eq!(state["value"], 5, "{state}");
    // The snapshot query itself says the store is down, as a retryable 503.
    let (status, body) = call(&app, "GET", "/counter/c1/snapshot", "").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");

    views.unreadable.store(false, Ordering::SeqCst);
    // The document is where it was until the `snapshot` consumer's failure is retried.
    let (status, document) = call(&app, "GET", "/counter/c1/snapshot", "").await;
    assert_eq!(status, StatusCode::OK, "{document}");
    assert_eq!(document["version"], 2, "{document}");
    retry_the_snapshots_failure(&app).await;
    let (status, document) = call(&app, "GET", "/counter/c1/snapshot", "").await;
    assert_eq!(status, StatusCode::OK, "{document}");
    assert_eq!(
        (&document["version"], &document["state"]["value"]),
        (&Value::from(3), &Value::from(5)),
        "{document}"
    );
    service.stop().await;
}

/// Retries the one recorded failure of the `snapshot` consumer; it succeeds.
async fn retry_the_snapshots_failure(app: &Router) {
    let (status, failures) = call(app, "GET", "/compensation/failures?consumer=snapshot", "").await;
    assert_eq!(status, StatusCode::OK, "{failures}");
    let failures = failures.as_array().unwrap().clone();
    assert_eq!(failures.len(), 1, "{failures:?}");
    let id = failures[0]["id"].as_str().unwrap();
    let (status, retried) = call(
        app,
        "POST",
        &format!("/compensation/failures/{id}/retry"),
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{retried}");
    assert_eq!(retried["status"], "SUCCEEDED", "{retried}");
}

#[tokio::test]
async fn an_unwritable_snapshot_is_a_recorded_failure_written_when_retried() {
    let views = faulty();
    let service = counter_service(&Stores::in_memory(), views.clone()).await;
    let app = service.router();
    let (status, _) = call(&app, "POST", "/counter/c2/start", "{}").await;
    assert_eq!(status, StatusCode::OK);

    views.unwritable.store(true, Ordering::SeqCst);
    // The command is decided and appended; the wait on PROJECTED says the stage failed
    // after the append (SPEC ST-5), retryable.
    let (status, answer) = call(&app, "POST", "/counter/c2/add", r#"{"by":4}"#).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert_eq!(
        (
            &answer["result"]["failedStage"],
            &answer["result"]["processed"]["succeeded"],
            &answer["aggregateVersion"]
        ),
        (
            &Value::from("PROJECTED"),
            &Value::from(true),
            &Value::from(2)
        ),
        "{answer}"
    );
    let (status, failures) =
        call(&app, "GET", "/compensation/failures?consumer=snapshot", "").await;
    assert_eq!(status, StatusCode::OK, "{failures}");
    let failures = failures.as_array().unwrap().clone();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(
        failures[0]["errorCode"], "ServiceUnavailable",
        "{failures:?}"
    );
    assert_eq!(failures[0]["version"], 2, "{failures:?}");
    // The state is whole meanwhile (the document is behind, the history is not).
    let (_, state) = call(&app, "GET", "/counter/c2/state", "").await;
    assert_eq!(state["value"], 4, "{state}");

    views.unwritable.store(false, Ordering::SeqCst);
    let id = failures[0]["id"].as_str().unwrap();
    let (status, retried) = call(
        &app,
        "POST",
        &format!("/compensation/failures/{id}/retry"),
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{retried}");
    assert_eq!(retried["status"], "SUCCEEDED", "{retried}");
    let (status, document) = call(&app, "GET", "/counter/c2/snapshot", "").await;
    assert_eq!(status, StatusCode::OK, "{document}");
    assert_eq!(
        (&document["version"], &document["state"]["value"]),
        (&Value::from(2), &Value::from(4)),
        "{document}"
    );
    service.stop().await;
}
