//! Wow's query routes over real HTTP, on every store `wow serve` runs on (memory, SQLite,
//! PostgreSQL): the snapshot queries as Wow's TypeScript client sends them, a spread of
//! operators, projections, sorts and pages, the event stream queries, tenants, the answers to
//! bad queries, and the materialized snapshots surviving a restart. Every operator's semantics
//! is checked per store by the `wow-tck` query cases; this suite checks the routes on top.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use support::Served;

struct Api {
    client: Client,
    address: String,
}

impl Api {
    fn of(served: &Served) -> Self {
        Self {
            client: Client::new(),
            address: served.address.clone(),
        }
    }

    async fn command(&self, tenant: &str, path: &str, body: Value) {
        let response = self
            .client
            .post(format!("http://{}/{path}", self.address))
            .header("Command-Tenant-Id", tenant)
            .header("Command-Wait-Stage", "PROJECTED")
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }

    async fn query(&self, tenant: &str, path: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .client
            .post(format!("http://{}/{path}", self.address))
            .header("Command-Tenant-Id", tenant)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let code = response
            .headers()
            .get("Wow-Error-Code")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = response.json().await.unwrap_or(Value::Null);
        assert_eq!(
            code.as_deref(),
            body.get("errorCode").and_then(Value::as_str).or(Some("Ok"))
        );
        (status, body)
    }

    /// `GET /account/{id}/snapshot` in `tenant`: the status and the document, its ETag
    /// checked against its version.
    async fn snapshot(&self, tenant: &str, id: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(format!("http://{}/account/{id}/snapshot", self.address))
            .header("Command-Tenant-Id", tenant)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let etag = response
            .headers()
            .get("ETag")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = response.json().await.unwrap();
        if status == StatusCode::OK {
            assert_eq!(etag, Some(format!("\"{}\"", body["version"])), "{body}");
        }
        (status, body)
    }

