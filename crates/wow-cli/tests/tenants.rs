//! Tenants are namespaces over real HTTP (SPEC TN-1): two tenants use the same account id and
//! the same request ids on every route of `wow serve`, with bearer tokens and with
//! `Command-Tenant-Id`, and nothing one of them does is visible to the other.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use reqwest::{Client, RequestBuilder, StatusCode};
use serde_json::{json, Value};
use support::Served;

/// How one tenant names itself: a bearer token, or the tenant header.
#[derive(Clone, Copy)]
enum Caller {
    Token(&'static str),
    Header(&'static str),
}

impl Caller {
    fn on(self, request: RequestBuilder) -> RequestBuilder {
        match self {
            Caller::Token(token) => request.bearer_auth(token),
            Caller::Header(tenant) => request.header("Command-Tenant-Id", tenant),
        }
    }
}

struct Api {
    client: Client,
    address: String,
}

impl Api {
    async fn command(
        &self,
        caller: Caller,
        path: &str,
        request_id: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        self.command_until(caller, path, request_id, body, "PROJECTED")
            .await
    }

    async fn command_until(
        &self,
        caller: Caller,
        path: &str,
        request_id: &str,
        body: Value,
        stage: &str,
    ) -> (StatusCode, Value) {
        let response = caller
            .on(self.client.post(format!("http://{}/{path}", self.address)))
            .header("Command-Request-Id", request_id)
            .header("Command-Wait-Stage", stage)
            .json(&body)
            .send()
            .await
            .unwrap();
        (
            response.status(),
            response.json().await.unwrap_or(Value::Null),
        )
    }

    async fn get(&self, caller: Option<Caller>, path: &str) -> (StatusCode, Value) {
        let request = self.client.get(format!("http://{}/{path}", self.address));
        let request = match caller {
            Some(caller) => caller.on(request),
            None => request,
        };
        let response = request.send().await.unwrap();
        (
            response.status(),
            response.json().await.unwrap_or(Value::Null),
        )
    }
}

/// The scenario, for tenants `a` and `b` named by `a_caller` and `b_caller`.
async fn two_tenants_share_nothing(api: &Api, a: Caller, b: Caller, b_tenant: &str) {
    both_open_alice_with_the_same_request_id(api, a, b, b_tenant).await;
    let deposits = the_same_request_id_is_each_tenants_own(api, a, b).await;
    a_rejection_is_its_tenants_alone(api, a, b).await;
    every_read_answers_each_tenant_its_own_account(api, a, b, &deposits).await;
    a_transfer_goes_to_the_senders_own_tenant(api, a, b).await;
    let (status, failures) = api.get(Some(b), "compensation/failures").await;
    assert_eq!(status, 200, "{failures}");
}

/// Both open `alice` with the same request id and different bodies: two accounts.
async fn both_open_alice_with_the_same_request_id(api: &Api, a: Caller, b: Caller, b_tenant: &str) {
    let (status, a_open) = api
        .command(
            a,
            "account/alice/open",
            "open-1",
            json!({"name": "Ann", "balance": 100}),
        )
        .await;
    assert_eq!(status, 200, "{a_open}");
    let (status, b_open) = api
        .command(
            b,
            "account/alice/open",
            "open-1",
            json!({"name": "Bob", "balance": 5}),
        )
        .await;
    assert_eq!(
        status, 200,
        "b opens its own alice, not a duplicate of a's: {b_open}"
    );
    assert_eq!(b_open["tenantId"], b_tenant);
    assert_eq!(b_open["aggregateVersion"], 1);
}

/// The same request id with different bodies: no RequestIdReused across tenants, and a resend
/// is answered with the sender's own original, never the other tenant's. a's and b's deposits.
async fn the_same_request_id_is_each_tenants_own(
    api: &Api,
    a: Caller,
    b: Caller,
) -> (Value, Value) {
    let (status, a_dep) = api
        .command(a, "account/alice/deposit", "d-1", json!({"amount": 10}))
        .await;
    assert_eq!(status, 200, "{a_dep}");
    let (status, b_dep) = api
        .command(b, "account/alice/deposit", "d-1", json!({"amount": 1}))
        .await;
    assert_eq!(status, 200, "{b_dep}");

    // A resend is answered with the sender's own original, never the other tenant's.
    for (caller, original, amount) in [(a, &a_dep, 10), (b, &b_dep, 1)] {
        let (status, again) = api
            .command(
                caller,
                "account/alice/deposit",
                "d-1",
                json!({"amount": amount}),
            )
            .await;
        assert_eq!(status, 409, "{again}");
        assert_eq!(again["errorCode"], "DuplicateRequestId");
        assert_eq!(again["result"]["originalCommandId"], original["commandId"]);
        assert_eq!(again["aggregateVersion"], 2);
    }
    (a_dep, b_dep)
}

/// b's rejection is b's alone: a's look-up says NONE and a's own w-1 goes through.
async fn a_rejection_is_its_tenants_alone(api: &Api, a: Caller, b: Caller) {
    let (status, refused) = api
        .command(b, "account/alice/withdraw", "w-1", json!({"amount": 1000}))
        .await;
    assert_eq!(status, 422, "{refused}");
    let (status, lookup) = api.get(Some(a), "account/alice/requests/w-1").await;
    assert_eq!(status, 404, "{lookup}");
    assert_eq!(lookup["status"], "NONE");
    let (status, a_withdraw) = api
        .command(a, "account/alice/withdraw", "w-1", json!({"amount": 1}))
        .await;
    assert_eq!(status, 200, "{a_withdraw}");
}

/// Every read (view, state, history, request look-up) answers each tenant with its own
/// account.
async fn every_read_answers_each_tenant_its_own_account(
    api: &Api,
    a: Caller,
    b: Caller,
    (a_dep, b_dep): &(Value, Value),
) {
    for (caller, balance, name) in [(a, 109, "Ann"), (b, 6, "Bob")] {
        let (status, view) = api.get(Some(caller), "account/alice/view").await;
        assert_eq!(status, 200, "{view}");
        assert_eq!(
            (view["balance"].clone(), view["name"].clone()),
            (json!(balance), json!(name))
        );
        let (status, state) = api.get(Some(caller), "account/alice/state").await;
        assert_eq!(status, 200, "{state}");
        assert_eq!(state["balance"], balance);
        let (status, history) = api.get(Some(caller), "account/alice/event/1/100").await;
        assert_eq!(status, 200, "{history}");
        let names: Vec<_> = history
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| {
                s["body"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["name"].clone())
            })
            .collect();
        let expected = if name == "Ann" { 3 } else { 2 };
        assert_eq!(names.len(), expected, "only its own streams: {history}");
        let (status, lookup) = api.get(Some(caller), "account/alice/requests/d-1").await;
        assert_eq!(status, 200, "{lookup}");
        let own = if name == "Ann" { a_dep } else { b_dep };
        assert_eq!(lookup["commandId"], own["commandId"]);
    }
}

/// A transfer goes to an account of the sender's own tenant: `carol` is a's, so b's transfer
/// to `carol` finds no such account and the saga cancels it.
async fn a_transfer_goes_to_the_senders_own_tenant(api: &Api, a: Caller, b: Caller) {
    let (status, _) = api
        .command(
            a,
            "account/carol/open",
            "open-c",
            json!({"name": "Cy", "balance": 0}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, sent) = api
        .command_until(
            b,
            "account/alice/transfer",
            "t-1",
            json!({"to": "carol", "amount": 1}),
            "SAGA_HANDLED",
        )
        .await;
    assert_eq!(status, 200, "{sent}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, view) = api.get(Some(b), "account/alice/view").await;
        if (view["balance"].clone(), view["held"].clone()) == (json!(6), json!(0)) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "b's transfer was not cancelled: {view}"
        );
        tokio::task::yield_now().await;
    }
    let (_, carol) = api.get(Some(a), "account/carol/view").await;
    assert_eq!(
        carol["balance"], 0,
        "a's carol received nothing of b's: {carol}"
    );
    let (status, _) = api.get(Some(b), "account/carol/view").await;
    assert_eq!(status, 404, "b holds no carol");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_with_bearer_tokens_share_nothing_over_http() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("wow.db").display());
    let served = Served::start(
        &["--listen", "127.0.0.1:0"],
        &[
            ("WOW_STORE", &store),
            ("WOW_AUTH_TOKENS", "ta=tenant-a,tb=tenant-b"),
        ],
    );
    let api = Api {
        client: Client::new(),
        address: served.address.clone(),
    };
    two_tenants_share_nothing(&api, Caller::Token("ta"), Caller::Token("tb"), "tenant-b").await;

