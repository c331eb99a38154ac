//! A view rebuilt beside the live one (SPEC DS-6), over real HTTP against `wow serve`: an
//! operator starts it (`POST /rebuilds/{view}`, the operator's token only), follows it
//! (`GET /rebuilds`), and meanwhile readers are answered every time, never an empty or older
//! row, while deposits go on; after the swap the old generation is gone and every row is
//! current. On SQLite with one process; on PostgreSQL with a second process that serves the
//! readers and takes the deposits while the first rebuilds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use support::Served;
use wow_core::view::ViewKey;

const ACCOUNTS: usize = 40;
const TENANT_TOKEN: &str = "ta";
const OPERATOR_TOKEN: &str = "op-1";
const VIEW: &str = "account_balance";

/// A client of one served process.
#[derive(Clone)]
struct Caller {
    client: Client,
    base: String,
}

impl Caller {
    fn of(served: &Served) -> Self {
        Self {
            client: Client::new(),
            base: format!("http://{}", served.address),
        }
    }

    async fn send(&self, path: &str, request_id: &str, body: Value) -> StatusCode {
        self.client
            .post(format!("{}{path}", self.base))
            .bearer_auth(TENANT_TOKEN)
            .header("Command-Request-Id", request_id)
            .header("Command-Wait-Stage", "PROJECTED")
            .json(&body)
            .send()
            .await
            .unwrap()
            .status()
    }

    async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// A state's status, its bare state and its version (its `ETag`).
    async fn get_state(&self, path: &str, token: &str) -> (StatusCode, Value, Option<u64>) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let version = support::tagged_version(response.headers());
        (
            status,
            response.json().await.unwrap_or(Value::Null),
            version,
        )
    }

    async fn post(&self, path: &str, token: Option<&str>) -> StatusCode {
        let request = self.client.post(format!("{}{path}", self.base));
        let request = match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        request.send().await.unwrap().status()
    }

    /// The version of account `n`'s row of the view, as a reader gets it.
    async fn view_version(&self, n: usize) -> Result<u64, String> {
        let path = format!("/account/a{n}/view/{VIEW}");
        match self.get(&path, TENANT_TOKEN).await {
            (StatusCode::OK, row) => row["version"].as_u64().ok_or(format!("{row}")),
            (status, body) => Err(format!("{path}: {status} {body}")),
        }
    }
}

fn serve(store: &str) -> Served {
    Served::start(
        &["--listen", "127.0.0.1:0"],
        &[
            ("WOW_STORE", store),
            ("WOW_AUTH_TOKENS", "ta=tenant-a"),
            ("WOW_OPERATOR_TOKENS", OPERATOR_TOKEN),
        ],
    )
}

async fn open_accounts(caller: &Caller) {
    for n in 0..ACCOUNTS {
        let body = json!({"name": format!("A{n}"), "balance": 100});
        let status = caller
            .send(&format!("/account/a{n}/open"), &format!("open-{n}"), body)
            .await;
        assert_eq!(status, StatusCode::OK);
    }
}

/// Reads every account's row again and again until `stop`: each read must answer its row,
/// at the version it last had or later. Returns how many reads it made.
async fn read_throughout(caller: Caller, stop: Arc<AtomicBool>) -> usize {
    let mut seen = vec![0_u64; ACCOUNTS];
    let mut reads = 0;
    while !stop.load(Ordering::Relaxed) {
        for (n, last) in seen.iter_mut().enumerate() {
            let version = caller.view_version(n).await.unwrap();
            assert!(version >= *last, "a{n}: {version} after {last}");
            *last = version;
            reads += 1;
        }
    }
    reads
}

/// Deposits 1 into the accounts in turn until `stop`; returns how many it made.
async fn deposit_throughout(caller: Caller, stop: Arc<AtomicBool>) -> usize {
    let mut made = 0;
    while !stop.load(Ordering::Relaxed) {
        let n = made % ACCOUNTS;
        let path = format!("/account/a{n}/deposit");
        let status = caller
            .send(&path, &format!("dep-{made}"), json!({"amount": 1}))
            .await;
        assert_eq!(status, StatusCode::OK);
        made += 1;
    }
    made
}