    /// `PUT` of `path` in `tenant`, with `token` as the bearer token when given.
    async fn put(&self, tenant: &str, path: &str, token: Option<&str>) -> (StatusCode, Value) {
        let mut request = self
            .client
            .put(format!("http://{}/{path}", self.address))
            .header("Command-Tenant-Id", tenant);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// The aggregate ids of a list of documents or states.
    async fn ids(&self, path: &str, body: Value) -> Vec<String> {
        let (status, found) = self.query("t1", path, body.clone()).await;
        assert_eq!(status, StatusCode::OK, "{path} {body}: {found}");
        found
            .as_array()
            .unwrap()
            .iter()
            .map(|doc| doc["aggregateId"].as_str().unwrap().to_owned())
            .collect()
    }
}

async fn open_accounts(api: &Api) {
    for (id, name, balance) in [
        ("a1", "Ann", 100),
        ("a2", "bob", 5),
        ("a3", "Cleo", 0),
        ("a4", "dan", 250),
        ("a5", "Eva", 40),
    ] {
        api.command(
            "t1",
            &format!("account/{id}/open"),
            json!({"name": name, "balance": balance}),
        )
        .await;
    }
    api.command("t1", "account/a1/deposit", json!({"amount": 20}))
        .await;
    api.command("t1", "account/a2/freeze", json!({})).await;
    api.command(
        "t2",
        "account/a1/open",
        json!({"name": "Other", "balance": 7}),
    )
    .await;
}

async fn snapshot_queries(api: &Api) {
    single_answers_wows_document_and_state(api).await;
    lists_pages_and_counts_sort_project_and_page(api).await;
    each_operator_selects_its_accounts(api).await;
    // Another tenant sees its own account only.
    let (_, other) = api
        .query(
            "t2",
            "account/snapshot/list",
            json!({"condition": {}, "limit": 10}),
        )
        .await;
    assert_eq!(other.as_array().unwrap().len(), 1);
    assert_eq!(other[0]["state"]["name"], "Other");
}

/// As Wow's client's getById and getStateById send them: the document and the bare state.
async fn single_answers_wows_document_and_state(api: &Api) {
    let (status, doc) = api
        .query(
            "t1",
            "account/snapshot/single",
            json!({"condition": {"operator": "AGGREGATE_ID", "value": "a1"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{doc}");
    assert_eq!(doc["aggregateId"], "a1");
    assert_eq!(doc["aggregateName"], "account");
    assert_eq!(doc["tenantId"], "t1");
    assert_eq!(doc["version"], 2);
    assert_eq!(doc["deleted"], false);
    assert_eq!(doc["state"]["balance"], 120);
    assert!(doc["firstEventTime"].as_i64().unwrap() <= doc["eventTime"].as_i64().unwrap());
    let (status, state) = api
        .query(
            "t1",
            "account/snapshot/single/state",
            json!({"condition": {"operator": "AGGREGATE_ID", "value": "a1"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        state,
        json!({"name": "Ann", "balance": 120, "held": 0, "frozen": false})
    );
}

/// A list sorted, a list of states projected, a page and a count.
async fn lists_pages_and_counts_sort_project_and_page(api: &Api) {
    let by_balance = json!({
        "condition": {"field": "state.balance", "operator": "GTE", "value": 40},
        "sort": [{"field": "state.balance", "direction": "DESC"}],
        "limit": 10
    });
    assert_eq!(
        api.ids("account/snapshot/list", by_balance).await,
        ["a4", "a1", "a5"]
    );
    let (_, names) = api
        .query(
            "t1",
            "account/snapshot/list/state",
            json!({
                "condition": {"field": "state.name", "operator": "IN", "value": ["Ann", "dan"]},
                "projection": {"include": ["name"]},
                "limit": 10
            }),
        )
        .await;
    assert_eq!(names, json!([{"name": "Ann"}, {"name": "dan"}]));
    let (_, page) = api
        .query(
            "t1",
            "account/snapshot/paged",
            json!({
                "condition": {},
                "sort": [{"field": "state.name", "direction": "ASC"}],
                "pagination": {"index": 2, "size": 2}
            }),
        )
        .await;
    assert_eq!(page["total"], 5);
    let page_ids: Vec<_> = page["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["aggregateId"].clone())
        .collect();
    assert_eq!(
        page_ids,
        [json!("a5"), json!("a2")],
        "Ann Cleo | Eva bob | dan"
    );
    let (_, frozen) = api
        .query(
            "t1",
            "account/snapshot/count",
            json!({"field": "state.frozen", "operator": "TRUE"}),
        )
        .await;
    assert_eq!(frozen, json!(1));
}

/// A spread of operators, each listing the accounts it selects.
async fn each_operator_selects_its_accounts(api: &Api) {
    let checks = [
        (
            json!({"field": "state.name", "operator": "CONTAINS", "value": "AN", "options": {"ignoreCase": true}}),
            vec!["a1", "a4"],
        ),
        (
            json!({"field": "state.name", "operator": "STARTS_WITH", "value": "C"}),
            vec!["a3"],
        ),
        (
            json!({"field": "state.balance", "operator": "BETWEEN", "value": [5, 100]}),
            vec!["a2", "a5"],
        ),
        (
            json!({"operator": "OR", "children": [
            {"field": "state.balance", "operator": "LT", "value": 1},
            {"field": "state.frozen", "operator": "TRUE"}]}),
            vec!["a2", "a3"],
        ),
        (
            json!({"operator": "NOR", "children": [{"field": "state.balance", "operator": "GT", "value": 10}]}),
            vec!["a2", "a3"],
        ),
        (
            json!({"field": "state.held", "operator": "EQ", "value": 0}),
            vec!["a1", "a2", "a3", "a4", "a5"],
        ),
        (
            json!({"field": "eventTime", "operator": "RECENT_DAYS", "value": 1, "options": {"zoneId": "UTC"}}),
            vec!["a1", "a2", "a3", "a4", "a5"],
        ),
        (
            json!({"field": "firstEventTime", "operator": "EARLIER_DAYS", "value": 1}),
            vec![],
        ),
        (
            json!({"field": "state.nickname", "operator": "EXISTS", "value": false}),
            vec!["a1", "a2", "a3", "a4", "a5"],
        ),
        (
            json!({"operator": "AGGREGATE_IDS", "value": ["a3", "a9"]}),
            vec!["a3"],
        ),
        (
            json!({"operator": "DELETED", "value": "ALL"}),
            vec!["a1", "a2", "a3", "a4", "a5"],
        ),
    ];
    for (condition, expected) in checks {
        let found = api
            .ids(
                "account/snapshot/list",
                json!({"condition": condition.clone(), "limit": 100}),
            )
            .await;
        assert_eq!(found, expected, "{condition}");
    }
}

async fn event_queries(api: &Api) {
    let (status, streams) = api
        .query(
            "t1",
            "account/event/list",
            json!({"condition": {"operator": "AGGREGATE_ID", "value": "a1"}, "limit": 10}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{streams}");
    let versions: Vec<_> = streams
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["version"].clone())
        .collect();
    assert_eq!(versions, [json!(1), json!(2)]);
    assert_eq!(streams[1]["body"][0]["name"], "Deposited");
    assert_eq!(streams[1]["body"][0]["bodyType"], "bank.account.Deposited");
    let deposited = json!({"field": "body", "operator": "ELEM_MATCH", "children": [
        {"field": "name", "operator": "EQ", "value": "Deposited"}]});
    let (_, count) = api
        .query("t1", "account/event/count", deposited.clone())
        .await;
    assert_eq!(count, json!(1));
    let (_, page) = api
        .query(
            "t1",
            "account/event/paged",
            json!({
                "condition": {"field": "version", "operator": "EQ", "value": 1},
                "sort": [{"field": "aggregateId", "direction": "DESC"}],
                "pagination": {"index": 1, "size": 2}
            }),
        )
        .await;
    assert_eq!(page["total"], 5);
    assert_eq!(page["list"][0]["aggregateId"], "a5");
    let (_, other) = api.query("t2", "account/event/count", json!({})).await;
    assert_eq!(other, json!(1));
}

async fn bad_queries(api: &Api) {
    let (status, body) = api
        .query(
            "t1",
            "account/snapshot/single",
            json!({"condition": {"operator": "AGGREGATE_ID", "value": "nobody"}}),
        )
        .await;
    assert_eq!(
        (status, body["errorCode"].as_str()),
        (StatusCode::NOT_FOUND, Some("NotFound"))
    );
    for (body, named) in [
        (
            json!({"condition": {"operator": "RAW", "value": "{}"}}),
            "RAW",
        ),
        (
            json!({"condition": {"field": "state.name", "operator": "BETWEEN", "value": "x"}}),
            "BETWEEN",
        ),
        (
            json!({"condition": {"field": "state.x'; DROP", "operator": "EQ", "value": 1}}),
            "state.x",
        ),
        (json!({"condition": {}, "limit": 0}), "limit"),
        (json!({"condition": {"operator": "NOPE"}}), "NOPE"),
        (json!({"condition": {"opertor": "ALL"}}), "opertor"),
        (
            json!({"condition": {}, "projection": {"include": ["state..name"]}}),
            "state..name",
        ),
        // serde would read a struct from an array (its fields in order): each part is checked
        // to be the object the document says (schemathesis found `{"projection": [[], []]}`).
        (json!({"projection": [[], []]}), "projection"),
        (json!({"condition": ["AND"]}), "condition"),
        (json!({"sort": [[]]}), "sort"),
        (
            json!({"condition": {"operator": "AND", "children": [[]]}}),
            "children[0]",
        ),
    ] {
        let (status, answer) = api.query("t1", "account/snapshot/list", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert!(
            answer["errorMsg"].as_str().unwrap().contains(named),
            "{body}: {answer}"
        );
    }
    let (status, answer) = api
        .query("t1", "account/event/count", json!({"children": [1]}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let (status, answer) = api.query("t1", "account/snapshot/count", json!([])).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a condition is an object: {answer}"
    );
    let (status, _) = api.query("t1", "nothing/snapshot/list", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn whole_suite(store: &str) {
    // No settings: snapshot queries are on by default, as Wow has them.
    let served = Served::start(&["--store", store, "--listen", "127.0.0.1:0"], &[]);
    let api = Api::of(&served);
    open_accounts(&api).await;
    snapshot_queries(&api).await;
    event_queries(&api).await;
    bad_queries(&api).await;
    if store.starts_with("memory") {
        return;
    }
    assert!(served.stop().success());
    // The documents are kept: a restarted service answers at once.
    let served = Served::start(&["--store", store, "--listen", "127.0.0.1:0"], &[]);
    let api = Api::of(&served);
    assert_eq!(
        api.ids(
            "account/snapshot/list",
            json!({"condition": {"field": "state.frozen", "operator": "TRUE"}})
        )
        .await,
        ["a2"]
    );
    assert!(served.stop().success());
}

#[tokio::test]
async fn wow_queries_on_the_memory_store() {
    whole_suite("memory://").await;
}

#[tokio::test]
async fn wow_queries_on_sqlite() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("queries.db").display());
    whole_suite(&store).await;
}

#[tokio::test]
async fn wow_queries_on_postgres() {
    let Some((base, schema)) = support::postgres_schema("queries") else {
        return;
    };
    whole_suite(&format!("{base}?schema={schema}")).await;
    support::drop_schema(&base, &schema);
}

#[tokio::test]
async fn without_snapshot_queries_the_snapshot_routes_say_how_to_turn_them_on() {
    let served = Served::start(
        &["--store", "memory://", "--listen", "127.0.0.1:0"],
        &[("WOW_SNAPSHOT_QUERIES", "false")],
    );
    let api = Api::of(&served);
    api.command(
        "t1",
        "account/a1/open",
        json!({"name": "Ann", "balance": 1}),
    )
    .await;
    let (status, answer) = api.query("t1", "account/snapshot/count", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert!(
        answer["errorMsg"]
            .as_str()
            .unwrap()
            .contains("WOW_SNAPSHOT_QUERIES"),
        "{answer}"
    );
    let (status, answer) = api.snapshot("t1", "a1").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    // Event stream queries need no materialized state.
    let (status, count) = api.query("t1", "account/event/count", json!({})).await;
    assert_eq!((status, count), (StatusCode::OK, json!(1)));
}

/// `GET /{aggregate}/{id}/snapshot` answers Wow's snapshot shape with its version in `ETag`;
/// `PUT /{aggregate}/{id}/snapshot` regenerates one from history and
/// `PUT /{aggregate}/snapshot/{afterId}/{limit}` a tenant's aggregates a page at a time, as
/// Wow's batch does, with no settings.
#[tokio::test]
async fn the_snapshot_routes_answer_wows_shape_and_regenerate_from_history() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("snapshots.db").display());
    let served = Served::start(&["--store", &store, "--listen", "127.0.0.1:0"], &[]);
    let api = Api::of(&served);
    open_accounts(&api).await;
    let (status, document) = api.snapshot("t1", "a1").await;
    assert_eq!(status, StatusCode::OK, "{document}");
    for field in [
        "contextName",
        "aggregateName",
        "tenantId",
        "ownerId",
        "aggregateId",
        "version",
        "eventId",
        "firstEventTime",
        "eventTime",
        "snapshotTime",
        "deleted",
        "state",
    ] {
        assert!(document.get(field).is_some(), "{field} in {document}");
    }
    assert!(document.get("stateVersion").is_none(), "{document}");
    assert_eq!(
        (
            &document["contextName"],
            &document["aggregateName"],
            &document["tenantId"]
        ),
        (&json!("bank"), &json!("account"), &json!("t1"))
    );
    assert_eq!(document["version"], 2);
    assert_eq!(document["state"]["balance"], 120);
    assert_eq!(document["deleted"], false);
    assert!(document["firstEventTime"].as_i64() <= document["eventTime"].as_i64());
    // Another tenant's a1 is its own.
    let (_, other) = api.snapshot("t2", "a1").await;
    assert_eq!(other["state"]["balance"], 7, "{other}");
    let (status, missing) = api.snapshot("t1", "nobody").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");

    let (status, regenerated) = api.put("t1", "account/a1/snapshot", None).await;
    assert_eq!(status, StatusCode::OK, "{regenerated}");
    assert_eq!(regenerated["version"], 2);
    assert_eq!(regenerated["state"], document["state"]);
    assert_eq!(regenerated["firstEventTime"], document["firstEventTime"]);
    assert!(regenerated["snapshotTime"].as_i64() >= document["snapshotTime"].as_i64());
    let (status, _) = api.put("t1", "account/nobody/snapshot", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Every aggregate of the tenant, a page at a time, each once.
    let mut after = "(0)".to_owned();
    let mut regenerated = Vec::new();
    loop {
        let (status, batch) = api
            .put("t1", &format!("account/snapshot/{after}/2"), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{batch}");
        let size = batch["size"].as_u64().unwrap();
        if size == 0 {
            break;
        }
        assert!(size <= 2, "{batch}");
        after = batch["afterId"].as_str().unwrap().to_owned();
        regenerated.push(after.clone());
    }
    assert_eq!(regenerated, ["a2", "a4", "a5"]);
    let (_, batch) = api.put("t2", "account/snapshot/(0)/10", None).await;
    assert_eq!(batch, json!({"afterId": "a1", "size": 1}));
    for limit in ["0", "1001", "x"] {
        let (status, answer) = api
            .put("t1", &format!("account/snapshot/(0)/{limit}"), None)
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{limit}: {answer}");
    }
    assert!(served.stop().success());
}

/// With auth on, regenerating snapshots is an operator's action: a tenant's token is refused
/// (403), the operator's bearer token acts in the tenant it names.
#[tokio::test]
async fn regenerating_snapshots_takes_the_operator_token_when_auth_is_on() {
    let served = Served::start(
        &["--store", "memory://", "--listen", "127.0.0.1:0"],
        &[
            ("WOW_AUTH_TOKENS", "tenant-token=t1"),
            ("WOW_OPERATOR_TOKENS", "operator-token"),
        ],
    );
    let api = Api::of(&served);
    let opened = api
        .client
        .post(format!("http://{}/account/a1/open", api.address))
        .bearer_auth("tenant-token")
        .header("Command-Wait-Stage", "PROJECTED")
        .json(&json!({"name": "Ann", "balance": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), StatusCode::OK);
    let (status, _) = api.put("t1", "account/a1/snapshot", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = api
        .put("t1", "account/a1/snapshot", Some("tenant-token"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = api
        .put("t1", "account/snapshot/(0)/10", Some("tenant-token"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, document) = api
        .put("t1", "account/a1/snapshot", Some("operator-token"))
        .await;
    assert_eq!(status, StatusCode::OK, "{document}");
    assert_eq!(document["state"]["balance"], 3);
    let (status, batch) = api
        .put("t1", "account/snapshot/(0)/10", Some("operator-token"))
        .await;
    assert_eq!(
        (status, batch),
        (StatusCode::OK, json!({"afterId": "a1", "size": 1}))
    );
    assert!(served.stop().success());
}