    // The tenant header cannot override the token's tenant.
    let (status, view) = api
        .get(Some(Caller::Token("tb")), "account/alice/view")
        .await;
    assert_eq!(
        (status, view["balance"].clone()),
        (StatusCode::OK, json!(6))
    );
    let response = api
        .client
        .get(format!("http://{}/account/alice/view", api.address))
        .bearer_auth("tb")
        .header("Command-Tenant-Id", "tenant-a")
        .send()
        .await
        .unwrap();
    let view: Value = response.json().await.unwrap();
    assert_eq!(view["balance"], 6, "still tenant-b's account");
    // No token: 401 on every route, nothing of anyone's.
    for path in [
        "account/alice/view",
        "account/alice/state",
        "account/alice/requests/d-1",
    ] {
        let (status, body) = api.get(None, path).await;
        assert_eq!(status, 401, "{path}: {body}");
        assert_eq!(body["errorCode"], "Unauthorized");
    }
    assert!(served.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_named_by_header_share_nothing_over_http() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("wow.db").display());
    let served = Served::start(&["--listen", "127.0.0.1:0"], &[("WOW_STORE", &store)]);
    let api = Api {
        client: Client::new(),
        address: served.address.clone(),
    };
    two_tenants_share_nothing(
        &api,
        Caller::Header("tenant-a"),
        Caller::Header("tenant-b"),
        "tenant-b",
    )
    .await;
    // The default tenant holds no alice at all.
    let (status, _) = api.get(None, "account/alice/view").await;
    assert_eq!(status, 404);
    assert!(served.stop().success());
}
