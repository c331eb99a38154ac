//! Owners and spaces are access boundaries inside a tenant over real HTTP (SPEC TN-2): with
//! tokens bound to `tenant-a/alice`, `tenant-a/bob` and the whole `tenant-a` (`ops`), bob can
//! neither command nor read alice's accounts, on any route, and learns nothing of them beyond
//! the 403; queries and lists answer each owner its own rows; `ops` sees every owner's.
//! On SQLite, and on PostgreSQL (its own schema) for the same scenario.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use reqwest::{Client, RequestBuilder, StatusCode};
use serde_json::{json, Value};
use support::Served;

const TOKENS: &str = "alice=tenant-a/alice,bob=tenant-a/bob,ops=tenant-a,\
alice-s1=tenant-a/alice/s1,alice-s2=tenant-a/alice/s2";

struct Api {
    client: Client,
    address: String,
}

impl Api {
    fn new(served: &Served) -> Self {
        Self {
            client: Client::new(),
            address: served.address.clone(),
        }
    }

    fn post(&self, token: &str, path: &str) -> RequestBuilder {
        self.client
            .post(format!("http://{}/{path}", self.address))
            .bearer_auth(token)
    }

    async fn answer(request: RequestBuilder) -> (StatusCode, Value) {
        let response = request.send().await.unwrap();
        (
            response.status(),
            response.json().await.unwrap_or(Value::Null),
        )
    }

    async fn command(
        &self,
        token: &str,
        path: &str,
        request_id: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        let request = self
            .post(token, path)
            .header("Command-Request-Id", request_id)
            .header("Command-Wait-Stage", "PROJECTED")
            .json(&body);
        Self::answer(request).await
    }

    async fn get(&self, token: &str, path: &str) -> (StatusCode, Value) {
        let request = self
            .client
            .get(format!("http://{}/{path}", self.address))
            .bearer_auth(token);
        Self::answer(request).await
    }

    async fn query(&self, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
        Self::answer(self.post(token, path).json(&body)).await
    }

    /// The aggregate ids of a list answer (snapshots or streams), sorted.
    async fn listed(&self, token: &str, path: &str, body: Value) -> Vec<String> {
        let (status, list) = self.query(token, path, body).await;
        assert_eq!(status, 200, "{path}: {list}");
        ids(&list)
    }
}

