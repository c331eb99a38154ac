//! Pending deadlines over HTTP (SPEC DM-2): `GET /{aggregate}/{id}/deadlines` lists an
//! aggregate's in the caller's tenant, and `GET /deadlines` every tenant's for an operator.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use wow_core::aggregate::AggregateRegistry;
use wow_core::eventsourcing::InMemoryEventStore;
use wow_core::id::ManualClock;
use wow_core::testing_example::Hold;
use wow_http::{router, HttpConfig, HttpState, QuerySide};
use wow_runtime::pipeline::LocalPipeline;

use support::listen;

const T0: i64 = 1_800_000_000_000;

struct Server {
    base: String,
    client: Client,
    store: Arc<InMemoryEventStore>,
    _pipeline: LocalPipeline,
}

impl Server {
    async fn start(keeps_deadlines: bool) -> Self {
        Self::start_with(keeps_deadlines, HttpConfig::default()).await
    }

    async fn start_with(keeps_deadlines: bool, config: HttpConfig) -> Self {
        let mut registry = AggregateRegistry::new();
        registry.register::<Hold>().unwrap();
        let store = Arc::new(InMemoryEventStore::new());
        let pipeline = LocalPipeline::builder(registry, store.clone())
            .clock(Arc::new(ManualClock::at(T0)))
            .build();
        let queries = QuerySide::of_pipeline(&pipeline);
        let queries = if keeps_deadlines {
            queries.with_deadlines(store.clone())
        } else {
            queries
        };
        let state = HttpState::for_gateway(pipeline.gateway.clone(), queries, config);
        Self {
            base: listen(router(state)).await,
            client: Client::new(),
            store,
            _pipeline: pipeline,
        }
    }

