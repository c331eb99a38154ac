//! Unique keys over HTTP (SPEC DM-1): a second claimant is 409 `DuplicateKey`, its resend is
//! the same recorded answer, and `GET /unique-key/{space}/{value}` names the holder in the
//! caller's tenant only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use wow_core::aggregate::AggregateRegistry;
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::testing_example::Member;
use wow_http::{router, HttpConfig, HttpState};
use wow_runtime::pipeline::LocalPipeline;

use support::{error_code, listen};

struct Server {
    base: String,
    client: Client,
    _pipeline: LocalPipeline,
}

impl Server {
    async fn start() -> Self {
        let mut registry = AggregateRegistry::new();
        registry.register::<Member>().unwrap();
        let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
        let pipeline = LocalPipeline::builder(registry, store).build();
        let app = router(HttpState::new(&pipeline, None, HttpConfig::default()));
        Self {
            base: listen(app).await,
            client: Client::new(),
            _pipeline: pipeline,
        }
    }

    /// Sends `command` with `handle` to the member `id` under `request_id`, in `tenant`: the
    /// status, `Wow-Error-Code`, whether it was replayed, and the body.
    async fn send(
        &self,
        id: &str,
        command: &str,
        handle: &str,
        request_id: &str,
        tenant: &str,
    ) -> (StatusCode, String, bool, Value) {
        let response = self
            .client
            .post(format!("{}/member/{id}/{command}", self.base))
            .header("Command-Request-Id", request_id)
            .header("Command-Tenant-Id", tenant)
            .json(&json!({"handle": handle}))
            .send()
            .await
            .unwrap();
        let (status, code) = (response.status(), error_code(&response));
        let replayed = response.headers().contains_key("wow-replayed");
        (status, code, replayed, response.json().await.unwrap())
    }

    async fn holder(&self, space: &str, value: &str, tenant: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(format!("{}/unique-key/{space}/{value}", self.base))
            .header("Command-Tenant-Id", tenant)
            .send()
            .await
            .unwrap();
        (response.status(), response.json().await.unwrap())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_claimant_is_409_duplicate_key_and_its_resend_is_the_same_answer() {
    let server = Server::start().await;
    let (status, _, _, _) = server.send("ann", "register", "ann", "r-ann", "t1").await;
    assert_eq!(status, StatusCode::OK);

    let (status, code, replayed, body) = server.send("bob", "register", "ann", "r-bob", "t1").await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "DuplicateKey")
    );
    assert!(!replayed);
    let message = body["errorMsg"].as_str().unwrap();
    assert!(
        message.contains("handle") && message.contains("ann"),
        "{message}"
    );

    let (status, code, replayed, _) = server.send("bob", "register", "ann", "r-bob", "t1").await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "DuplicateKey")
    );
    assert!(
        replayed,
        "the resend is answered from the recorded decision"
    );

    let (status, code, _, _) = server.send("bob", "register", "bob", "r-bob", "t1").await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "RequestIdReused"),
        "the request id was decided; another body under it is not a new intent"
    );
    let (status, _, _, _) = server.send("bob", "register", "bob", "r-bob-2", "t1").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a free handle is taken by a new request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holder_of_a_key_is_looked_up_in_the_callers_tenant() {
    let server = Server::start().await;
    server.send("ann", "register", "ann", "r-1", "t1").await;
    let (status, body) = server.holder("handle", "ann", "t1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["space"], "handle");
    assert_eq!(body["value"], "ann");
    assert_eq!(body["version"], 1);
    assert_eq!(body["aggregateId"]["aggregateName"], "member");
    assert_eq!(body["aggregateId"]["aggregateId"], "ann");
    assert_eq!(body["aggregateId"]["tenantId"], "t1");

    let (status, body) = server.holder("handle", "ann", "t2").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another tenant's key is not seen: {body}"
    );
    assert_eq!(body["errorCode"], "NotFound");
    let (status, _) = server.holder("handle", "nobody", "t1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = server.holder("Not%20A%20Space", "ann", "t1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["errorCode"], "IllegalArgument");

    server
        .send("ann", "change_handle", "anna", "r-2", "t1")
        .await;
    assert_eq!(
        server.holder("handle", "ann", "t1").await.0,
        StatusCode::NOT_FOUND
    );
    let (status, body) = server.holder("handle", "anna", "t1").await;
    assert_eq!(
        (status, body["version"].clone()),
        (StatusCode::OK, json!(2))
    );
}
