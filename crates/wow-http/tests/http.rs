//! The HTTP contract of docs/http-api.md over real HTTP: a server on an ephemeral port, a real
//! client, the `bank` domain.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Client, Response, StatusCode};
use serde_json::{json, Value};
use wow_core::eventsourcing::{
    EventFeed, EventStore, GatedEventStore, History, InMemoryEventStore, KeyIndex, RequestLog,
    StreamQueries,
};
use wow_core::AggregateId;
use wow_http::{router, HttpConfig, HttpState};
use wow_runtime::pipeline::LocalPipeline;

use support::{error_code, in_memory_bank, listen};

struct Server {
    base: String,
    client: Client,
    store: Arc<dyn EventStore>,
    _bank: Option<LocalPipeline>,
}

async fn server_with(config: HttpConfig) -> Server {
    let (bank, store) = in_memory_bank().await;
    let base = listen(router(HttpState::new(&bank, None, config))).await;
    Server {
        base,
        client: Client::new(),
        store,
        _bank: Some(bank),
    }
}

async fn server() -> Server {
    server_with(HttpConfig::default()).await
}

impl Server {
    async fn post(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (StatusCode, Value, String) {
        self.send_json(reqwest::Method::POST, path, headers, body)
            .await
    }

    async fn put(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (StatusCode, Value, String) {
        self.send_json(reqwest::Method::PUT, path, headers, body)
            .await
    }

    /// `method` of `path` with a JSON `body` and `headers`.
    async fn send_json(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (StatusCode, Value, String) {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_owned());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        read(request.send().await.unwrap()).await
    }

    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> (StatusCode, Value) {
        let mut request = self.client.get(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let (status, body, _) = read(request.send().await.unwrap()).await;
        (status, body)
    }

    /// As [`Server::get`], with the answer's `ETag`.
    async fn get_tagged(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (StatusCode, Value, Option<String>) {
        let mut request = self.client.get(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        let tag = response
            .headers()
            .get("etag")
            .map(|tag| tag.to_str().unwrap().to_owned());
        let (status, body, _) = read(response).await;
        (status, body, tag)
    }

    async fn open(&self, id: &str, balance: i64) {
        let (status, body, _) = self
            .post(
                &format!("/account/{id}/open"),
                &[],
                &json!({"name": "Ann", "balance": balance}).to_string(),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    /// The text of `/metrics`.
    async fn metrics(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    async fn history(&self, id: &str) -> usize {
        let aggregate = AggregateId::new("bank", "account", id, "(0)");
        self.store
            .load(&aggregate, 1, u64::MAX)
            .await
            .unwrap()
            .len()
    }
}

async fn read(response: Response) -> (StatusCode, Value, String) {
    let status = response.status();
    let code = error_code(&response);
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
        code,
    )
}

#[tokio::test]
async fn each_outcome_has_its_status_and_error_code_header() {
    let s = server().await;
    let (status, body, code) = s
        .post(
            "/account/acc-1/open",
            &[],
            r#"{"name":"Ann","balance":100}"#,
        )
        .await;
    assert_eq!(
        (status, code.as_str(), body["errorCode"].as_str()),
        (StatusCode::OK, "Ok", Some("Ok"))
    );
    for field in wow_core::CommandResult::JSON_FIELDS {
        assert!(body.get(field).is_some(), "missing {field}");
    }
    a_refusal_has_its_status_and_code(&s).await;
    a_conflict_has_409_and_its_code(&s).await;
}

/// A payload its validation refuses, a business rejection, and an aggregate, aggregate type or
/// command that does not exist.
async fn a_refusal_has_its_status_and_code(s: &Server) {
    let (status, body, code) = s
        .post("/account/acc-1/withdraw", &[], r#"{"amount":0}"#)
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "CommandValidation")
    );
    assert_eq!(body["bindingErrors"][0]["name"], "amount");

    let (status, _, code) = s
        .post("/account/acc-1/withdraw", &[], r#"{"amount":1000}"#)
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "InsufficientBalance")
    );

    let (status, _, code) = s
        .post("/account/nobody/deposit", &[], r#"{"amount":1}"#)
        .await;
    assert_eq!((status, code.as_str()), (StatusCode::NOT_FOUND, "NotFound"));
    let (status, _, code) = s
        .post("/ledger/acc-1/deposit", &[], r#"{"amount":1}"#)
        .await;
    assert_eq!((status, code.as_str()), (StatusCode::NOT_FOUND, "NotFound"));
    let (status, _, code) = s.post("/account/acc-1/close", &[], "{}").await;
    assert_eq!((status, code.as_str()), (StatusCode::NOT_FOUND, "NotFound"));
}

/// A second create, an expected version that is not the aggregate's, a resend and a request
/// id reused for another body: each a 409 with its own code.
async fn a_conflict_has_409_and_its_code(s: &Server) {
    let (status, _, code) = s
        .post("/account/acc-1/open", &[], r#"{"name":"Bob","balance":1}"#)
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "DuplicateAggregateId")
    );
    let (status, _, code) = s
        .post(
            "/account/acc-1/deposit",
            &[("Command-Aggregate-Version", "9")],
            r#"{"amount":1}"#,
        )
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "CommandExpectVersionConflict")
    );

    let headers = [("Command-Request-Id", "dep-1")];
    let (status, first, _) = s
        .post("/account/acc-1/deposit", &headers, r#"{"amount":5}"#)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, again, code) = s
        .post("/account/acc-1/deposit", &headers, r#"{"amount":5}"#)
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "DuplicateRequestId")
    );
    assert_eq!(again["aggregateVersion"], first["aggregateVersion"]);
    assert_eq!(again["result"]["originalCommandId"], first["commandId"]);
    let (status, _, code) = s
        .post("/account/acc-1/deposit", &headers, r#"{"amount":6}"#)
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "RequestIdReused")
    );
}

#[tokio::test]
async fn create_without_an_id_gets_one_from_the_header_or_the_server() {
    let s = server().await;
    let (status, body, _) = s
        .post(
            "/account/open",
            &[("Command-Aggregate-Id", "named-1")],
            r#"{"name":"Ann","balance":1}"#,
        )
        .await;
    assert_eq!(
        (status, body["aggregateId"].as_str()),
        (StatusCode::OK, Some("named-1"))
    );
    let (status, body, _) = s
        .post("/account/open", &[], r#"{"name":"Ann","balance":1}"#)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(!body["aggregateId"].as_str().unwrap().is_empty());
}

/// One bad request and its answer: the status, the error code, the field it names.
struct BadInput<'a> {
    path: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    body: String,
    status: StatusCode,
    code: &'a str,
    field: &'a str,
}

/// A bad deposit of `body` to acc-1 with `headers`, answered with 400 and `code`.
fn bad_deposit<'a>(
    headers: &[(&'a str, &'a str)],
    body: &str,
    code: &'a str,
    field: &'a str,
) -> BadInput<'a> {
    BadInput {
        path: "/account/acc-1/deposit",
        headers: headers.to_vec(),
        body: body.to_owned(),
        status: StatusCode::BAD_REQUEST,
        code,
        field,
    }
}

/// Every bad input the test sends, in order: bodies, headers, a body over the limit, a bad
/// path and a payload its validation refuses.
fn bad_inputs(long_id: &str) -> Vec<BadInput<'_>> {
    let one = r#"{"amount":1}"#;
    vec![
        bad_deposit(&[], "{not json", "BadRequest", "body"),
        bad_deposit(&[], r#"{"amount":"ten"}"#, "BadRequest", "amount"),
        bad_deposit(&[], "{}", "BadRequest", "amount"),
        bad_deposit(&[], r#"{"amount":1,"extra":true}"#, "BadRequest", "extra"),
        bad_deposit(
            &[("Command-Wait-Stage", "DONE")],
            one,
            "IllegalArgument",
            "Command-Wait-Stage",
        ),
        bad_deposit(
            &[("Command-Wait-Timeout", "-5")],
            one,
            "IllegalArgument",
            "Command-Wait-Timeout",
        ),
        bad_deposit(
            &[("Command-Wait-Timeout", "99999999999")],
            one,
            "IllegalArgument",
            "Command-Wait-Timeout",
        ),
        bad_deposit(
            &[("Command-Aggregate-Version", "two")],
            one,
            "IllegalArgument",
            "Command-Aggregate-Version",
        ),
        bad_deposit(
            &[("Command-Request-Id", long_id)],
            one,
            "IllegalArgument",
            "Command-Request-Id",
        ),
        BadInput {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            ..bad_deposit(
                &[],
                &format!(r#"{{"amount":1,"pad":"{}"}}"#, "x".repeat(400)),
                "BadRequest",
                "body",
            )
        },
        BadInput {
            path: "/account/acc%20one/deposit",
            ..bad_deposit(&[], one, "IllegalArgument", "aggregateId")
        },
        bad_deposit(&[], r#"{"amount":-1}"#, "CommandValidation", "amount"),
    ]
}

#[tokio::test]
async fn bad_input_is_a_4xx_that_says_what_is_wrong_and_records_nothing() {
    let s = server_with(HttpConfig {
        body_limit: 256,
        ..HttpConfig::default()
    })
    .await;
    s.open("acc-1", 10).await;
    let long_id = "r".repeat(129);
    for BadInput {
        path,
        headers,
        body,
        status,
        code,
        field,
    } in bad_inputs(&long_id)
    {
        let (got, answer, header) = s.post(path, &headers, &body).await;
        assert_eq!(got, status, "{path} {headers:?} {body}: {answer}");
        assert_eq!(header, code, "{path} {headers:?}: {answer}");
        assert_eq!(answer["errorCode"], code);
        assert_eq!(answer["succeeded"], false);
        assert_eq!(answer["bindingErrors"][0]["name"], field, "{answer}");
    }
    // A request id with a control character cannot even be sent as a header by reqwest;
    // one with a tab can.
    let (status, answer, _) = s
        .post(
            "/account/acc-1/deposit",
            &[("Command-Request-Id", "a\tb")],
            r#"{"amount":1}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(
        s.history("acc-1").await,
        1,
        "no bad request recorded anything"
    );
}

#[tokio::test]
async fn the_stream_sends_one_event_per_stage_in_order() {
    let s = server().await;
    s.open("acc-a", 100).await;
    s.open("acc-b", 0).await;
    let response = s
        .client
        .post(format!("{}/account/acc-a/transfer", s.base))
        .header("Accept", "text/event-stream")
        .header("Command-Wait-Stage", "SAGA_HANDLED")
        .header("content-type", "application/json")
        .body(r#"{"to":"acc-b","amount":10}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    let events: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        events,
        [
            "SENT",
            "PROCESSED",
            "SNAPSHOT",
            "PROJECTED",
            "EVENT_HANDLED",
            "SAGA_HANDLED"
        ]
    );
    let datas: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    assert!(datas.iter().all(|d| d["succeeded"] == true));
    assert_eq!(ids[1], datas[1]["id"]);
    let (_, view) = s.get("/account/acc-b/state", &[]).await;
    assert_eq!(view["balance"], 10);

    // The streamed command counts once in /metrics, at the stage that ended it.
    let metrics = s.metrics().await;
    let counted = |stage: &str| {
        metrics
            .lines()
            .find(|l| {
                l.starts_with(&format!(
                    "wow_commands_total{{stage=\"{stage}\",error_code=\"Ok\"}}"
                ))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert_eq!(counted("SAGA_HANDLED"), 1, "{metrics}");
    assert_eq!(counted("SENT"), 0, "{metrics}");
    assert_eq!(counted("PROJECTED"), 0, "{metrics}");
}

#[tokio::test]
async fn sixty_four_concurrent_requests_with_one_request_id_make_one_stream() {
    let s = Arc::new(server().await);
    s.open("acc-1", 0).await;
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move {
                s.post(
                    "/account/acc-1/deposit",
                    &[("Command-Request-Id", "same")],
                    r#"{"amount":1}"#,
                )
                .await
            })
        })
        .collect();
    let mut ok = 0;
    for task in tasks {
        let (status, body, _) = task.await.unwrap();
        match status {
            StatusCode::OK => ok += 1,
            StatusCode::CONFLICT => assert_eq!(body["errorCode"], "DuplicateRequestId"),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(ok, 1);
    assert_eq!(s.history("acc-1").await, 2);
}

#[tokio::test]
async fn history_state_and_outcome_look_up() {
    let s = server().await;
    s.open("acc-1", 7).await;
    s.post(
        "/account/acc-1/deposit",
        &[("Command-Request-Id", "d-1")],
        r#"{"amount":3}"#,
    )
    .await;
    the_history_answers_every_stream_field(&s).await;
    the_state_and_the_outcome_look_up_answer(&s).await;
    the_openapi_document_health_and_metrics_answer(&s).await;
}

/// `GET /{aggregate}/{id}/state` answers the bare state under every prefix and none, its
/// version as a strong entity tag that moves on with each command.
#[tokio::test]
async fn the_state_is_bare_under_every_prefix_its_version_in_etag() {
    let s = server().await;
    let tenant = [("Command-Tenant-Id", "t1")];
    let (status, answer, _) = s
        .post(
            "/account/e-1/open",
            &tenant,
            r#"{"name":"Ann","balance":7}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let bare =
        |balance: i64| json!({"name": "Ann", "balance": balance, "held": 0, "frozen": false});
    let mut seen = Vec::new();
    for path in [
        "/account/e-1/state",
        "/tenant/t1/account/e-1/state",
        "/bank/account/e-1/state",
        "/bank/tenant/t1/account/e-1/state",
    ] {
        let (status, state, tag) = s.get_tagged(path, &tenant).await;
        assert_eq!(status, StatusCode::OK, "{path}: {state}");
        assert_eq!(state, bare(7), "{path}");
        assert_eq!(tag.as_deref(), Some("\"1\""), "{path}");
        seen.push(state);
    }
    assert!(seen.windows(2).all(|pair| pair[0] == pair[1]), "{seen:?}");

    let (status, answer, _) = s
        .post("/account/e-1/deposit", &tenant, r#"{"amount":3}"#)
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    for path in [
        "/account/e-1/state",
        "/tenant/t1/account/e-1/state",
        "/bank/account/e-1/state",
    ] {
        let (status, state, tag) = s.get_tagged(path, &tenant).await;
        assert_eq!(status, StatusCode::OK, "{path}: {state}");
        assert_eq!(state, bare(10), "{path}");
        assert_eq!(tag.as_deref(), Some("\"2\""), "{path}: the tag moves on");
    }
    // Time travel answers alike: the state then, its version in the tag.
    let (status, state, tag) = s.get_tagged("/account/e-1/state/1", &tenant).await;
    assert_eq!(
        (status, state, tag.as_deref()),
        (StatusCode::OK, bare(7), Some("\"1\""))
    );
    let (status, state, tag) = s
        .get_tagged(
            &format!("/bank/account/e-1/state/time/{}", i64::MAX),
            &tenant,
        )
        .await;
    assert_eq!(
        (status, state, tag.as_deref()),
        (StatusCode::OK, bare(10), Some("\"2\""))
    );
}

/// The history of acc-1: its streams with every field, and a bad range refused.
async fn the_history_answers_every_stream_field(s: &Server) {
    let (status, streams) = s.get("/account/acc-1/event/1/2", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(streams.as_array().unwrap().len(), 2);
    for field in [
        "id",
        "requestId",
        "commandId",
        "aggregateId",
        "aggregateName",
        "contextName",
        "tenantId",
        "version",
        "createTime",
        "body",
    ] {
        assert!(streams[0].get(field).is_some(), "stream field {field}");
    }
    assert_eq!(streams[1]["body"][0]["name"], "Deposited");
    let (status, _) = s.get("/account/acc-1/event/3/1", &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// The state of acc-1, the outcome of its request `d-1`, and of requests and aggregates that
/// do not exist.
async fn the_state_and_the_outcome_look_up_answer(s: &Server) {
    let (status, state, tag) = s.get_tagged("/account/acc-1/state", &[]).await;
    assert_eq!(
        (status, tag.as_deref(), state["balance"].clone()),
        (StatusCode::OK, Some("\"2\""), json!(10))
    );
    let (status, outcome) = s.get("/account/acc-1/requests/d-1", &[]).await;
    assert_eq!(
        (
            status,
            outcome["status"].as_str(),
            outcome["version"].clone()
        ),
        (StatusCode::OK, Some("APPENDED"), json!(2))
    );
    assert_eq!(outcome["stream"]["body"][0]["name"], "Deposited");
    let (status, outcome) = s.get("/account/acc-1/requests/never", &[]).await;
    assert_eq!(
        (status, outcome["status"].as_str()),
        (StatusCode::NOT_FOUND, Some("NONE"))
    );
    let (status, _) = s.get("/account/nobody/state", &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The OpenAPI document keys a payload's schema as Wow does; health is UP; the metrics count
/// both commands.
async fn the_openapi_document_health_and_metrics_answer(s: &Server) {
    let (status, doc) = s.get("/openapi.json", &[]).await;
    assert_eq!(status, StatusCode::OK);
    // The payload's schema is a component, keyed as Wow keys it (its generator reads it).
    let body = &doc["paths"]["/account/{id}/transfer"]["post"]["requestBody"]["content"]
        ["application/json"]["schema"];
    assert_eq!(body["$ref"], "#/components/schemas/bank.account.Transfer");
    let body = &doc["components"]["schemas"]["bank.account.Transfer"];
    assert_eq!(body["properties"]["amount"]["minimum"], 1, "{body}");
    assert!(body["required"].as_array().unwrap().contains(&json!("to")));
    let (status, health) = s.get("/health", &[]).await;
    assert_eq!(
        (status, health["status"].as_str()),
        (StatusCode::OK, Some("UP"))
    );
    let metrics = s.metrics().await;
    assert!(
        metrics.contains("wow_commands_total{stage=\"PROCESSED\",error_code=\"Ok\"} 2"),
        "{metrics}"
    );
    assert!(metrics.contains("wow_command_duration_seconds_count 2"));
}

#[tokio::test]
async fn tenants_only_see_their_own_aggregates() {
    let s = server().await;
    let a = [("Command-Tenant-Id", "tenant-a")];
    let b = [("Command-Tenant-Id", "tenant-b")];
    let (status, _, _) = s
        .post(
            "/account/shared-id/open",
            &a,
            r#"{"name":"Ann","balance":5}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // tenant-b holds no `shared-id`: a deposit to it is NotFound, whatever tenant-a holds.
    let (status, answer, _) = s
        .post("/account/shared-id/deposit", &b, r#"{"amount":1}"#)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(
        s.get("/account/shared-id/state", &b).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        s.get("/account/shared-id/state", &a).await.0,
        StatusCode::OK
    );
    // tenant-b's history of `shared-id` is empty, as of any id it does not hold.
    let (status, history) = s.get("/account/shared-id/event/1/10", &b).await;
    assert_eq!((status, history), (StatusCode::OK, serde_json::json!([])));
    // It may open its own under the same id (SPEC TN-1); tenant-a's is untouched.
    let (status, answer, _) = s
        .post(
            "/account/shared-id/open",
            &b,
            r#"{"name":"Eve","balance":1}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (_, state) = s.get("/account/shared-id/state", &b).await;
    assert_eq!(state["balance"], 1, "{state}");
    let (_, state) = s.get("/account/shared-id/state", &a).await;
    assert_eq!(state["balance"], 5, "{state}");
    let aggregate = AggregateId::new("bank", "account", "shared-id", "tenant-a");
    assert_eq!(
        s.store.load(&aggregate, 1, 10).await.unwrap().len(),
        1,
        "tenant-a's history is unchanged"
    );
}

#[tokio::test]
async fn with_auth_the_token_decides_the_tenant() {
    let tokens = HashMap::from([
        (
            "token-a".to_owned(),
            wow_http::TokenBinding::tenant("tenant-a"),
        ),
        (
            "token-b".to_owned(),
            wow_http::TokenBinding::tenant("tenant-b"),
        ),
    ]);
    let s = server_with(HttpConfig {
        auth_tokens: tokens,
        ..HttpConfig::default()
    })
    .await;
    let body = r#"{"name":"Ann","balance":5}"#;
    assert_eq!(
        s.post("/account/x-1/open", &[], body).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        s.post(
            "/account/x-1/open",
            &[("Authorization", "Bearer nope")],
            body
        )
        .await
        .0,
        StatusCode::UNAUTHORIZED
    );
    let (status, answer, _) = s
        .post(
            "/account/x-1/open",
            &[
                ("Authorization", "Bearer token-a"),
                ("Command-Tenant-Id", "tenant-b"),
            ],
            body,
        )
        .await;
    assert_eq!(
        (status, answer["tenantId"].as_str()),
        (StatusCode::OK, Some("tenant-a")),
        "the header cannot override the token"
    );
    assert_eq!(
        s.get("/account/x-1/state", &[("Authorization", "Bearer token-b")])
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        s.get("/account/x-1/state", &[("Authorization", "Bearer token-a")])
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        s.get("/account/x-1/state", &[]).await.0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn a_caller_timeout_is_408_and_the_look_up_later_shows_appended() {
    let store = Arc::new(GatedEventStore::new(Arc::new(InMemoryEventStore::new())));
    let pipeline =
        LocalPipeline::builder(wow_example_bank::registry().unwrap(), store.clone()).build();
    let base = listen(router(HttpState::new(
        &pipeline,
        None,
        HttpConfig::default(),
    )))
    .await;
    let client = Client::new();
    let response = client
        .post(format!("{base}/account/slow-1/open"))
        .header("Command-Request-Id", "open-slow")
        .header("Command-Wait-Timeout", "100")
        .header("content-type", "application/json")
        .body(r#"{"name":"Ann","balance":1}"#)
        .send()
        .await
        .unwrap();
    let (status, body, code) = read(response).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::REQUEST_TIMEOUT, "RequestTimeout")
    );
    assert_eq!(body["requestId"], "open-slow");
    assert_eq!(body["result"]["timeoutMs"], 100);

    // The gateway still holds it: in flight, not "no decision" (a resend is not needed).
    let lookup = format!("{base}/account/slow-1/requests/open-slow");
    let (status, outcome, _) = read(client.get(&lookup).send().await.unwrap()).await;
    assert_eq!(
        (status, outcome["status"].as_str()),
        (StatusCode::ACCEPTED, Some("IN_FLIGHT"))
    );
    store.release(1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, outcome, _) = read(client.get(&lookup).send().await.unwrap()).await;
        if status == StatusCode::OK {
            assert_eq!(outcome["status"], "APPENDED");
            assert_eq!(outcome["commandId"], body["commandId"]);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command never landed"
        );
        tokio::task::yield_now().await;
    }
}

/// A store that cannot be reached: every call fails as unavailable.
#[derive(Debug)]
struct UnreachableStore;

fn unreachable() -> wow_core::eventsourcing::EventStoreError {
    wow_core::eventsourcing::EventStoreError::Unavailable("connection refused".into())
}

#[async_trait::async_trait]
impl History for UnreachableStore {
    async fn append(
        &self,
        _: &wow_core::DomainEventStream,
    ) -> Result<(), wow_core::eventsourcing::EventStoreError> {
        Err(unreachable())
    }

    async fn load(
        &self,
        _: &AggregateId,
        _: u64,
        _: u64,
    ) -> Result<Vec<wow_core::DomainEventStream>, wow_core::eventsourcing::EventStoreError> {
        Err(unreachable())
    }

    async fn load_by_time(
        &self,
        _: &AggregateId,
        _: i64,
        _: i64,
    ) -> Result<Vec<wow_core::DomainEventStream>, wow_core::eventsourcing::EventStoreError> {
        Err(unreachable())
    }

    async fn last(
        &self,
        _: &AggregateId,
    ) -> Result<Option<wow_core::DomainEventStream>, wow_core::eventsourcing::EventStoreError> {
        Err(unreachable())
    }

    async fn scan_aggregate_ids(
        &self,
        _: &wow_core::NamedAggregate,
        _: Option<&AggregateId>,
        _: usize,
    ) -> Result<Vec<AggregateId>, wow_core::eventsourcing::EventStoreError> {
        Err(unreachable())
    }
}

#[async_trait::async_trait]
impl RequestLog for UnreachableStore {
    async fn find_decision(
        &self,
        _: &AggregateId,
        _: &str,
    ) -> Result<
        Option<wow_core::eventsourcing::RequestDecision>,
        wow_core::eventsourcing::EventStoreError,
    > {
        Err(unreachable())
    }

    async fn record_rejection(
        &self,
        _: &AggregateId,
        _: &str,
        _: &wow_core::eventsourcing::RejectionRecord,
    ) -> Result<(), wow_core::eventsourcing::EventStoreError> {
        Err(unreachable())
    }
}

#[async_trait::async_trait]
impl EventFeed for UnreachableStore {
    async fn read_feed(
        &self,
        _: wow_core::eventsourcing::GlobalPosition,
        _: usize,
    ) -> Result<Vec<wow_core::eventsourcing::FeedEntry>, wow_core::eventsourcing::EventStoreError>
    {
        Err(unreachable())
    }
}

impl StreamQueries for UnreachableStore {}

impl KeyIndex for UnreachableStore {}

#[tokio::test]
async fn an_unreachable_store_is_503_and_the_look_up_says_unknown() {
    let pipeline = LocalPipeline::builder(
        wow_example_bank::registry().unwrap(),
        Arc::new(UnreachableStore),
    )
    .build();
    let base = listen(router(HttpState::new(
        &pipeline,
        None,
        HttpConfig::default(),
    )))
    .await;
    let client = Client::new();
    let response = client
        .post(format!("{base}/account/down-1/open"))
        .header("Command-Request-Id", "open-down")
        .header("content-type", "application/json")
        .body(r#"{"name":"Ann","balance":1}"#)
        .send()
        .await
        .unwrap();
    let (status, body, code) = read(response).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"),
        "{body}"
    );
    assert_eq!(
        body["requestId"], "open-down",
        "the ids survive the failure"
    );
    let (status, outcome, _) = read(
        client
            .get(format!("{base}/account/down-1/requests/open-down"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, outcome["status"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("UNKNOWN"))
    );
}

/// A projection that fails while its switch is on.
#[derive(Debug, Default)]
struct Switchable {
    failing: std::sync::atomic::AtomicBool,
    applied: std::sync::Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl wow_core::event::EventConsumer for Switchable {
    fn name(&self) -> &str {
        "switchable"
    }

    async fn handle(
        &self,
        stream: &wow_core::DomainEventStream,
    ) -> Result<(), wow_core::event::ConsumerError> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(wow_core::event::ConsumerError::new(
                wow_core::ErrorCode::ServiceUnavailable,
                "the view is down",
            ));
        }
        self.applied.lock().unwrap().push(stream.id.clone());
        Ok(())
    }
}

#[tokio::test]
async fn compensation_routes_list_failures_and_retry_one() {
    use wow_core::compensation::{InMemoryCompensationStore, RetrySpec};

    let projection = Arc::new(Switchable::default());
    projection
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let failures = Arc::new(InMemoryCompensationStore::new());
    let pipeline = LocalPipeline::builder(wow_example_bank::registry().unwrap(), store.clone())
        .projection(projection.clone())
        .compensation(failures.clone(), RetrySpec::default())
        .build();
    let server = Server {
        base: listen(router(HttpState::new(
            &pipeline,
            None,
            HttpConfig::default(),
        )))
        .await,
        client: Client::new(),
        store: store.clone(),
        _bank: None,
    };
    let open = r#"{"name":"Ann","balance":1}"#;
    for (id, tenant) in [("c-1", "t-a"), ("c-2", "t-b")] {
        let headers = [
            ("Command-Wait-Stage", "PROJECTED"),
            ("Command-Tenant-Id", tenant),
        ];
        let (status, body, code) = server
            .post(&format!("/account/{id}/open"), &headers, open)
            .await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"),
            "{body}"
        );
    }

    let all = the_failures_are_listed_per_tenant(&server).await;
    the_lag_is_in_health_and_metrics_json(&server).await;
    projection
        .failing
        .store(false, std::sync::atomic::Ordering::SeqCst);
    a_retry_reruns_its_stream_once_in_its_own_tenant(&server, &projection, &all).await;
    a_skip_is_recorded_and_never_runs_the_stream(&server, &projection, &all).await;
    a_record_of_a_retired_consumer_is_kept_and_refused(&server, &failures).await;
}

/// An operator's skip (SPEC DS-5) marks the record SKIPPED with who did it, runs nothing,
/// leaves nothing failed, and a second skip answers the record as it stands.
async fn a_skip_is_recorded_and_never_runs_the_stream(
    server: &Server,
    projection: &Switchable,
    all: &[Value],
) {
    let skip = format!(
        "/compensation/failures/{}/skip",
        all[1]["id"].as_str().unwrap()
    );
    let (status, lanes) = server.get("/compensation/parked", &[]).await;
    assert_eq!(status, StatusCode::OK, "{lanes}");
    assert_eq!(lanes.as_array().unwrap().len(), 1, "{lanes}");
    assert_eq!(lanes[0]["consumer"], "switchable");
    assert_eq!(lanes[0]["aggregateId"]["aggregateId"], "c-2");
    assert_eq!(
        (
            lanes[0]["headVersion"].as_u64(),
            lanes[0]["parked"].as_u64()
        ),
        (Some(1), Some(0))
    );
    let (_, theirs) = server
        .get("/compensation/parked", &[("Command-Tenant-Id", "t-a")])
        .await;
    assert_eq!(theirs.as_array().unwrap().len(), 0, "another tenant's lane");

    let (status, skipped, _) = server.post(&skip, &[], "").await;
    assert_eq!(status, StatusCode::OK, "{skipped}");
    assert_eq!(skipped["status"], "SKIPPED");
    assert_eq!(skipped["skippedBy"], "operator");
    assert_eq!(
        projection.applied.lock().unwrap().len(),
        1,
        "the skipped stream never ran"
    );
    let (_, lanes) = server.get("/compensation/parked", &[]).await;
    assert_eq!(
        lanes.as_array().unwrap().len(),
        0,
        "the skip closed the lane"
    );
    let (status, again, _) = server.post(&skip, &[], "").await;
    assert_eq!((status, &again), (StatusCode::OK, &skipped));
    let (_, failed) = server
        .get("/compensation/failures?status=FAILED", &[])
        .await;
    assert_eq!(failed.as_array().unwrap().len(), 0);
    let (_, listed) = server
        .get("/compensation/failures?status=skipped", &[])
        .await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let (status, _, _) = server
        .post("/compensation/failures/nope/skip", &[], "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The failures route lists every record, a tenant's own with its header, and refuses a bad
/// filter. Every record.
async fn the_failures_are_listed_per_tenant(server: &Server) -> Vec<Value> {
    let (status, all) = server.get("/compensation/failures", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let all = all.as_array().unwrap().clone();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["consumer"], "switchable");
    assert_eq!(all[0]["status"], "FAILED");
    assert_eq!(all[0]["attempts"], 1);
    assert_eq!(all[0]["stage"], "PROJECTED");
    assert_eq!(all[0]["errorCode"], "ServiceUnavailable");
    assert_eq!(all[0]["aggregateId"]["aggregateId"], "c-1");

    let (_, mine) = server
        .get(
            "/compensation/failures?status=failed",
            &[("Command-Tenant-Id", "t-b")],
        )
        .await;
    assert_eq!(
        mine.as_array().unwrap().len(),
        1,
        "a tenant sees its own records"
    );
    assert_eq!(mine[0]["aggregateId"]["aggregateId"], "c-2");

    for (query, ids, total) in [
        ("limit=1", vec!["c-1"], "2"),
        ("aggregateId=c-2", vec!["c-2"], "1"),
        ("aggregate=account&aggregateId=c-1", vec!["c-1"], "1"),
        ("aggregate=order&aggregateId=c-1", vec![], "0"),
    ] {
        let response = server
            .client
            .get(format!("{}/compensation/failures?{query}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{query}");
        assert_eq!(
            response.headers()[wow_http::TOTAL_HEADER],
            total,
            "{query}: the total of every page"
        );
        let page: Value = response.json().await.unwrap();
        let listed: Vec<_> = page
            .as_array()
            .unwrap()
            .iter()
            .map(|record| record["aggregateId"]["aggregateId"].as_str().unwrap())
            .collect();
        assert_eq!(listed, ids, "{query}");
    }
    for bad in ["status=BROKEN", "limit=0", "limit=5000", "colour=red"] {
        let (status, body) = server
            .get(&format!("/compensation/failures?{bad}"), &[])
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["errorCode"], "BadRequest");
    }
    all
}

/// SPEC DS-6: each consumer's lag in `/health`'s details (auth off, no tenant named) and in
/// `/metrics.json`: two failed streams, nothing parked behind them.
async fn the_lag_is_in_health_and_metrics_json(server: &Server) {
    let (status, health) = server.get("/health", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let (_, metrics) = server.get("/metrics.json", &[]).await;
    for lag in [&health["details"]["consumerLag"], &metrics["consumerLag"]] {
        assert_eq!(lag.as_array().map(Vec::len), Some(1), "{lag}");
        assert_eq!(lag[0]["consumer"], "switchable");
        assert_eq!(lag[0]["streamsBehind"], 2, "{lag}");
        assert_eq!(lag[0]["parkedStreams"], 0);
        assert_eq!(lag[0]["failuresWaiting"], 2);
        assert!(lag[0]["oldestUnhandledMs"].as_i64().unwrap() >= 0);
    }
    let (_, named) = server.get("/health", &[("Command-Tenant-Id", "t-a")]).await;
    assert!(named["details"]["consumerLag"].is_null(), "{named}");
}

/// The route retrying one record.
fn retry_route(id: &str) -> String {
    format!("/compensation/failures/{id}/retry")
}

/// A retry reruns exactly that stream, once; another tenant's record, or an unknown one, is not
/// there; the other record stays failed.
async fn a_retry_reruns_its_stream_once_in_its_own_tenant(
    server: &Server,
    projection: &Switchable,
    all: &[Value],
) {
    let (status, retried, _) = server
        .post(&retry_route(all[0]["id"].as_str().unwrap()), &[], "")
        .await;
    assert_eq!(status, StatusCode::OK, "{retried}");
    assert_eq!(retried["status"], "SUCCEEDED");
    assert_eq!(
        projection.applied.lock().unwrap().len(),
        1,
        "exactly that stream, once"
    );

    let (status, _, _) = server
        .post(
            &retry_route(all[1]["id"].as_str().unwrap()),
            &[("Command-Tenant-Id", "t-a")],
            "",
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another tenant's record is not there"
    );
    let (status, _, _) = server.post(&retry_route("nope"), &[], "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, failed) = server
        .get("/compensation/failures?status=FAILED", &[])
        .await;
    assert_eq!(failed.as_array().unwrap().len(), 1);
}

/// A record whose consumer this service no longer runs cannot be retried: 409, kept.
async fn a_record_of_a_retired_consumer_is_kept_and_refused(
    server: &Server,
    failures: &wow_core::compensation::InMemoryCompensationStore,
) {
    use wow_core::compensation::{CompensationStore, FailedExecution, RetrySpec};

    let c1 = AggregateId::new("bank", "account", "c-1", "t-a");
    let stream = server.store.last(&c1).await.unwrap().unwrap();
    let gone = FailedExecution::of(
        "retired_view",
        wow_core::CommandStage::Projected,
        &stream,
        wow_core::event::ConsumerError::internal("down"),
    );
    let orphan = failures
        .record_failure(&gone, &RetrySpec::default(), 0)
        .await
        .unwrap();
    let (status, body, _) = server.post(&retry_route(&orphan.id), &[], "").await;
    assert_eq!(
        (status, body["errorCode"].as_str()),
        (StatusCode::CONFLICT, Some("IllegalState")),
        "{body}"
    );
    assert!(
        body["errorMsg"].as_str().unwrap().contains("retired_view"),
        "{body}"
    );
    assert_eq!(failures.get(&orphan.id).await.unwrap(), Some(orphan));
}

/// Posts `body` to `path` and returns the status, the body and the `Wow-Replayed` header.
async fn post_replayed(
    s: &Server,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, Value, Option<String>) {
    let mut request = s
        .client
        .post(format!("{}{path}", s.base))
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let replayed = response
        .headers()
        .get("wow-replayed")
        .map(|v| v.to_str().unwrap().to_owned());
    let (status, body, _) = read(response).await;
    (status, body, replayed)
}

#[tokio::test]
async fn a_rejected_withdraw_resent_with_its_request_id_gets_the_original_rejection() {
    let s = server().await;
    s.open("acc-r", 10).await;
    let headers = [("Command-Request-Id", "withdraw-r-1")];
    let (status, first, replayed) =
        post_replayed(&s, "/account/acc-r/withdraw", &headers, r#"{"amount":500}"#).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{first}");
    assert_eq!(first["errorCode"], "InsufficientBalance");
    assert_eq!(
        replayed, None,
        "the first answer is a decision, not a replay"
    );

    // The balance would now allow it: the handler must not run again (SPEC ID-6).
    let (status, _, _) = s
        .post("/account/acc-r/deposit", &[], r#"{"amount":1000}"#)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, again, replayed) =
        post_replayed(&s, "/account/acc-r/withdraw", &headers, r#"{"amount":500}"#).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{again}");
    assert_eq!(again["errorCode"], "InsufficientBalance");
    assert_eq!(again["errorMsg"], first["errorMsg"]);
    assert_eq!(replayed.as_deref(), Some("true"));
    assert_eq!(again["result"]["originalCommandId"], first["commandId"]);
    assert_eq!(again["result"]["replayed"], true);
    assert_eq!(
        again["aggregateVersion"], 1,
        "the version it was decided on"
    );
    assert_ne!(again["commandId"], first["commandId"], "a new message");

    let (status, reused, replayed) =
        post_replayed(&s, "/account/acc-r/withdraw", &headers, r#"{"amount":5}"#).await;
    assert_eq!(
        (status, reused["errorCode"].as_str()),
        (StatusCode::CONFLICT, Some("RequestIdReused")),
        "{reused}"
    );
    assert_eq!(replayed, None);

    let (status, found) = s.get("/account/acc-r/requests/withdraw-r-1", &[]).await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert_eq!(found["status"], "REJECTED");
    assert_eq!(found["errorCode"], "InsufficientBalance");
    assert_eq!(found["errorMsg"], first["errorMsg"]);
    assert_eq!(found["commandId"], first["commandId"]);
    assert_eq!(found["version"], 1);
    assert!(found["createTime"].as_i64().is_some(), "{found}");
    assert_eq!(s.history("acc-r").await, 2, "open and deposit only");
}

#[tokio::test]
async fn a_replayed_rejection_keeps_the_status_of_its_original_code() {
    let s = server().await;
    s.open("acc-e", 1).await;
    let cases = [
        (
            "/account/nobody-e/deposit",
            "dep-missing",
            r#"{"amount":1}"#,
            StatusCode::NOT_FOUND,
            "NotFound",
        ),
        (
            "/account/acc-e/open",
            "open-again",
            r#"{"name":"Bob","balance":1}"#,
            StatusCode::CONFLICT,
            "DuplicateAggregateId",
        ),
    ];
    for (path, request_id, body, status, code) in cases {
        let headers = [("Command-Request-Id", request_id)];
        let (got, first, _) = post_replayed(&s, path, &headers, body).await;
        assert_eq!((got, first["errorCode"].as_str()), (status, Some(code)));
        let (got, again, replayed) = post_replayed(&s, path, &headers, body).await;
        assert_eq!(
            (got, again["errorCode"].as_str()),
            (status, Some(code)),
            "{again}"
        );
        assert_eq!(replayed.as_deref(), Some("true"), "{path}");
        assert_eq!(again["result"]["originalCommandId"], first["commandId"]);
    }
}

#[tokio::test]
async fn the_look_up_answers_none_for_a_request_id_nobody_sent() {
    let s = server().await;
    s.open("acc-n", 1).await;
    let (status, found) = s.get("/account/acc-n/requests/never-sent", &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(found, json!({"status": "NONE"}));
    // Another tenant's request id is not seen (SPEC TN-1).
    let (status, _, _) = s
        .post(
            "/account/acc-n/deposit",
            &[("Command-Request-Id", "dep-n")],
            r#"{"amount":1}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, found) = s
        .get(
            "/account/acc-n/requests/dep-n",
            &[("Command-Tenant-Id", "tenant-x")],
        )
        .await;
    assert_eq!(
        (status, found["status"].as_str()),
        (StatusCode::NOT_FOUND, Some("NONE")),
        "another tenant's append: {found}"
    );
    let (status, _, _) = s
        .post(
            "/account/acc-n/withdraw",
            &[("Command-Request-Id", "w-n")],
            r#"{"amount":500}"#,
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        s.get("/account/acc-n/requests/w-n", &[]).await.1["status"],
        "REJECTED"
    );
    let (status, found) = s
        .get(
            "/account/acc-n/requests/w-n",
            &[("Command-Tenant-Id", "tenant-x")],
        )
        .await;
    assert_eq!(
        (status, found["status"].as_str()),
        (StatusCode::NOT_FOUND, Some("NONE")),
        "another tenant's rejection: {found}"
    );
}

#[tokio::test]
async fn a_request_id_with_a_slash_is_looked_up_as_itself() {
    let s = server().await;
    s.open("acc-s", 1).await;
    let request_id = "0192a0b1-0000-7000-8000-000000000001/0";
    let (status, sent, _) = s
        .post(
            "/account/acc-s/deposit",
            &[("Command-Request-Id", request_id)],
            r#"{"amount":2}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{sent}");
    let (status, found) = s
        .get(
            "/account/acc-s/requests/0192a0b1-0000-7000-8000-000000000001%2F0",
            &[],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert_eq!(found["status"], "APPENDED");
    assert_eq!(found["commandId"], sent["commandId"]);
    assert_eq!(found["stream"]["requestId"], request_id);
}

#[tokio::test]
async fn a_create_without_an_id_resent_with_its_request_id_opens_one_aggregate() {
    let s = server().await;
    let headers = [("Command-Request-Id", "open-unnamed-1")];
    let body = r#"{"name":"Ann","balance":4}"#;
    let (status, first, _) = s.post("/account/open", &headers, body).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let id = first["aggregateId"].as_str().unwrap().to_owned();
    assert_eq!(
        id,
        wow_http::derived_aggregate_id("(0)", "account", "open-unnamed-1")
    );

    let (status, again, code) = s.post("/account/open", &headers, body).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "DuplicateRequestId"),
        "{again}"
    );
    assert_eq!(again["aggregateId"], id.as_str());
    assert_eq!(again["aggregateVersion"], 1);
    assert_eq!(again["result"]["originalCommandId"], first["commandId"]);

    let named = wow_core::NamedAggregate::new("bank", "account");
    let aggregates = s.store.scan_aggregate_ids(&named, None, 100).await.unwrap();
    assert_eq!(
        aggregates.len(),
        1,
        "one intent, one aggregate: {aggregates:?}"
    );
    assert_eq!(s.history(&id).await, 1);

    // Another intent, or the same request id in another tenant, opens its own aggregate.
    let (status, other, _) = s
        .post(
            "/account/open",
            &[("Command-Request-Id", "open-unnamed-2")],
            body,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_ne!(other["aggregateId"], id.as_str());
    let (status, elsewhere, _) = s
        .post(
            "/account/open",
            &[
                ("Command-Request-Id", "open-unnamed-1"),
                ("Command-Tenant-Id", "tenant-b"),
            ],
            body,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{elsewhere}");
    assert_ne!(elsewhere["aggregateId"], id.as_str());
}

#[tokio::test]
async fn a_void_command_without_a_stage_header_waits_for_sent() {
    let s = server().await;
    let (status, body, code) = s
        .post("/audit/log-1/note", &[], r#"{"text":"checked the vault"}"#)
        .await;
    assert_eq!((status, code.as_str()), (StatusCode::OK, "Ok"), "{body}");
    assert_eq!(body["stage"], "SENT");
    let (status, body, code) = s
        .post(
            "/audit/log-1/note",
            &[("Command-Wait-Stage", "PROCESSED")],
            r#"{"text":"again"}"#,
        )
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "IllegalArgument"),
        "an explicit later stage is still refused: {body}"
    );
    // A command with a kind of its own still waits for PROCESSED by default.
    s.open("acc-v", 1).await;
    let (_, body, _) = s
        .post("/account/acc-v/deposit", &[], r#"{"amount":1}"#)
        .await;
    assert_eq!(body["stage"], "PROCESSED");
}

/// SPEC ID-3, RQ-12 over HTTP (the issue's curl against `wow serve`): a void command to
/// `n2` with the request id already used on `n1` is sent; only the exact resend to `n1`
/// within the window is refused 409 DuplicateRequestId, not sent.
#[tokio::test]
async fn a_void_command_with_a_request_id_used_on_another_aggregate_is_sent() {
    let s = server().await;
    let headers = [("Command-Request-Id", "note-r1")];
    let body = r#"{"text":"checked the vault"}"#;
    for path in ["/audit/n1/note", "/audit/n2/note"] {
        let (status, answer, code) = s.post(path, &headers, body).await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::OK, "Ok"),
            "{path}: {answer}"
        );
        assert_eq!(answer["stage"], "SENT");
        assert_eq!(answer["result"]["sent"], true);
    }
    let (status, answer, code) = s.post("/audit/n1/note", &headers, body).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "DuplicateRequestId"),
        "{answer}"
    );
    assert_eq!(answer["result"]["sent"], false);
}

#[tokio::test]
async fn openapi_documents_the_look_up_void_stages_and_creates_without_an_id() {
    let s = server().await;
    let (status, doc) = s.get("/openapi.json", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let stage = |path: &str| {
        doc["paths"][path]["post"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "Command-Wait-Stage")
            .cloned()
            .unwrap()
    };
    let void = stage("/audit/{id}/note");
    assert_eq!(void["schema"]["enum"], json!(["SENT"]));
    assert_eq!(void["schema"]["default"], "SENT");
    assert_eq!(
        stage("/account/{id}/deposit")["schema"]["default"],
        "PROCESSED"
    );
    let create = &doc["paths"]["/account/open"]["post"];
    let named = create["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "Command-Aggregate-Id")
        .unwrap();
    assert!(
        named["description"]
            .as_str()
            .unwrap()
            .contains("derived from (tenant, aggregate name, request id)"),
        "{named}"
    );
    assert!(doc["paths"]["/account/deposit"].is_null(), "only creates");
    let responses = &doc["paths"]["/account/{id}/requests/{requestId}"]["get"]["responses"];
    for (status, name) in [("202", "IN_FLIGHT"), ("404", "NONE"), ("503", "UNKNOWN")] {
        assert_eq!(
            responses[status]["content"]["application/json"]["schema"]["properties"]["status"]
                ["enum"],
            json!([name]),
            "{status}"
        );
    }
    let decided = &responses["200"]["content"]["application/json"]["schema"]["oneOf"];
    assert_eq!(
        decided[1]["properties"]["status"]["enum"],
        json!(["REJECTED"])
    );
}

/// How [`StreamsLost`] answers loads.
const LOADS_PASS: u8 = 0;
const LOADS_FIND_NOTHING: u8 = 1;
const LOADS_FAIL: u8 = 2;

/// A store whose decisions survive but whose streams cannot be read, once switched: the
/// look-up must then say UNKNOWN, never NONE.
#[derive(Debug)]
struct StreamsLost<S> {
    inner: S,
    loads: std::sync::atomic::AtomicU8,
}

#[async_trait::async_trait]
impl<S: EventStore> wow_core::eventsourcing::EventStoreDecorator for StreamsLost<S> {
    fn inner(&self) -> &dyn EventStore {
        &self.inner
    }

    async fn load(
        &self,
        id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<wow_core::DomainEventStream>, wow_core::eventsourcing::EventStoreError> {
        match self.loads.load(std::sync::atomic::Ordering::SeqCst) {
            LOADS_FIND_NOTHING => Ok(Vec::new()),
            LOADS_FAIL => Err(wow_core::eventsourcing::EventStoreError::Unavailable(
                "connection reset".into(),
            )),
            _ => self.inner.load(id, head, tail).await,
        }
    }
}

#[tokio::test]
async fn streams_lost_passes_every_method_to_the_inner_store_until_switched() {
    use wow_core::eventsourcing::{EventStoreMethod, RecordingEventStore};
    let store = StreamsLost {
        inner: RecordingEventStore::new(),
        loads: std::sync::atomic::AtomicU8::new(LOADS_PASS),
    };
    assert_eq!(
        store.inner.trace(&store).await,
        EventStoreMethod::forwarded_trace()
    );
    for switched in [LOADS_FIND_NOTHING, LOADS_FAIL] {
        store
            .loads
            .store(switched, std::sync::atomic::Ordering::SeqCst);
        let mut expected = EventStoreMethod::forwarded_trace();
        expected.insert(EventStoreMethod::Load, Vec::new());
        assert_eq!(store.inner.trace(&store).await, expected, "{switched}");
    }
}

#[tokio::test]
async fn an_appended_request_whose_stream_cannot_be_read_is_unknown_never_none() {
    let store = Arc::new(StreamsLost {
        inner: InMemoryEventStore::new(),
        loads: std::sync::atomic::AtomicU8::new(LOADS_PASS),
    });
    let pipeline =
        LocalPipeline::builder(wow_example_bank::registry().unwrap(), store.clone()).build();
    let base = listen(router(HttpState::new(
        &pipeline,
        None,
        HttpConfig::default(),
    )))
    .await;
    let client = Client::new();
    let (status, body, _) = read(
        client
            .post(format!("{base}/account/lost-1/open"))
            .header("Command-Request-Id", "open-lost")
            .header("content-type", "application/json")
            .body(r#"{"name":"Ann","balance":1}"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let lookup = format!("{base}/account/lost-1/requests/open-lost");
    for mode in [LOADS_FIND_NOTHING, LOADS_FAIL] {
        store.loads.store(mode, std::sync::atomic::Ordering::SeqCst);
        let (status, found, _) = read(client.get(&lookup).send().await.unwrap()).await;
        assert_eq!(
            (status, found["status"].as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("UNKNOWN")),
            "loads mode {mode}: {found}"
        );
    }
}

#[tokio::test]
async fn commands_only_sagas_send_are_not_routed_and_the_saga_still_sends_them() {
    let s = server().await;
    s.open("int-a", 100).await;
    s.open("int-b", 0).await;
    for command in ["receive_transfer", "confirm_transfer", "cancel_transfer"] {
        let body = if command == "receive_transfer" {
            r#"{"from":"nobody","amount":1000000}"#
        } else {
            r#"{"to":"int-b","amount":1}"#
        };
        let (status, answer, code) = s
            .post(&format!("/account/int-b/{command}"), &[], body)
            .await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::NOT_FOUND, "NotFound"),
            "{command}: {answer}"
        );
    }
    assert_eq!(s.history("int-b").await, 1, "no money from nothing");
    let (_, openapi) = s.get("/openapi.json", &[]).await;
    let paths = openapi["paths"].as_object().unwrap();
    assert!(paths.keys().any(|path| path.ends_with("/transfer")));
    for internal in ["receive_transfer", "confirm_transfer", "cancel_transfer"] {
        assert!(
            !paths.keys().any(|path| path.ends_with(internal)),
            "{internal} is not in OpenAPI"
        );
    }

    let (status, done, _) = s
        .post(
            "/account/int-a/transfer",
            &[("Command-Wait-Stage", "SAGA_HANDLED")],
            r#"{"to":"int-b","amount":30}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["result"]["commands"][0]["command"], "receive_transfer");
    assert_eq!(done["result"]["commands"][1]["command"], "confirm_transfer");
    assert_eq!(s.history("int-b").await, 2, "credited by the saga");
}

#[tokio::test]
async fn a_deposit_that_would_overflow_is_a_recorded_422_and_appends_nothing() {
    let s = server().await;
    s.open("full", i64::MAX).await;
    let headers = [("Command-Request-Id", "one-more")];
    let (status, answer, code) = s
        .post("/account/full/deposit", &headers, r#"{"amount":1}"#)
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "BalanceOverflow"),
        "{answer}"
    );
    assert_eq!(s.history("full").await, 1);
    let (_, found) = s.get("/account/full/requests/one-more", &[]).await;
    assert_eq!(
        (found["status"].as_str(), found["errorCode"].as_str()),
        (Some("REJECTED"), Some("BalanceOverflow"))
    );
    let (_, state) = s.get("/account/full/state", &[]).await;
    assert_eq!(state["balance"], i64::MAX, "{state}");

    // A transfer into the full account is cancelled: the source gets its hold back.
    s.open("payer", 10).await;
    let (status, done, _) = s
        .post(
            "/account/payer/transfer",
            &[("Command-Wait-Stage", "SAGA_HANDLED")],
            r#"{"to":"full","amount":5}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["result"]["commands"][1]["command"], "cancel_transfer");
    let (_, payer) = s.get("/account/payer/state", &[]).await;
    assert_eq!(
        (payer["balance"].as_i64(), payer["held"].as_i64()),
        (Some(10), Some(0)),
        "{payer}"
    );
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_with_a_code() {
    let s = server().await;
    let client = &s.client;
    for (method, path, status) in [
        (reqwest::Method::GET, "/nope/x/view", StatusCode::NOT_FOUND),
        (reqwest::Method::GET, "/nope", StatusCode::NOT_FOUND),
        (reqwest::Method::POST, "/a/b/c/d/e", StatusCode::NOT_FOUND),
        (
            reqwest::Method::GET,
            "/account/x/deposit",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            reqwest::Method::DELETE,
            "/health",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
    ] {
        let response = client
            .request(method.clone(), format!("{}{path}", s.base))
            .send()
            .await
            .unwrap();
        let (got, body, code) = read(response).await;
        assert_eq!(got, status, "{method} {path}: {body}");
        assert_eq!(body["errorCode"].as_str(), Some(code.as_str()), "{body}");
        assert!(!code.is_empty(), "{method} {path} has Wow-Error-Code");
        assert!(body["errorMsg"].as_str().is_some_and(|m| !m.is_empty()));
    }
}

#[tokio::test]
async fn a_401_challenges_for_a_bearer_token_and_reads_the_scheme_in_any_case() {
    let s = server_with(HttpConfig {
        auth_tokens: HashMap::from([(
            "token-a".to_owned(),
            wow_http::TokenBinding::tenant("tenant-a"),
        )]),
        ..HttpConfig::default()
    })
    .await;
    let response = s
        .client
        .get(format!("{}/account/x/state", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer")
    );
    let (_, body, code) = read(response).await;
    assert_eq!(
        (body["errorCode"].as_str(), code.as_str()),
        (Some("Unauthorized"), "Unauthorized")
    );
    let (status, body, _) = s
        .post(
            "/account/x/open",
            &[("Authorization", "bearer token-a")],
            r#"{"name":"Ann","balance":5}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_tenant_id_follows_the_id_rules() {
    let s = server().await;
    let body = r#"{"name":"Ann","balance":5}"#;
    let long = "t".repeat(129);
    for tenant in ["../x y", "a\tb", long.as_str()] {
        let (status, answer, code) = s
            .post("/account/t-1/open", &[("Command-Tenant-Id", tenant)], body)
            .await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::BAD_REQUEST, "IllegalArgument"),
            "{tenant:?}: {answer}"
        );
        // The answer keeps the command's ids (SPEC ID-4) and names the header.
        assert_eq!(answer["aggregateId"], "t-1", "{answer}");
        assert_eq!(answer["aggregateName"], "account");
        assert_eq!(answer["bindingErrors"][0]["name"], "Command-Tenant-Id");
        let (status, _) = s
            .get("/account/t-1/state", &[("Command-Tenant-Id", tenant)])
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{tenant:?}");
    }
    let (status, answer, _) = s
        .post(
            "/account/t-1/open",
            &[("Command-Tenant-Id", "tenant-ok.1")],
            body,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["tenantId"], "tenant-ok.1");
}

#[tokio::test]
async fn a_body_that_repeats_a_key_is_400_and_records_nothing() {
    let s = server().await;
    s.open("dup-1", 5).await;
    let (status, answer, code) = s
        .post(
            "/account/dup-1/deposit",
            &[],
            r#"{"amount":1,"amount":1000}"#,
        )
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "BadRequest"),
        "{answer}"
    );
    assert!(
        answer["errorMsg"]
            .as_str()
            .unwrap()
            .contains("duplicate key"),
        "{answer}"
    );
    assert_eq!(s.history("dup-1").await, 1);
}

/// A request id that needs escaping in a path (`%`, `/`, a space) is looked up as itself
/// under every prefix Wow's clients put first (`/{context}/`, `/tenant/{t}/`,
/// `/owner/{o}/`, and nested): the path is decoded once, never twice.
#[tokio::test]
async fn a_request_id_that_needs_escaping_is_looked_up_as_itself_under_every_prefix() {
    let s = server().await;
    let (status, opened, _) = s
        .post(
            "/owner/u1/account/acc-esc/open",
            &[],
            &json!({"name": "Ann", "balance": 1}).to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{opened}");
    let request_id = "50%off/a b";
    let (status, sent, _) = s
        .post(
            "/owner/u1/account/acc-esc/deposit",
            &[("Command-Request-Id", request_id)],
            r#"{"amount":2}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{sent}");
    let escaped = "50%25off%2Fa%20b";
    for prefix in [
        "",
        "/bank",
        "/tenant/(0)",
        "/owner/u1",
        "/bank/tenant/(0)",
        "/bank/tenant/(0)/owner/u1",
        "/tenant/(0)/owner/u1",
    ] {
        let (status, found) = s
            .get(&format!("{prefix}/account/acc-esc/requests/{escaped}"), &[])
            .await;
        assert_eq!(status, StatusCode::OK, "{prefix}: {found}");
        assert_eq!(found["status"], "APPENDED", "{prefix}");
        assert_eq!(found["commandId"], sent["commandId"], "{prefix}");
    }
}
/// A look-up of a request id no command can carry (past 128 bytes, or not visible ASCII) is
/// 400 `IllegalArgument` under every prefix, not `NONE`: `NONE` would say a resend is safe.
/// One of 128 bytes is looked up (and is `NONE` here).
#[tokio::test]
async fn a_request_id_no_command_can_carry_is_a_400_to_look_up() {
    let s = server().await;
    let (status, opened, _) = s
        .post(
            "/account/acc-long/open",
            &[],
            &json!({"name": "Ann", "balance": 1}).to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{opened}");
    for prefix in ["", "/bank", "/tenant/(0)", "/owner/u1"] {
        for bad in [
            "x".repeat(129),
            "caf%C3%A9".to_owned(),
            "a%09b".to_owned(),
            "%20%20".to_owned(),
        ] {
            let (status, found) = s
                .get(&format!("{prefix}/account/acc-long/requests/{bad}"), &[])
                .await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{prefix} {bad}: {found}");
            assert_eq!(found["errorCode"], "IllegalArgument", "{prefix} {bad}");
        }
        let (status, found) = s
            .get(
                &format!("{prefix}/account/acc-long/requests/{}", "x".repeat(128)),
                &[],
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{prefix}: {found}");
        assert_eq!(found["status"], "NONE", "{prefix}");
    }
}

/// With auth on, a request with two `Authorization` headers is 400 `BadRequest` whichever
/// comes first: the server does not guess which token acts, and nothing is recorded.
#[tokio::test]
async fn two_authorization_headers_are_a_400() {
    let tokens = HashMap::from([
        (
            "token-a".to_owned(),
            wow_http::TokenBinding::tenant("tenant-a"),
        ),
        (
            "token-b".to_owned(),
            wow_http::TokenBinding::tenant("tenant-b"),
        ),
    ]);
    let s = server_with(HttpConfig {
        auth_tokens: tokens,
        ..HttpConfig::default()
    })
    .await;
    let body = r#"{"name":"Ann","balance":5}"#;
    for pair in [
        [
            ("Authorization", "Bearer token-a"),
            ("Authorization", "Bearer token-b"),
        ],
        [
            ("Authorization", "Bearer token-a"),
            ("Authorization", "Bearer nope"),
        ],
    ] {
        let (status, answer, code) = s.post("/account/two-1/open", &pair, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert_eq!(code, "BadRequest", "{answer}");
        let (status, answer) = s.get("/account/two-1/state", &pair).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    }
    let (status, _, _) = s
        .post(
            "/account/two-1/open",
            &[("Authorization", "Bearer token-a")],
            body,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "nothing was recorded by the refused opens"
    );
}

/// SPEC DS-5 with auth on: a skip needs an operator's bearer token (a tenant's token and no
/// token are refused, and the record stays FAILED); the operator names the tenant, and the
/// record names the operator by its token's fingerprint.
#[tokio::test]
async fn a_skip_needs_the_operators_token_and_the_lag_shows_what_is_held_back() {
    let (server, _pipeline) = a_service_with_auth_and_a_failing_view().await;
    let tenant = [("Authorization", "Bearer ta")];
    let (status, _, _) = server
        .post(
            "/account/s-1/open",
            &tenant,
            r#"{"name":"Ann","balance":1}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let failed = the_one_failed_record(&server).await;
    let parked = [
        ("Authorization", "Bearer ta"),
        ("Command-Wait-Stage", "PROJECTED"),
    ];
    let (status, body, code) = server
        .post("/account/s-1/deposit", &parked, r#"{"amount":5}"#)
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "StreamParked"),
        "{body}"
    );
    the_lag_is_in_the_metrics(&server, [2, 1, 1]).await;
    let skip = format!("/compensation/failures/{failed}/skip");
    for refused in [&[][..], &tenant[..]] {
        let (status, body, _) = server.post(&skip, refused, "").await;
        assert!(
            status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN,
            "{status}: {body}"
        );
    }
    let (_, still) = server
        .get(&format!("/compensation/failures/{failed}"), &tenant)
        .await;
    assert_eq!(still["failure"]["status"], "FAILED");

    let operator = [("Authorization", "Bearer op"), ("Command-Tenant-Id", "t-a")];
    let (status, skipped, _) = server.post(&skip, &operator, "").await;
    assert_eq!(status, StatusCode::OK, "{skipped}");
    assert_eq!(skipped["status"], "SKIPPED");
    let by = skipped["skippedBy"].as_str().unwrap();
    assert!(
        by.starts_with("operator:") && by.len() == "operator:".len() + 64,
        "{by}"
    );
    let elsewhere = [("Authorization", "Bearer op"), ("Command-Tenant-Id", "t-b")];
    let (status, _, _) = server.post(&skip, &elsewhere, "").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another tenant's record is not there"
    );
    // The parked deposit ran, and fails in turn (the view is still down): it heads the lane.
    the_lag_is_in_the_metrics(&server, [1, 0, 1]).await;
}

/// SPEC DS-6: `/metrics` has the consumer's streams behind, parked streams and failures
/// waiting (`expected`, in that order), and the age of the oldest one it holds back.
async fn the_lag_is_in_the_metrics(server: &Server, expected: [u64; 3]) {
    let response = server
        .client
        .get(format!("{}/metrics", server.base))
        .header("Authorization", "Bearer op")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    let sample = |name: &str| -> f64 {
        let line = format!("{name}{{consumer=\"switchable\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(line.as_str()))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .parse()
            .unwrap()
    };
    let found = [
        sample("wow_consumer_streams_behind") as u64,
        sample("wow_consumer_parked_streams") as u64,
        sample("wow_consumer_failures_waiting") as u64,
    ];
    assert_eq!(found, expected, "{text}");
    assert!(sample("wow_consumer_oldest_unhandled_age_seconds") >= 0.0);
    assert!(text.contains("# TYPE wow_consumer_streams_behind gauge"));
}

/// A bank whose projection fails, behind auth: tenant token `ta` (tenant `t-a`) and operator
/// token `op`. The pipeline must live as long as the server.
async fn a_service_with_auth_and_a_failing_view() -> (Server, LocalPipeline) {
    use wow_core::compensation::{InMemoryCompensationStore, RetrySpec};

    let projection = Arc::new(Switchable::default());
    projection
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let pipeline = LocalPipeline::builder(wow_example_bank::registry().unwrap(), store.clone())
        .projection(projection.clone())
        .compensation(
            Arc::new(InMemoryCompensationStore::new()),
            RetrySpec::default(),
        )
        .build();
    let config = HttpConfig {
        auth_tokens: std::collections::HashMap::from([(
            "ta".to_owned(),
            wow_http::TokenBinding::tenant("t-a"),
        )]),
        operator_tokens: std::collections::HashSet::from(["op".to_owned()]),
        ..HttpConfig::default()
    };
    let server = Server {
        base: listen(router(HttpState::new(&pipeline, None, config))).await,
        client: Client::new(),
        store,
        _bank: None,
    };
    (server, pipeline)
}

/// The id of the only record `GET /compensation/failures` lists for tenant `t-a`'s token.
async fn the_one_failed_record(server: &Server) -> String {
    let (status, all) = server
        .get("/compensation/failures", &[("Authorization", "Bearer ta")])
        .await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(all.as_array().unwrap().len(), 1, "{all}");
    all[0]["id"].as_str().unwrap().to_owned()
}

/// A service with auth on whose view fails, and the one record of its failure on `id`'s
/// opening (in tenant t-a).
async fn one_failure_with_auth(id: &str) -> (Server, LocalPipeline, String) {
    let (server, pipeline) = a_service_with_auth_and_a_failing_view().await;
    let opened = [
        ("Authorization", "Bearer ta"),
        ("Command-Wait-Stage", "PROJECTED"),
    ];
    let (status, body, _) = server
        .post(
            &format!("/account/{id}/open"),
            &opened,
            r#"{"name":"Ann","balance":1}"#,
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let failed = the_one_failed_record(&server).await;
    (server, pipeline, failed)
}

/// An operator's retry spec for one record (auth on): the operator's bearer token only; a bad
/// body is 400 BadRequest, an unknown or another tenant's record 404; the record shows the
/// spec and who set it, and is judged by it at once.
#[tokio::test]
async fn an_operator_sets_a_records_retry_spec() {
    let (server, _pipeline, failed) = one_failure_with_auth("r-1").await;
    let route = format!("/compensation/failures/{failed}/retry-spec");
    let spec = r#"{"maxAttempts":5,"initialBackoffMs":10,"maxBackoffMs":20}"#;
    for refused in [&[][..], &[("Authorization", "Bearer ta")][..]] {
        let (status, body, _) = server.put(&route, refused, spec).await;
        assert!(
            status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN,
            "{status}: {body}"
        );
    }
    let operator = [("Authorization", "Bearer op"), ("Command-Tenant-Id", "t-a")];
    for bad in [
        "",
        "[]",
        "{}",
        r#"{"maxAttempts":5,"initialBackoffMs":10}"#,
        r#"{"maxAttempts":0,"initialBackoffMs":10,"maxBackoffMs":20}"#,
        r#"{"maxAttempts":5,"initialBackoffMs":30,"maxBackoffMs":20}"#,
        r#"{"maxAttempts":-1,"initialBackoffMs":10,"maxBackoffMs":20}"#,
        r#"{"maxAttempts":5,"initialBackoffMs":10,"maxBackoffMs":20,"colour":"red"}"#,
        r#"{"maxAttempts":5,"maxAttempts":6,"initialBackoffMs":10,"maxBackoffMs":20}"#,
    ] {
        let (status, body, code) = server.put(&route, &operator, bad).await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::BAD_REQUEST, "BadRequest"),
            "{bad}: {body}"
        );
    }
    let (status, _, _) = server
        .put("/compensation/failures/nope/retry-spec", &operator, spec)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let elsewhere = [("Authorization", "Bearer op"), ("Command-Tenant-Id", "t-b")];
    let (status, _, _) = server.put(&route, &elsewhere, spec).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "another tenant's record");

    let (status, edited, _) = server.put(&route, &operator, spec).await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(
        edited["retrySpec"],
        json!({"maxAttempts": 5, "initialBackoffMs": 10, "maxBackoffMs": 20})
    );
    assert_eq!(edited["status"], "FAILED");
    let next = edited["nextRetryAt"].as_i64().unwrap();
    let updated = edited["updatedAt"].as_i64().unwrap();
    assert_eq!(next - updated, 10, "the new backoff after one attempt");
    let by = edited["updatedBy"].as_str().unwrap();
    assert!(by.starts_with("operator:"), "{by}");
    let (_, detail) = server
        .get(
            &format!("/compensation/failures/{failed}"),
            &[("Authorization", "Bearer ta")],
        )
        .await;
    assert_eq!(detail["failure"], edited, "the tenant sees the edit");

    let (status, exhausted, _) = server
        .put(
            &route,
            &operator,
            r#"{"maxAttempts":1,"initialBackoffMs":10,"maxBackoffMs":20}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{exhausted}");
    assert_eq!(exhausted["status"], "EXHAUSTED", "no attempt is left");
    assert!(exhausted["nextRetryAt"].is_null());
}

/// An operator's judgement of a record (auth on): an UNRECOVERABLE record is not retried by
/// the scheduler, even when due, and a manual retry still runs it; marked RECOVERABLE it is
/// retried again; the list filters by it; a bad body is 400, an unknown record 404.
#[tokio::test]
async fn an_unrecoverable_record_waits_for_a_manual_retry() {
    let (server, pipeline, failed) = one_failure_with_auth("u-1").await;
    let scheduler = pipeline.compensation().unwrap();
    let operator = [("Authorization", "Bearer op"), ("Command-Tenant-Id", "t-a")];
    let route = format!("/compensation/failures/{failed}/recoverable");
    let (status, body, _) = server
        .put(&route, &[], r#"{"recoverable":"UNRECOVERABLE"}"#)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    for bad in [
        "{}",
        r#"{"recoverable":"MAYBE"}"#,
        r#"{"recoverable":"unrecoverable"}"#,
        r#"{"recoverable":"UNKNOWN","why":"x"}"#,
        r#"{"recoverable":1}"#,
    ] {
        let (status, body, code) = server.put(&route, &operator, bad).await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::BAD_REQUEST, "BadRequest"),
            "{bad}: {body}"
        );
    }
    let (status, _, _) = server
        .put(
            "/compensation/failures/nope/recoverable",
            &operator,
            r#"{"recoverable":"UNKNOWN"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, marked, _) = server
        .put(&route, &operator, r#"{"recoverable":"UNRECOVERABLE"}"#)
        .await;
    assert_eq!(status, StatusCode::OK, "{marked}");
    assert_eq!(marked["recoverable"], "UNRECOVERABLE");
    assert!(marked["updatedBy"]
        .as_str()
        .unwrap()
        .starts_with("operator:"));
    // Due at once from here on: the record's own spec waits 0 ms.
    let (status, _, _) = server
        .put(
            &format!("/compensation/failures/{failed}/retry-spec"),
            &operator,
            r#"{"maxAttempts":10,"initialBackoffMs":0,"maxBackoffMs":0}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let pass = scheduler.run_due(10).await.unwrap();
    assert_eq!(pass.retried, 0, "the scheduler leaves it alone");
    let tenant = [("Authorization", "Bearer ta")];
    let (_, listed) = server
        .get("/compensation/failures?recoverable=unrecoverable", &tenant)
        .await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let (_, none) = server
        .get("/compensation/failures?recoverable=RECOVERABLE", &tenant)
        .await;
    assert_eq!(none.as_array().map(Vec::len), Some(0), "{none}");
    let (status, body) = server
        .get("/compensation/failures?recoverable=perhaps", &tenant)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let (status, retried, _) = server
        .post(
            &format!("/compensation/failures/{failed}/retry"),
            &tenant,
            "",
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{retried}");
    assert_eq!(retried["attempts"], 2, "a manual retry runs it: {retried}");

    let (status, _, _) = server
        .put(&route, &operator, r#"{"recoverable":"RECOVERABLE"}"#)
        .await;
    assert_eq!(status, StatusCode::OK);
    let pass = scheduler.run_due(10).await.unwrap();
    assert_eq!(pass.retried, 1, "retried by the scheduler again");
    let (_, detail) = server
        .get(&format!("/compensation/failures/{failed}"), &tenant)
        .await;
    assert_eq!(detail["failure"]["attempts"], 3, "{detail}");
    assert_eq!(detail["failure"]["recoverable"], "RECOVERABLE");
}

/// Waits until `projection` has applied `count` streams (a deadline of 10 s), and returns
/// the ids it applied.
async fn applied_at_least(projection: &Switchable, count: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let applied = projection.applied.lock().unwrap().clone();
        if applied.len() >= count {
            return applied;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "applied {applied:?}, not {count} streams"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// An operator re-dispatches a range of history to one consumer (auth on): the operator's
/// bearer token only; a bad range is 400, an unknown consumer or aggregate type 404; 202 says what runs, and
/// the consumer receives exactly those streams again, in order; without an aggregate id, the
/// range of every aggregate of the type in the operator's tenant.
#[tokio::test]
async fn an_operator_redispatches_a_range_to_one_consumer() {
    use wow_core::compensation::{InMemoryCompensationStore, RetrySpec};

    let projection = Arc::new(Switchable::default());
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let pipeline = LocalPipeline::builder(wow_example_bank::registry().unwrap(), store.clone())
        .projection(projection.clone())
        .compensation(
            Arc::new(InMemoryCompensationStore::new()),
            RetrySpec::default(),
        )
        .build();
    let config = HttpConfig {
        auth_tokens: std::collections::HashMap::from([
            ("ta".to_owned(), wow_http::TokenBinding::tenant("t-a")),
            ("tb".to_owned(), wow_http::TokenBinding::tenant("t-b")),
        ]),
        operator_tokens: std::collections::HashSet::from(["op".to_owned()]),
        ..HttpConfig::default()
    };
    let server = Server {
        base: listen(router(HttpState::new(&pipeline, None, config))).await,
        client: Client::new(),
        store,
        _bank: None,
    };
    for (token, id) in [("Bearer ta", "d-1"), ("Bearer tb", "d-2")] {
        let headers = [
            ("Authorization", token),
            ("Command-Wait-Stage", "PROJECTED"),
        ];
        let (status, body, _) = server
            .post(
                &format!("/account/{id}/open"),
                &headers,
                r#"{"name":"Ann","balance":1}"#,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        for _ in 0..2 {
            let (status, body, _) = server
                .post(
                    &format!("/account/{id}/deposit"),
                    &headers,
                    r#"{"amount":5}"#,
                )
                .await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
    }
    let live = applied_at_least(&projection, 6).await;
    let route = "/consumers/switchable/redispatch";
    let range = r#"{"aggregate":"account","aggregateId":"d-1","fromVersion":2,"toVersion":3}"#;
    for refused in [&[][..], &[("Authorization", "Bearer ta")][..]] {
        let (status, body, _) = server.post(route, refused, range).await;
        assert!(
            status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN,
            "{status}: {body}"
        );
    }
    let operator = [("Authorization", "Bearer op"), ("Command-Tenant-Id", "t-a")];
    for bad in [
        "",
        "{}",
        r#"{"aggregate":"account","fromVersion":0}"#,
        r#"{"aggregate":"account","fromVersion":3,"toVersion":2}"#,
        r#"{"aggregate":"account","aggregateId":"..","fromVersion":1}"#,
        r#"{"aggregate":"account","fromVersion":1,"colour":"red"}"#,
    ] {
        let (status, body, code) = server.post(route, &operator, bad).await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::BAD_REQUEST, "BadRequest"),
            "{bad}: {body}"
        );
    }
    let (status, body, _) = server
        .post("/consumers/nope/redispatch", &operator, range)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body, _) = server
        .post(route, &operator, r#"{"aggregate":"nope","fromVersion":1}"#)
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "an unknown aggregate type: {body}"
    );
    assert_eq!(
        projection.applied.lock().unwrap().len(),
        6,
        "nothing refused ran"
    );

    let (status, accepted, _) = server.post(route, &operator, range).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert_eq!(accepted["consumer"], "switchable");
    assert_eq!(accepted["aggregate"], "account");
    assert_eq!(accepted["aggregateId"], "d-1");
    assert_eq!(accepted["tenantId"], "t-a");
    assert_eq!(
        (
            accepted["fromVersion"].as_u64(),
            accepted["toVersion"].as_u64()
        ),
        (Some(2), Some(3))
    );
    assert!(accepted["requestedBy"]
        .as_str()
        .unwrap()
        .starts_with("operator:"));
    let applied = applied_at_least(&projection, 8).await;
    assert_eq!(
        applied[6..],
        live[1..3],
        "versions 2 and 3 of d-1 again, in order"
    );

    let (status, accepted, _) = server
        .post(
            route,
            &operator,
            r#"{"aggregate":"account","fromVersion":3}"#,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert!(accepted["aggregateId"].is_null());
    let applied = applied_at_least(&projection, 9).await;
    assert_eq!(applied[8], live[2], "version 3 of t-a's aggregates only");
    let (_, failures) = server
        .get("/compensation/failures", &[("Authorization", "Bearer ta")])
        .await;
    assert_eq!(failures.as_array().map(Vec::len), Some(0), "{failures}");
}
