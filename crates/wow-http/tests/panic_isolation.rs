//! SPEC PX-1 over real HTTP: a panicking handler is a 500 with a `CommandResult` body, and a
//! quarantined aggregate is a 500 too, reported by `/health`, `/metrics` and
//! `/compensation/failures`, while the other aggregates keep being served.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use reqwest::{Client, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wow_core::aggregate::{Aggregate, AggregateRegistry, CommandContext};
use wow_core::compensation::{InMemoryCompensationStore, RetrySpec, AGGREGATE_PROCESSOR};
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::{Command, Event};
use wow_http::{router, HttpConfig, HttpState};
use wow_runtime::pipeline::LocalPipeline;

use support::{error_code, listen};

#[derive(Debug)]
struct Fragile;

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct FragileState {
    count: u64,
}

#[derive(Debug, Clone, Command)]
enum FragileCommand {
    #[command(create)]
    Start,
    Touch,
    /// The handler panics.
    Boom,
    /// Records `Poisoned`, whose `apply` panics.
    Poison,
}

#[derive(Debug, Clone, PartialEq, Event)]
enum FragileEvent {
    Started,
    Touched,
    Poisoned,
}

impl Aggregate for Fragile {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "fragile";
    type State = FragileState;
    type Command = FragileCommand;
    type Event = FragileEvent;
    type Error = std::convert::Infallible;

    fn handle(
        _: &FragileState,
        command: FragileCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<FragileEvent>, Self::Error> {
        Ok(match command {
            FragileCommand::Start => vec![FragileEvent::Started],
            FragileCommand::Touch => vec![FragileEvent::Touched],
            FragileCommand::Boom => panic!("boom in the handler"),
            FragileCommand::Poison => vec![FragileEvent::Poisoned],
        })
    }

    fn apply(state: &mut FragileState, event: &FragileEvent) {
        assert!(
            !matches!(event, FragileEvent::Poisoned),
            "poisoned event cannot be applied"
        );
        state.count += 1;
    }
}

struct Server {
    base: String,
    client: Client,
    _pipeline: LocalPipeline,
}

impl Server {
    async fn start() -> Self {
        let mut registry = AggregateRegistry::new();
        registry.register::<Fragile>().unwrap();
        let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
        // One partition: the aggregates share the worker a panic would have stopped.
        let pipeline = LocalPipeline::builder(registry, store)
            .partitions(1)
            .compensation(
                Arc::new(InMemoryCompensationStore::new()),
                RetrySpec::default(),
            )
            .build();
        let app = router(HttpState::new(&pipeline, None, HttpConfig::default()));
        Self {
            base: listen(app).await,
            client: Client::new(),
            _pipeline: pipeline,
        }
    }

