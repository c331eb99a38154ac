//! Every heavy read route answers within documented bounds (SPEC TN-1), on `wow serve` over
//! SQLite and PostgreSQL: a history range holding more than 1,000 versions is refused 400
//! naming the page to ask for (a short history asked "to the end" still answers whole), time
//! travel folds a history longer than a page, a projection names at most 64 paths per list,
//! a read past its budget is stopped 503 `QueryTimeout`, and the server serves on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use support::Served;

/// Every answer must come within this.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// Deposits into the hot account: more than one page of history.
const DEPOSITS: u64 = 1_100;

struct Api {
    client: Client,
    address: String,
}

/// An answer: status, `Wow-Error-Code`, body.
type Answer = (StatusCode, Option<String>, Value);

impl Api {
    fn of(served: &Served) -> Self {
        Self {
            client: Client::builder().timeout(ANSWER_WITHIN).build().unwrap(),
            address: served.address.clone(),
        }
    }

    async fn answer(&self, request: reqwest::RequestBuilder) -> Answer {
        let response = request
            .header("Command-Tenant-Id", "t1")
            .send()
            .await
            .unwrap();
        let status = response.status();
        let code = response
            .headers()
            .get("Wow-Error-Code")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, code, body)
    }

    async fn get(&self, path: &str) -> Answer {
        self.answer(self.client.get(format!("http://{}/{path}", self.address)))
            .await
    }

    /// A state: status, the bare state and its version (its `ETag`).
    async fn get_state(&self, path: &str) -> (StatusCode, Value, Option<u64>) {
        let response = self
            .client
            .get(format!("http://{}/{path}", self.address))
            .header("Command-Tenant-Id", "t1")
            .send()
            .await
            .unwrap();
        let status = response.status();
        let version = support::tagged_version(response.headers());
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, body, version)
    }

    async fn post(&self, path: &str, body: &Value) -> Answer {
        self.answer(
            self.client
                .post(format!("http://{}/{path}", self.address))
                .json(body),
        )
        .await
    }

    async fn ok(&self, path: &str, body: &Value) {
        let (status, _, answer) = self.post(path, body).await;
        assert_eq!(status, StatusCode::OK, "{path}: {answer}");
    }
}

/// `message` of a refusal: its status and code as expected, its `errorMsg` naming each of
/// `names`.
fn assert_refused(answer: &Answer, status: StatusCode, code: &str, names: &[&str]) {
    assert_eq!(answer.0, status, "{}", answer.2);
    assert_eq!(answer.1.as_deref(), Some(code), "{}", answer.2);
    let message = answer.2["errorMsg"].as_str().unwrap_or_default();
    for name in names {
        assert!(message.contains(name), "`{message}` names {name}");
    }
}

async fn bounded_reads(store: &str, separator: &str) {
    let served = Served::start(&["--store", store, "--listen", "127.0.0.1:0"], &[]);
    let api = Api::of(&served);
    api.ok("account/hot/open", &json!({"name": "hot", "balance": 0}))
        .await;
    api.ok("account/cold/open", &json!({"name": "cold", "balance": 7}))
        .await;
    for _ in 0..DEPOSITS {
        api.ok("account/hot/deposit", &json!({"amount": 1})).await;
    }
    a_history_range_past_a_page_is_refused_naming_the_page(&api).await;
    let now = time_travel_folds_past_a_page_of_history(&api).await;
    a_projection_names_at_most_64_paths_per_list(&api).await;
    served.stop();

    // Past the read budget (a millisecond here, the store's own larger): stopped, 503, and
    // the server serves on.
    let store = format!("{store}{separator}query_timeout_ms=60000");
    let served = Served::start(
        &["--store", &store, "--listen", "127.0.0.1:0"],
        &[("WOW_READ_BUDGET_MS", "1")],
    );
    let api = Api::of(&served);
    let stopped = api.get(&format!("account/hot/state/time/{now}")).await;
    assert_refused(
        &stopped,
        StatusCode::SERVICE_UNAVAILABLE,
        "QueryTimeout",
        &["time budget of 1 ms"],
    );
    api.ok("account/hot/deposit", &json!({"amount": 1})).await;
    let (status, state, _) = api.get_state("account/hot/state").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(state["balance"], json!(DEPOSITS + 1));
    served.stop();
}

/// History: a range holding more than a page is refused, naming the page; the pages answer;
/// a short history asked "to the end", as Wow's clients ask, answers whole.
async fn a_history_range_past_a_page_is_refused_naming_the_page(api: &Api) {
    let versions = DEPOSITS + 1;
    let refused = api.get("account/hot/event/1/100000000").await;
    assert_refused(
        &refused,
        StatusCode::BAD_REQUEST,
        "IllegalArgument",
        &["1000 versions", "/event/1/1000", "from 1001"],
    );
    let (status, _, page) = api.get("account/hot/event/1/1000").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page.as_array().unwrap().len(), 1000);
    let (status, _, rest) = api.get("account/hot/event/1001/2147483647").await;
    assert_eq!(status, StatusCode::OK);
    let rest = rest.as_array().unwrap();
    assert_eq!(rest.len() as u64, versions - 1000);
    assert_eq!(rest.last().unwrap()["version"], json!(versions));
    // A short history asked "to the end", as Wow's clients ask, answers whole.
    let (status, _, cold) = api.get("account/cold/event/1/2147483647").await;
    assert_eq!(status, StatusCode::OK, "{cold}");
    assert_eq!(cold.as_array().map(Vec::len), Some(1), "{cold}");
}

/// Time travel folds past a page of history, by version and by time. The time asked, in
/// milliseconds since the epoch.
async fn time_travel_folds_past_a_page_of_history(api: &Api) -> i64 {
    let versions = DEPOSITS + 1;
    let (status, at, version) = api.get_state("account/hot/state/1050").await;
    assert_eq!(status, StatusCode::OK, "{at}");
    assert_eq!((version, at["balance"].clone()), (Some(1050), json!(1049)));
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    let (status, at, version) = api
        .get_state(&format!("account/hot/state/time/{now}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{at}");
    assert_eq!(version, Some(versions));
    assert_eq!(at["balance"], json!(DEPOSITS));
    let (status, _, _) = api
        .get(&format!("account/hot/state/{}", versions + 1))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "past its last version");
    now
}

/// A projection names at most 64 paths per list, included or excluded.
async fn a_projection_names_at_most_64_paths_per_list(api: &Api) {
    let paths = |n: usize| (0..n).map(|i| format!("body.f{i}")).collect::<Vec<_>>();
    let refused = api
        .post(
            "account/event/list",
            &json!({"projection": {"include": paths(65)}, "limit": 10}),
        )
        .await;
    assert_refused(
        &refused,
        StatusCode::BAD_REQUEST,
        "IllegalArgument",
        &["at most 64 field paths", "65"],
    );
    let refused = api
        .post(
            "account/event/paged",
            &json!({"projection": {"exclude": paths(65)}}),
        )
        .await;
    assert_refused(
        &refused,
        StatusCode::BAD_REQUEST,
        "IllegalArgument",
        &["64"],
    );
    let (status, _, listed) = api
        .post(
            "account/event/list",
            &json!({"projection": {"include": paths(64)}, "limit": 10}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed.as_array().unwrap().len(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heavy_reads_are_bounded_on_sqlite() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("bounded.db").display());
    bounded_reads(&store, "?").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heavy_reads_are_bounded_on_postgres() {
    let Some((base, schema)) = support::postgres_schema("bounded") else {
        return;
    };
    bounded_reads(&format!("{base}?schema={schema}"), "&").await;
    support::drop_schema(&base, &schema);
}
