//! Queries sent as an attacker would, one at a time, against `wow serve` on SQLite and on
//! PostgreSQL: every query past a documented limit is answered 400 `IllegalArgument` naming
//! the limit before anything runs, a query past its time budget 503 `QueryTimeout`, no answer
//! carries SQL, and the server goes on serving commands and queries afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use support::Served;

/// Every answer must come within this; a query that runs away fails the test here.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

struct Api {
    client: Client,
    address: String,
}

impl Api {
    fn of(served: &Served) -> Self {
        Self {
            client: Client::builder().timeout(ANSWER_WITHIN).build().unwrap(),
            address: served.address.clone(),
        }
    }

    async fn post(&self, path: &str, body: &Value) -> (StatusCode, Option<String>, String) {
        let response = self
            .client
            .post(format!("http://{}/{path}", self.address))
            .header("Command-Tenant-Id", "t1")
            .json(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{path} answers within {ANSWER_WITHIN:?}: {e}"));
        let status = response.status();
        let code = response
            .headers()
            .get("Wow-Error-Code")
            .map(|v| v.to_str().unwrap().to_owned());
        (status, code, response.text().await.unwrap())
    }

    /// `body` counted by `POST /account/event/count`: refused 400 naming `limit`.
    async fn refused(&self, body: &Value, limit: &str) {
        let (status, code, text) = self.post("account/event/count", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text:.300}");
        assert_eq!(code.as_deref(), Some("IllegalArgument"));
        let answer: Value = serde_json::from_str(&text).unwrap();
        let message = answer["errorMsg"].as_str().unwrap();
        assert!(message.contains(limit), "{message} names {limit}");
        assert!(
            text.len() < 1024,
            "a short answer, not {} bytes",
            text.len()
        );
        assert!(!text.to_uppercase().contains("SELECT"), "no SQL: {text}");
    }

    async fn open_accounts(&self, count: usize) {
        let mut opening = tokio::task::JoinSet::new();
        for worker in 0..16 {
            let (client, address) = (self.client.clone(), self.address.clone());
            opening.spawn(async move {
                for i in (worker..count).step_by(16) {
                    let response = client
                        .post(format!("http://{address}/account/acc-{i:05}/open"))
                        .header("Command-Tenant-Id", "t1")
                        .json(&json!({"name": format!("n{i}"), "balance": i}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), StatusCode::OK);
                }
            });
        }
        while let Some(done) = opening.join_next().await {
            done.unwrap();
        }
    }
}

fn strings(prefix: &str, n: usize) -> Vec<Value> {
    (0..n).map(|i| json!(format!("{prefix}-{i}"))).collect()
}

/// `AND` of `conditions` conditions `operator` on `field`, of `values` values each.
fn and_of(conditions: usize, operator: &str, field: &str, values: usize) -> Value {
    let children: Vec<Value> = (0..conditions)
        .map(|c| json!({"field": field, "operator": operator, "value": strings(&format!("v{c}"), values)}))
        .collect();
    json!({"operator": "AND", "children": children})
}

/// On the store at `store` (whose URL takes one more parameter after `separator`): the limits on a server with the default budget, then the budget on the same store
/// restarted with a budget of a millisecond.
async fn hostile_queries(store: &str, separator: &str) {
    let served = Served::start(&["--store", store, "--listen", "127.0.0.1:0"], &[]);
    let api = Api::of(&served);
    api.open_accounts(2_000).await;
    the_shapes_that_took_a_server_down_are_refused(&api).await;
    a_thousand_values_in_a_list_and_four_such_lists_run(&api).await;
    served.stop();

    // Within every limit, and still past the time budget (a millisecond here).
    let store = format!("{store}{separator}query_timeout_ms=1");
    let served = Served::start(&["--store", &store, "--listen", "127.0.0.1:0"], &[]);
    let api = Api::of(&served);
    let heavy: Vec<Value> = (0..31)
        .map(|i| {
            json!({"field": "body", "operator": "ELEM_MATCH", "children": [
            {"field": "body.balance", "operator": "GT", "value": 1_000_000 + i}]})
        })
        .collect();
    let (status, code, text) = api
        .post(
            "account/event/list",
            &json!({"condition": {"operator": "OR", "children": heavy}, "limit": 1000}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text:.300}");
    assert_eq!(code.as_deref(), Some("QueryTimeout"), "{text:.300}");
    assert!(!text.to_uppercase().contains("SELECT"), "no SQL: {text}");

    // And the server serves on: a command, a read, a small query.
    let (status, _, text) = api
        .post("account/acc-00001/deposit", &json!({"amount": 5}))
        .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let health = api
        .client
        .get(format!("http://{}/health", api.address))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    served.stop();
}

/// The shapes that took a server down, and the limits around them: too many values in all or
/// in one condition, too deep, too many conditions.
async fn the_shapes_that_took_a_server_down_are_refused(api: &Api) {
    api.refused(&and_of(63, "ALL_IN", "body.tags", 900), "values in all")
        .await;
    api.refused(&and_of(54, "IN", "body.name", 600), "values in all")
        .await;
    api.refused(&and_of(33, "IN", "body.name", 1_000), "values in all")
        .await;
    api.refused(
        &json!({"field": "aggregateId", "operator": "IN", "value": strings("x", 70_000)}),
        "values in one condition",
    )
    .await;
    let mut deep = json!({"field": "body.name", "operator": "EQ", "value": "x"});
    for _ in 0..40 {
        deep = json!({"operator": "OR", "children": [deep]});
    }
    api.refused(&deep, "levels of nested conditions").await;
    let wide: Vec<Value> = (0..64)
        .map(|i| json!({"field": "body.name", "operator": "EQ", "value": format!("n{i}")}))
        .collect();
    api.refused(&json!({"operator": "AND", "children": wide}), "conditions")
        .await;
}

/// A thousand values in one list, and four such lists, run.
async fn a_thousand_values_in_a_list_and_four_such_lists_run(api: &Api) {
    let mut ids = strings("none", 995);
    ids.extend([json!("acc-00007"), json!("acc-01999")]);
    let (status, _, text) = api
        .post(
            "account/event/count",
            &json!({"operator": "AGGREGATE_IDS", "value": ids}),
        )
        .await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, "2"));
    let mut four = and_of(4, "NOT_IN", "aggregateId", 1_000);
    four["children"]
        .as_array_mut()
        .unwrap()
        .push(json!({"field": "aggregateId", "operator": "STARTS_WITH", "value": "acc-0001"}));
    let (status, _, text) = api.post("account/event/count", &four).await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, "10"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_queries_on_sqlite() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("hostile.db").display());
    hostile_queries(&store, "?").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_queries_on_postgres() {
    let Some((base, schema)) = support::postgres_schema("hostile") else {
        return;
    };
    hostile_queries(&format!("{base}?schema={schema}"), "&").await;
    support::drop_schema(&base, &schema);
}