    async fn place(&self, id: &str, tenant: &str, minutes: u32) {
        let response = self
            .client
            .post(format!("{}/hold/{id}/place", self.base))
            .header("Command-Tenant-Id", tenant)
            .json(&json!({"minutes": minutes}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }

    async fn get(&self, path: &str, tenant: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .header("Command-Tenant-Id", tenant)
            .send()
            .await
            .unwrap();
        (response.status(), response.json().await.unwrap())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregates_pending_deadlines_are_listed_in_its_tenant() {
    let server = Server::start(true).await;
    server.place("h-1", "t1", 15).await;
    let (status, body) = server.get("/hold/h-1/deadlines", "t1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let rows = body.as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["name"], "expire");
    assert_eq!(rows[0]["dueAt"], T0 + 15 * 60_000);
    assert_eq!(rows[0]["command"], "expire");
    assert_eq!(rows[0]["requestId"], "deadline/expire/1");
    assert_eq!(rows[0]["target"]["aggregateId"], "h-1");

    let (status, body) = server.get("/hold/h-1/deadlines", "t2").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!([]), "another tenant's deadlines are not seen");

    server.place("h-2", "t2", 5).await;
    let (status, body) = server.get("/deadlines?limit=1", "t1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["pending"], 2);
    assert_eq!(body["nextDueAt"], T0 + 5 * 60_000);
    assert_eq!(body["earliest"].as_array().unwrap().len(), 1);
    assert_eq!(body["earliest"][0]["owner"]["tenantId"], "t2");

    for limit in ["501", "-1", "many"] {
        let (status, body) = server.get(&format!("/deadlines?limit={limit}"), "t1").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{limit}: {body}");
        assert_eq!(body["errorCode"], "IllegalArgument");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_without_deadlines_answers_404() {
    let server = Server::start(false).await;
    let (status, body) = server.get("/hold/h-1/deadlines", "t1").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["errorCode"], "NotFound");
}

/// SPEC DM-6: a command only a deadline sends (`#[command(deadline)]`) is internal: no caller
/// can expire a hold over HTTP, and it is not in the document; a deadline command the domain
/// declared `public` (a hold's confirm) is routed as any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_only_a_deadline_sends_is_not_routed_over_http() {
    let server = Server::start(true).await;
    server.place("h-1", "t1", 15).await;
    let send = |command: &'static str| {
        server
            .client
            .post(format!("{}/hold/h-1/{command}", server.base))
            .header("Command-Tenant-Id", "t1")
            .json(&json!({}))
            .send()
    };
    let expire = send("expire").await.unwrap();
    assert_eq!(expire.status(), StatusCode::NOT_FOUND);
    let confirm = send("confirm").await.unwrap();
    assert_eq!(confirm.status(), StatusCode::OK);
    let document: Value = server
        .client
        .get(format!("{}/openapi.json", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths = document["paths"].as_object().unwrap();
    assert!(paths.keys().any(|path| path.ends_with("/confirm")));
    assert!(
        !paths.keys().any(|path| path.ends_with("/expire")),
        "{:?}",
        paths.keys()
    );
}

/// SPEC DM-2: an operator fires one pending deadline now or cancels it, by its owner and name,
/// with an operator's bearer token only; a missing row is 404 and nothing else changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_fires_or_cancels_one_pending_deadline_with_a_bearer_token() {
    let config = HttpConfig {
        operator_tokens: std::collections::HashSet::from(["op".to_owned()]),
        ..HttpConfig::default()
    };
    let server = Server::start_with(true, config).await;
    server.place("h-1", "t1", 15).await;
    server.place("h-1", "t2", 15).await;
    the_operators_bearer_token_fires_a_deadline_now(&server).await;
    the_operators_bearer_token_cancels_a_deadline_of_its_tenant(&server).await;
    a_missing_or_cancelled_row_is_404(&server).await;
    a_sagas_deadline_is_named_with_its_slash_escaped(&server).await;
}

const FIRE: &str = "/deadlines/t1/hold/h-1/expire/fire";
const CANCEL: &str = "/deadlines/t1/hold/h-1/expire";

/// `method` on `path` with `auth`: none, `"cookie"` (the operator's cookie), or the
/// `Authorization` header's value. The status and the JSON answer.
async fn act(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    auth: Option<&str>,
) -> (StatusCode, Value) {
    let request = server
        .client
        .request(method, format!("{}{path}", server.base));
    let request = match auth {
        Some("cookie") => request.header("Cookie", "wow-operator=op"),
        Some(header) => request.header("Authorization", header),
        None => request,
    };
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json::<Value>().await.unwrap())
}

/// Without a token, with another, or with the operator's cookie: 401; with the operator's
/// bearer token the deadline is due at once, not at its due time.
async fn the_operators_bearer_token_fires_a_deadline_now(server: &Server) {
    for (auth, expected) in [
        (None, StatusCode::UNAUTHORIZED),
        (Some("Bearer nope"), StatusCode::UNAUTHORIZED),
        (Some("cookie"), StatusCode::UNAUTHORIZED),
    ] {
        let (status, body) = act(server, reqwest::Method::POST, FIRE, auth).await;
        assert_eq!(status, expected, "{auth:?}: {body}");
    }
    let (status, row) = act(server, reqwest::Method::POST, FIRE, Some("Bearer op")).await;
    assert_eq!(status, StatusCode::OK, "{row}");
    assert_eq!(row["name"], "expire");
    assert_eq!(row["owner"]["tenantId"], "t1");
    assert!(
        row["fireAt"].as_i64().unwrap() < row["dueAt"].as_i64().unwrap(),
        "due at once, not at its due time: {row}"
    );
}

/// The cookie cannot cancel; the bearer token cancels the row of the path's tenant only.
async fn the_operators_bearer_token_cancels_a_deadline_of_its_tenant(server: &Server) {
    let (status, body) = act(server, reqwest::Method::DELETE, CANCEL, Some("cookie")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, row) = act(server, reqwest::Method::DELETE, CANCEL, Some("Bearer op")).await;
    assert_eq!(status, StatusCode::OK, "{row}");
    assert_eq!(row["requestId"], "deadline/expire/1");
    let (_, left) = server.get("/hold/h-1/deadlines", "t1").await;
    assert_eq!(left, json!([]), "cancelled");
    let (_, other) = server.get("/hold/h-1/deadlines", "t2").await;
    assert_eq!(other.as_array().unwrap().len(), 1, "another tenant's stays");
}

/// A row cancelled already, of another aggregate or of an unknown aggregate type: 404, and a
/// cancelled row cannot be fired.
async fn a_missing_or_cancelled_row_is_404(server: &Server) {
    for path in [
        CANCEL,
        "/deadlines/t1/hold/h-9/expire",
        "/deadlines/t1/nothing/h-1/expire",
    ] {
        let (status, body) = act(server, reqwest::Method::DELETE, path, Some("Bearer op")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert_eq!(body["errorCode"], "NotFound");
    }
    let (status, _) = act(server, reqwest::Method::POST, FIRE, Some("Bearer op")).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a cancelled row cannot be fired"
    );
}

/// A saga's deadline is named `{saga}/{name}`: its `/` is written `%2F`.
async fn a_sagas_deadline_is_named_with_its_slash_escaped(server: &Server) {
    use wow_core::deadline::{DeadlineStore, ScheduledCommand};
    use wow_core::AggregateId;
    let owner = AggregateId::new("demo", "hold", "h-2", "t1");
    server
        .store
        .schedule(&ScheduledCommand {
            owner: owner.clone(),
            name: "auto-confirm/confirm".to_owned(),
            due_at: T0,
            target: owner,
            command: "confirm".to_owned(),
            body: json!({}),
            request_id: "event-1/0".to_owned(),
            held_to: None,
        })
        .await
        .unwrap();
    let (status, row) = act(
        server,
        reqwest::Method::DELETE,
        "/deadlines/t1/hold/h-2/auto-confirm%2Fconfirm",
        Some("Bearer op"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{row}");
    assert_eq!(row["name"], "auto-confirm/confirm");
}