/// Polls `GET /rebuilds` until the view's rebuild has swapped (60 s at most).
async fn swapped(operator: &Caller) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = operator.get("/rebuilds", OPERATOR_TOKEN).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let rebuild = body["rebuilds"]
            .as_array()
            .and_then(|all| all.iter().find(|r| r["view"] == VIEW))
            .cloned();
        if let Some(rebuild) = rebuild {
            assert_ne!(rebuild["state"], "FAILED", "{rebuild}");
            if rebuild["state"] == "SWAPPED" {
                return rebuild;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until generation 0's rows are dropped from `store` (60 s at most).
async fn old_generation_dropped(store: &str) {
    let stores = wow_service::open_store(store).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let key = ViewKey::new(VIEW, "tenant-a", "a0");
    while stores.views.load(&key).await.unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "generation 0 kept");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Only the operator's token starts a rebuild, of a view that exists.
async fn only_the_operator_starts_a_rebuild(operator: &Caller) {
    let path = format!("/rebuilds/{VIEW}");
    assert_eq!(operator.post(&path, None).await, StatusCode::UNAUTHORIZED);
    let tenant = operator.post(&path, Some(TENANT_TOKEN)).await;
    assert_eq!(tenant, StatusCode::FORBIDDEN);
    let unknown = operator
        .post("/rebuilds/no_such_view", Some(OPERATOR_TOKEN))
        .await;
    assert_eq!(unknown, StatusCode::NOT_FOUND);
    let started = operator.post(&path, Some(OPERATOR_TOKEN)).await;
    assert_eq!(started, StatusCode::ACCEPTED);
}

/// The rebuild on `store`, started through `operator`, while `live` answers readers and
/// takes deposits.
async fn readers_are_answered_throughout(store: &str, operator: &Caller, live: &Caller) {
    open_accounts(live).await;
    let stop = Arc::new(AtomicBool::new(false));
    let reader = tokio::spawn(read_throughout(live.clone(), stop.clone()));
    let writer = tokio::spawn(deposit_throughout(live.clone(), stop.clone()));
    only_the_operator_starts_a_rebuild(operator).await;
    let rebuild = swapped(operator).await;
    assert_eq!(rebuild["generation"], 1, "{rebuild}");
    assert_eq!(rebuild["aggregatesDone"], ACCOUNTS, "{rebuild}");
    old_generation_dropped(store).await;
    stop.store(true, Ordering::Relaxed);
    let (reads, deposits) = (reader.await.unwrap(), writer.await.unwrap());
    assert!(
        reads > ACCOUNTS && deposits > 0,
        "{reads} reads, {deposits} deposits"
    );
    for n in 0..ACCOUNTS {
        let (status, state, version) = live
            .get_state(&format!("/account/a{n}/state"), TENANT_TOKEN)
            .await;
        assert_eq!(status, StatusCode::OK, "{state}");
        assert_eq!(
            live.view_version(n).await.unwrap(),
            version.unwrap(),
            "a{n}: the new generation has every deposit"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_readers_are_answered_throughout_a_rebuild() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("wow.db").display());
    let served = serve(&store);
    let caller = Caller::of(&served);
    readers_are_answered_throughout(&store, &caller, &caller).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_second_process_answers_readers_throughout_a_rebuild() {
    let Some((base, schema)) = support::postgres_schema("rebuild") else {
        return;
    };
    let store = format!("{base}?schema={schema}");
    let rebuilding = serve(&store);
    let serving = serve(&store);
    let (operator, live) = (Caller::of(&rebuilding), Caller::of(&serving));
    readers_are_answered_throughout(&store, &operator, &live).await;
    drop((rebuilding, serving));
    support::drop_schema(&base, &schema);
}