    /// Sends a command; its status, `Wow-Error-Code` and body.
    async fn command(&self, id: &str, command: &str) -> (StatusCode, String, Value) {
        let response = self
            .client
            .post(format!("{}/fragile/{id}/{command}", self.base))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        let status = response.status();
        let code = error_code(&response);
        (status, code, response.json().await.unwrap())
    }

    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> (StatusCode, String) {
        let mut request = self.client.get(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        (response.status(), response.text().await.unwrap())
    }

    async fn get_json(&self, path: &str, headers: &[(&str, &str)]) -> (StatusCode, Value) {
        let (status, text) = self.get(path, headers).await;
        (status, serde_json::from_str(&text).unwrap())
    }
}

const RESULT_FIELDS: [&str; 16] = wow_core::CommandResult::JSON_FIELDS;

/// A 500 `InternalServerError` whose body is a whole command result.
#[track_caller]
fn assert_a_500_command_result(status: StatusCode, code: &str, body: &Value) {
    assert_eq!(
        (status, code),
        (StatusCode::INTERNAL_SERVER_ERROR, "InternalServerError")
    );
    for field in RESULT_FIELDS {
        assert!(body.get(field).is_some(), "missing {field}: {body}");
    }
}

#[tokio::test]
async fn a_panicking_handler_is_a_500_command_result_and_the_service_goes_on() {
    let s = Server::start().await;
    assert_eq!(s.command("a", "start").await.0, StatusCode::OK);

    let (status, code, body) = s.command("a", "boom").await;
    assert_a_500_command_result(status, &code, &body);
    assert_eq!(body["errorCode"], "InternalServerError");
    assert_eq!(body["stage"], "PROCESSED");
    assert_eq!(body["succeeded"], false);
    assert_eq!(body["aggregateId"], "a");
    assert!(body["errorMsg"]
        .as_str()
        .unwrap()
        .contains("boom in the handler"));

    let (status, _, body) = s.command("b", "start").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = s.command("a", "touch").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["aggregateVersion"], 2, "only the boom was lost");
    let (status, health) = s.get_json("/health", &[]).await;
    assert_eq!(
        (status, &health["status"]),
        (StatusCode::OK, &Value::from("UP"))
    );
    assert_eq!(health["details"]["quarantinedCount"], 0);
}

#[tokio::test]
async fn a_quarantined_aggregate_is_a_500_and_health_metrics_and_compensation_report_it() {
    let s = Server::start().await;
    for id in ["a", "b"] {
        assert_eq!(s.command(id, "start").await.0, StatusCode::OK);
    }
    let (_, metrics) = s.get("/metrics", &[]).await;
    assert!(
        metrics.contains("wow_quarantined_aggregates 0"),
        "{metrics}"
    );
    a_poisoned_stream_is_appended_and_its_aggregate_answers_500(&s).await;
    health_reports_the_quarantine_to_its_tenant_only(&s).await;

    let (_, metrics) = s.get("/metrics", &[]).await;
    assert!(
        metrics.contains("# TYPE wow_quarantined_aggregates gauge"),
        "{metrics}"
    );
    assert!(
        metrics.contains("wow_quarantined_aggregates 1"),
        "{metrics}"
    );

    let (status, records) = s
        .get_json(
            &format!("/compensation/failures?consumer={AGGREGATE_PROCESSOR}"),
            &[],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["stage"], "PROCESSED");
    assert_eq!(records[0]["aggregateId"]["aggregateId"], "a");
    assert_eq!(records[0]["version"], 2);
    assert_eq!(records[0]["errorCode"], "InternalServerError");
}

/// The poisoned stream is appended, and the answer says so; later commands to its aggregate
/// are 500 at once, and the other aggregate is served.
async fn a_poisoned_stream_is_appended_and_its_aggregate_answers_500(s: &Server) {
    let (status, code, body) = s.command("a", "poison").await;
    assert_a_500_command_result(status, &code, &body);
    assert_eq!(body["aggregateVersion"], 2);
    assert_eq!(body["result"]["recorded"], true);
    assert_eq!(body["result"]["quarantined"]["version"], 2);

    // Later commands to it: 500 at once; to the other aggregate: served.
    let (status, code, body) = s.command("a", "touch").await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::INTERNAL_SERVER_ERROR, "InternalServerError")
    );
    assert_eq!(body["result"]["quarantined"]["version"], 2, "{body}");
    assert_eq!(s.command("b", "touch").await.0, StatusCode::OK);
}

/// /health: still 200 and UP (the node serves every other aggregate), with the details;
/// another tenant sees neither the aggregates nor their count (SPEC TN-1).
async fn health_reports_the_quarantine_to_its_tenant_only(s: &Server) {
    let (status, health) = s.get_json("/health", &[]).await;
    assert_eq!(
        (status, &health["status"]),
        (StatusCode::OK, &Value::from("UP"))
    );
    assert_eq!(health["details"]["quarantinedCount"], 1);
    let quarantined = &health["details"]["quarantined"][0];
    assert_eq!(quarantined["aggregateName"], "fragile");
    assert_eq!(quarantined["aggregateId"], "a");
    assert_eq!(quarantined["tenantId"], "(0)");
    assert_eq!(quarantined["version"], 2);
    assert!(quarantined["message"]
        .as_str()
        .unwrap()
        .contains("poisoned event cannot be applied"));
    assert!(quarantined["since"].is_i64());
    // Another tenant sees neither the aggregates nor their count (SPEC TN-1).
    let (_, theirs) = s
        .get_json("/health", &[("Command-Tenant-Id", "other")])
        .await;
    assert_eq!(theirs["details"]["quarantinedCount"], 0);
    assert_eq!(theirs["details"]["quarantined"], Value::Array(Vec::new()));
}