fn ids(list: &Value) -> Vec<String> {
    let mut ids: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["aggregateId"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// A refusal of SPEC TN-2: 403 with `code`, and nothing of the aggregate.
fn assert_refused(status: StatusCode, body: &Value, code: &str, what: &str) {
    assert_eq!(status, 403, "{what}: {body}");
    assert_eq!(body["errorCode"], code, "{what}: {body}");
    for field in ["state", "version", "stream", "status", "body"] {
        assert!(body.get(field).is_none(), "{what}: no {field}: {body}");
    }
    assert!(
        body.get("aggregateVersion").is_none_or(Value::is_null),
        "{what}: no version: {body}"
    );
    assert!(
        body["result"].get("originalCommandId").is_none(),
        "{what}: no replay of a decision: {body}"
    );
}

fn now_millis() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Polls `read` until it gives `expected`, for up to 20 s (the snapshot view is a projection).
async fn eventually<F, Fut>(what: &str, expected: Value, read: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = read().await;
        if got == expected {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {got}, not {expected}");
        tokio::task::yield_now().await;
    }
}

/// The whole scenario against a served process.
async fn owners_are_access_boundaries(api: &Api) {
    let alice_open = open_the_accounts(api).await;
    let alice_command = alice_open["commandId"].as_str().unwrap();
    bobs_commands_to_alices_account_are_refused(api, alice_command).await;
    bobs_commands_recorded_nothing(api).await;
    bobs_reads_of_alices_account_are_refused(api).await;
    an_unowned_aggregate_is_for_tenant_wide_tokens_only(api).await;
    ops_sees_and_commands_every_owners(api).await;
    counts_answer_each_owner_its_own_rows(api).await;
    lists_answer_each_owner_its_own_rows(api).await;
    pages_singles_and_streams_answer_each_owner_its_own_rows(api).await;
    the_operators_routes_are_for_tenant_wide_tokens(api).await;
}

/// The body of an account's `open` command.
fn open_body(name: &str) -> Value {
    json!({"name": name, "balance": 100})
}

/// Bob's command to `path` with `request_id`, refused as `IllegalAccessOwnerAggregate`.
async fn bob_is_refused_a_command(
    api: &Api,
    path: &str,
    request_id: &str,
    body: Value,
    what: &str,
) -> Value {
    let (status, refused) = api.command("bob", path, request_id, body).await;
    assert_refused(status, &refused, "IllegalAccessOwnerAggregate", what);
    refused
}

/// Opens alice's two accounts, bob's and an unowned one (by `ops`); answers alice's first open.
async fn open_the_accounts(api: &Api) -> Value {
    let mut alice_open = Value::Null;
    for (token, path, request_id) in [
        ("alice", "account/acc-a/open", "open-a"),
        ("alice", "account/acc-a2/open", "open-a2"),
        ("bob", "account/acc-b/open", "open-b"),
        ("ops", "account/acc-old/open", "open-old"),
    ] {
        let (status, opened) = api.command(token, path, request_id, open_body(token)).await;
        assert_eq!(status, 200, "{path}: {opened}");
        if request_id == "open-a" {
            alice_open = opened;
        }
    }
    alice_open
}

/// Bob's commands to alice's account, on every command route: refused, nothing of alice's
/// decision replayed.
async fn bobs_commands_to_alices_account_are_refused(api: &Api, alice_command: &str) {
    let refused = bob_is_refused_a_command(
        api,
        "account/acc-a/deposit",
        "bob-d1",
        json!({"amount": 1}),
        "bob's deposit",
    )
    .await;
    assert_eq!(
        refused["requestId"], "bob-d1",
        "the caller's own request id only"
    );
    // A create of alice's id, even with alice's request id: no replay, no DuplicateAggregateId.
    let refused = bob_is_refused_a_command(
        api,
        "account/acc-a/open",
        "open-a",
        open_body("bob"),
        "bob's open",
    )
    .await;
    assert!(!refused.to_string().contains(alice_command), "{refused}");
    let refused = bob_is_refused_a_command(
        api,
        "account/acc-a/deposit",
        "open-a",
        json!({"amount": 1}),
        "alice's id",
    )
    .await;
    assert!(!refused.to_string().contains(alice_command), "{refused}");
    // The soft delete too.
    let (status, refused) = Api::answer(
        api.client
            .delete(format!("http://{}/account/acc-a", api.address))
            .bearer_auth("bob")
            .header("Command-Request-Id", "bob-del"),
    )
    .await;
    assert_refused(
        status,
        &refused,
        "IllegalAccessOwnerAggregate",
        "bob's delete",
    );
    // A header naming alice does not make bob alice: the token wins.
    let (status, refused) = Api::answer(
        api.post("bob", "account/acc-a/deposit")
            .header("Command-Request-Id", "bob-d2")
            .header("Command-Owner-Id", "alice")
            .json(&json!({"amount": 1})),
    )
    .await;
    assert_refused(
        status,
        &refused,
        "IllegalAccessOwnerAggregate",
        "bob as alice",
    );
}

/// Bob's refused commands left no decision behind and alice's history unchanged.
async fn bobs_commands_recorded_nothing(api: &Api) {
    for request_id in ["bob-d1", "bob-d2", "bob-del"] {
        let (status, lookup) = api
            .get("ops", &format!("account/acc-a/requests/{request_id}"))
            .await;
        assert_eq!(
            (status, lookup["status"].clone()),
            (StatusCode::NOT_FOUND, json!("NONE")),
            "nothing decided for {request_id}: {lookup}"
        );
    }
    let (status, history) = api.get("ops", "account/acc-a/event/1/100").await;
    assert_eq!(status, 200, "{history}");
    assert_eq!(
        history.as_array().unwrap().len(),
        1,
        "alice's history unchanged"
    );
}

/// Bob's reads of alice's account: every route refused; each owner still reads its own.
async fn bobs_reads_of_alices_account_are_refused(api: &Api) {
    let time = now_millis();
    for path in [
        "account/acc-a/state".to_owned(),
        "account/acc-a/state/1".to_owned(),
        format!("account/acc-a/state/time/{time}"),
        "account/acc-a/event/1/100".to_owned(),
        "account/acc-a/requests/open-a".to_owned(),
        "account/acc-a/requests/bob-d1".to_owned(),
        "account/acc-a/view".to_owned(),
        "tenant/tenant-a/account/acc-a/state".to_owned(),
        "owner/bob/account/acc-a/state".to_owned(),
        "bank/account/acc-a/state".to_owned(),
    ] {
        let (status, body) = api.get("bob", &path).await;
        assert_refused(status, &body, "IllegalAccessOwnerAggregate", &path);
    }
    // `/owner/alice/…` with bob's token: refused whatever follows.
    // Wow's owner-id read too (`/owner/{o}/{aggregate}/state`, the aggregate whose id is o's).
    for path in [
        "owner/alice/account/acc-b/state",
        "owner/alice/health",
        "owner/alice/account/state",
    ] {
        let (status, body) = api.get("bob", path).await;
        assert_refused(status, &body, "IllegalAccessOwnerAggregate", path);
    }
    // Bob's own owner-id read: no account has his id, as for anyone.
    let (status, body) = api.get("bob", "owner/bob/account/state").await;
    assert_eq!(status, 404, "{body}");
    // Bob's own, alice's own: as before.
    for (token, path) in [
        ("bob", "account/acc-b/state"),
        ("bob", "owner/bob/account/acc-b/state"),
        ("alice", "account/acc-a/state"),
        ("alice", "account/acc-a/view"),
        ("alice", "account/acc-a/requests/open-a"),
    ] {
        let (status, body) = api.get(token, path).await;
        assert_eq!(status, 200, "{token} {path}: {body}");
    }
}

/// An aggregate that records no owner (created by a tenant-wide token, or before tokens bound
/// owners): only tenant-wide tokens reach it.
async fn an_unowned_aggregate_is_for_tenant_wide_tokens_only(api: &Api) {
    let (status, body) = api.get("alice", "account/acc-old/state").await;
    assert_refused(
        status,
        &body,
        "IllegalAccessOwnerAggregate",
        "an unowned account",
    );
    let (status, body) = api
        .command(
            "alice",
            "account/acc-old/deposit",
            "a-old",
            json!({"amount": 1}),
        )
        .await;
    assert_refused(
        status,
        &body,
        "IllegalAccessOwnerAggregate",
        "an unowned account",
    );
}

/// Ops sees and commands every owner's.
async fn ops_sees_and_commands_every_owners(api: &Api) {
    for path in [
        "account/acc-a/state",
        "account/acc-b/state",
        "account/acc-old/state",
    ] {
        let (status, body) = api.get("ops", path).await;
        assert_eq!(status, 200, "ops {path}: {body}");
    }
    let (status, deposited) = api
        .command(
            "ops",
            "account/acc-a/deposit",
            "ops-d1",
            json!({"amount": 5}),
        )
        .await;
    assert_eq!(status, 200, "{deposited}");
}

/// Snapshot and event counts: each owner its own rows, ops every owner's.
async fn counts_answer_each_owner_its_own_rows(api: &Api) {
    let count = |token: &'static str, path: &'static str, body: Value| {
        let body = body.clone();
        async move { api.query(token, path, body).await.1 }
    };
    eventually("ops's snapshot count", json!(4), || {
        count("ops", "account/snapshot/count", json!({"operator": "ALL"}))
    })
    .await;
    for (token, expected) in [("bob", json!(1)), ("alice", json!(2))] {
        let (_, total) = api
            .query(token, "account/snapshot/count", json!({"operator": "ALL"}))
            .await;
        assert_eq!(total, expected, "{token}'s snapshot count");
        let (_, total) = api
            .query(token, "account/event/count", json!({"operator": "ALL"}))
            .await;
        assert_eq!(total, expected, "{token}'s event count");
    }
    let (_, total) = api
        .query("ops", "account/event/count", json!({"operator": "ALL"}))
        .await;
    assert_eq!(total, 5, "ops counts every owner's streams");
}

/// The query matching every row.
fn all_rows() -> Value {
    json!({"condition": {"operator": "ALL"}, "limit": 100})
}

/// Lists: each owner its own rows, whatever the condition says.
async fn lists_answer_each_owner_its_own_rows(api: &Api) {
    let all = all_rows();
    let alice_only = json!({"condition": {"operator": "ID", "value": "acc-a"}, "limit": 100});
    for path in [
        "account/snapshot/list",
        "account/snapshot/list/state",
        "account/event/list",
    ] {
        let (status, list) = api.query("bob", path, all.clone()).await;
        assert_eq!(status, 200, "{path}: {list}");
        assert!(!list.to_string().contains("acc-a"), "bob's {path}: {list}");
        assert!(
            api.listed("bob", path, alice_only.clone()).await.is_empty(),
            "bob's {path} naming acc-a"
        );
    }
    for path in ["account/snapshot/list", "account/event/list"] {
        assert_eq!(
            api.listed("bob", path, all.clone()).await,
            ["acc-b"],
            "{path}"
        );
        assert_eq!(
            api.listed("alice", path, all.clone()).await,
            ["acc-a", "acc-a2"],
            "{path}"
        );
        assert_eq!(
            api.listed("ops", path, all.clone()).await,
            ["acc-a", "acc-a2", "acc-b", "acc-old"],
            "{path}"
        );
    }
}

/// Pages, singles and the lists streamed as server-sent events: bob's rows only; a header
/// naming another owner is refused.
async fn pages_singles_and_streams_answer_each_owner_its_own_rows(api: &Api) {
    let all = all_rows();
    for path in ["account/snapshot/paged", "account/event/paged"] {
        let paged =
            json!({"condition": {"operator": "ALL"}, "pagination": {"index": 1, "size": 10}});
        let (status, page) = api.query("bob", path, paged).await;
        assert_eq!(status, 200, "{path}: {page}");
        assert_eq!(page["total"], 1, "{path}: {page}");
        assert_eq!(ids(&page["list"]), ["acc-b"], "{path}");
    }
    for path in ["account/snapshot/single", "account/snapshot/single/state"] {
        let single = json!({"condition": {"operator": "ID", "value": "acc-a"}});
        let (status, single) = api.query("bob", path, single).await;
        assert_eq!(status, 404, "bob's {path} of acc-a: {single}");
    }
    // The lists streamed as server-sent events (Wow's `listStream`) too.
    for path in ["account/snapshot/list", "account/event/list"] {
        let response = api
            .post("bob", path)
            .header("Accept", "text/event-stream")
            .json(&all)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        assert!(text.contains("acc-b"), "{path}: {text}");
        assert!(!text.contains("acc-a"), "bob's streamed {path}: {text}");
    }
    // A header naming another owner than the token's: refused, not a way round.
    let (status, body) = Api::answer(
        api.post("bob", "account/snapshot/list")
            .header("Command-Owner-Id", "alice")
            .json(&all),
    )
    .await;
    assert_refused(
        status,
        &body,
        "IllegalAccessOwnerAggregate",
        "bob's query as alice",
    );
}

/// The operator's routes are for tenant-wide tokens.
async fn the_operators_routes_are_for_tenant_wide_tokens(api: &Api) {
    let (status, body) = api.get("bob", "compensation/failures").await;
    assert_eq!(
        (status, body["errorCode"].clone()),
        (StatusCode::FORBIDDEN, json!("Forbidden"))
    );
    let (status, body) = api.get("ops", "compensation/failures").await;
    assert_eq!(status, 200, "{body}");
}

/// Spaces inside an owner: a token bound to `alice/s2` does not reach `alice/s1`'s accounts; a
/// token bound to `alice` alone reaches both spaces.
async fn spaces_are_access_boundaries(api: &Api) {
    let (status, opened) = api
        .command(
            "alice-s1",
            "account/sp-1/open",
            "open-sp1",
            json!({"name": "S1", "balance": 10}),
        )
        .await;
    assert_eq!(status, 200, "{opened}");
    let (status, refused) = api
        .command(
            "alice-s2",
            "account/sp-1/deposit",
            "s2-d1",
            json!({"amount": 1}),
        )
        .await;
    assert_refused(
        status,
        &refused,
        "IllegalAccessSpaceAggregate",
        "s2's deposit",
    );
    for path in [
        "account/sp-1/state",
        "account/sp-1/event/1/10",
        "account/sp-1/view",
    ] {
        let (status, body) = api.get("alice-s2", path).await;
        assert_refused(status, &body, "IllegalAccessSpaceAggregate", path);
    }
    let (status, body) = Api::answer(
        api.client
            .get(format!("http://{}/account/sp-1/state", api.address))
            .bearer_auth("alice-s2")
            .header("Wow-Space-Id", "s1"),
    )
    .await;
    assert_refused(status, &body, "IllegalAccessSpaceAggregate", "s2 naming s1");
    let (status, body) = api.get("alice", "account/sp-1/state").await;
    assert_eq!(status, 200, "alice's own, in any space: {body}");
    let (status, body) = api.get("bob", "account/sp-1/state").await;
    assert_refused(status, &body, "IllegalAccessOwnerAggregate", "bob");
    let (_, total) = api
        .query(
            "alice-s2",
            "account/event/count",
            json!({"operator": "ALL"}),
        )
        .await;
    assert_eq!(total, 2, "s2 sees alice's streams in no space, not s1's");
    let (_, total) = api
        .query(
            "alice-s1",
            "account/event/count",
            json!({"operator": "ALL"}),
        )
        .await;
    assert_eq!(total, 3, "s1 sees sp-1's and alice's in no space");
    let (status, body) = api.get("alice-s2", "account/acc-a/state").await;
    assert_eq!(
        status, 200,
        "an aggregate in no space is in every space of its owner: {body}"
    );
}

/// SPEC TN-1: the guards the server wraps around a query (the deletion filter of snapshot
/// queries, the owner's and space's narrowing) count against none of the caller's limits: a
/// bound caller's query may hold 64 conditions and nest 16 deep, as the documentation says,
/// and one more of either is still refused.
async fn the_callers_limits_count_the_callers_query(api: &Api) {
    let leaf = json!({"field": "state.balance", "operator": "GTE", "value": 0});
    let nested = |levels: usize| {
        (1..levels).fold(
            leaf.clone(),
            |inner, _| json!({"operator": "AND", "children": [inner]}),
        )
    };
    let or_of =
        |children: usize| json!({"operator": "OR", "children": vec![leaf.clone(); children]});
    for (token, space) in [("bob", None), ("alice-s1", Some("s1"))] {
        for path in ["account/snapshot/count", "account/event/count"] {
            for (what, condition, allowed) in [
                ("16 levels", nested(16), true),
                ("64 conditions", or_of(63), true),
                ("17 levels", nested(17), false),
                ("65 conditions", or_of(64), false),
            ] {
                // A count takes the condition itself as its body.
                let mut request = api.post(token, path).json(&condition);
                if let Some(space) = space {
                    request = request.header("Wow-Space-Id", space);
                }
                let (status, body) = Api::answer(request).await;
                if allowed {
                    assert_eq!(status, 200, "{token} {path} {what}: {body}");
                } else {
                    assert_eq!(status, 400, "{token} {path} {what}: {body}");
                }
            }
        }
    }
}

fn serve(store: &str) -> Served {
    Served::start(
        &["--listen", "127.0.0.1:0"],
        &[
            ("WOW_STORE", store),
            ("WOW_AUTH_TOKENS", TOKENS),
            ("WOW_SNAPSHOT_QUERIES", "true"),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_and_spaces_are_access_boundaries_over_http_on_sqlite() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("wow.db").display());
    let served = serve(&store);
    let api = Api::new(&served);
    owners_are_access_boundaries(&api).await;
    spaces_are_access_boundaries(&api).await;
    the_callers_limits_count_the_callers_query(&api).await;
    assert!(served.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_and_spaces_are_access_boundaries_over_http_on_postgres() {
    let postgres = std::env::var("WOW_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let (client, connection) = match tokio_postgres::connect(&postgres, tokio_postgres::NoTls).await
    {
        Ok(connected) => connected,
        Err(error) => {
            wow_tck::skip::unavailable(
                wow_tck::skip::Requirement::Backends,
                &format!("no PostgreSQL at {postgres} ({error})"),
            );
            return;
        }
    };
    tokio::spawn(connection);
    let unique = wow_core::id::new_id().replace('-', "");
    let schema = format!("owners_{}", &unique[unique.len() - 12..]);
    let served = serve(&format!("{postgres}?schema={schema}"));
    let api = Api::new(&served);
    owners_are_access_boundaries(&api).await;
    spaces_are_access_boundaries(&api).await;
    the_callers_limits_count_the_callers_query(&api).await;
    assert!(served.stop().success());
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
}

#[test]
fn a_malformed_token_binding_stops_the_service_at_startup() {
    for spec in ["x=a/b/c/d", "x=tenant-a/", "x=tenant-a//s1"] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_wow"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--store",
                "sqlite::memory:",
            ])
            .env("WOW_AUTH_TOKENS", spec)
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        assert!(!output.status.success(), "{spec}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("WOW_AUTH_TOKENS") && stderr.contains("tenant[/owner[/space]]"),
            "{spec}: {stderr}"
        );
    }
}
