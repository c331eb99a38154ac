//! Wow's route shapes over real HTTP against `wow serve`: the `/tenant/{tenantId}/` prefix
//! on every route (commands, queries, state), the bare state and its time travel under it and
//! without it (Wow's `LoadStateAggregateClient`), its version in `ETag`, and with auth on, a
//! token that must act for the path's tenant.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use support::Served;

async fn call(
    client: &Client,
    method: reqwest::Method,
    url: String,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    // Commands are awaited until their projections ran (queries ignore the header).
    let mut request = client
        .request(method, url)
        .header("Command-Wait-Stage", "PROJECTED");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `POST /{path}` with `body` as JSON, as `call` sends it (no token).
async fn post(client: &Client, at: &str, path: &str, body: Value) -> (StatusCode, Value) {
    call(
        client,
        reqwest::Method::POST,
        format!("http://{at}/{path}"),
        None,
        Some(body),
    )
    .await
}

/// `GET /{path}`, as `call` sends it (no token).
async fn get(client: &Client, at: &str, path: &str) -> (StatusCode, Value) {
    send(client, reqwest::Method::GET, at, path).await
}

/// `method /{path}` without a body, as `call` sends it (no token).
async fn send(
    client: &Client,
    method: reqwest::Method,
    at: &str,
    path: &str,
) -> (StatusCode, Value) {
    call(client, method, format!("http://{at}/{path}"), None, None).await
}

/// `GET /{path}` of a state, in `tenant` when given (`Command-Tenant-Id`): the status, the
/// bare state and its version (its `ETag`).
async fn get_state(
    client: &Client,
    at: &str,
    path: &str,
    tenant: Option<&str>,
) -> (StatusCode, Value, Option<u64>) {
    let mut request = client.get(format!("http://{at}/{path}"));
    if let Some(tenant) = tenant {
        request = request.header("Command-Tenant-Id", tenant);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let version = support::tagged_version(response.headers());
    (
        status,
        response.json().await.unwrap_or(Value::Null),
        version,
    )
}

/// The items of a server-sent event stream, one per `data:` line.
fn sse_data(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[tokio::test]
async fn the_tenant_prefix_reaches_every_route_and_answers_wows_state_shape() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("routes.db").display());
    let served = Served::start(
        &["--store", &store, "--listen", "127.0.0.1:0"],
        &[("WOW_SNAPSHOT_QUERIES", "true")],
    );
    let (client, at) = (Client::new(), served.address.clone());
    let created = open_and_deposit_under_the_tenant_prefix(&client, &at).await;
    the_prefix_answers_wows_bare_state_and_its_time_travel(&client, &at, created).await;
    without_the_prefix_the_header_names_the_tenant(&client, &at).await;
    queries_and_history_under_the_prefix_are_the_path_tenants(&client, &at).await;
    assert!(served.stop().success());
}

/// Opens `s1` in tenant `t9` through the prefix and deposits 7; answers a time after both.
async fn open_and_deposit_under_the_tenant_prefix(client: &Client, at: &str) -> u128 {
    let (status, opened) = post(
        client,
        at,
        "tenant/t9/account/s1/open",
        json!({"name": "T", "balance": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{opened}");
    assert_eq!(opened["tenantId"], "t9");
    let (status, _) = post(
        client,
        at,
        "tenant/t9/account/s1/deposit",
        json!({"amount": 7}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Wow's shape under the prefix: the bare state, at a version, as of a time, each version in
/// `ETag`.
async fn the_prefix_answers_wows_bare_state_and_its_time_travel(
    client: &Client,
    at: &str,
    created: u128,
) {
    let (status, state, version) = get_state(client, at, "tenant/t9/account/s1/state", None).await;
    assert_eq!((status, version), (StatusCode::OK, Some(2)));
    assert_eq!(
        state,
        json!({"name": "T", "balance": 12, "held": 0, "frozen": false})
    );
    let (_, first, version) = get_state(client, at, "tenant/t9/account/s1/state/1", None).await;
    assert_eq!((first["balance"].as_i64(), version), (Some(5), Some(1)));
    let (status, _) = get(client, at, "tenant/t9/account/s1/state/3").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = get(client, at, "tenant/t9/account/s1/state/time/1").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "nothing existed at 1 ms after the epoch"
    );
    let path = format!("tenant/t9/account/s1/state/time/{created}");
    let (status, now) = get(client, at, &path).await;
    assert_eq!(
        (status, now["balance"].as_i64()),
        (StatusCode::OK, Some(12))
    );
}

/// The same shape without the prefix, in the tenant the header names; another tenant has
/// none.
async fn without_the_prefix_the_header_names_the_tenant(client: &Client, at: &str) {
    let (status, refused) = get(client, at, "account/s1/state").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    let (status, with_header, version) =
        get_state(client, at, "account/s1/state/2", Some("t9")).await;
    assert_eq!(status, StatusCode::OK, "{with_header}");
    assert_eq!(version, Some(2));
    assert_eq!(with_header["balance"], 12);
}

/// Queries and history under the prefix are the path tenant's; a bad tenant id is a 400.
async fn queries_and_history_under_the_prefix_are_the_path_tenants(client: &Client, at: &str) {
    let (_, count) = post(client, at, "tenant/t9/account/snapshot/count", json!({})).await;
    assert_eq!(count, json!(1));
    let (_, count) = post(client, at, "account/snapshot/count", json!({})).await;
    assert_eq!(count, json!(0));
    let (status, history) = get(client, at, "tenant/t9/account/s1/event/1/2").await;
    assert_eq!(
        (status, history.as_array().map(Vec::len)),
        (StatusCode::OK, Some(2))
    );
    let (status, _) = get(client, at, "tenant/bad%20tenant/account/s1/state").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn with_auth_on_the_token_must_act_for_the_paths_tenant() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("auth.db").display());
    let served = Served::start(
        &["--store", &store, "--listen", "127.0.0.1:0"],
        &[
            ("WOW_AUTH_TOKENS", "ta=tenant-a,tb=tenant-b"),
            ("WOW_SNAPSHOT_QUERIES", "true"),
        ],
    );
    let (client, at) = (Client::new(), served.address.clone());
    let open = |token: Option<&'static str>, tenant: &str| {
        call(
            &client,
            reqwest::Method::POST,
            format!("http://{at}/tenant/{tenant}/account/x1/open"),
            token,
            Some(json!({"name": "X", "balance": 1})),
        )
    };
    let (status, body) = open(Some("ta"), "tenant-a").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = open(Some("tb"), "tenant-a").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = open(None, "tenant-a").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, state) = call(
        &client,
        reqwest::Method::GET,
        format!("http://{at}/tenant/tenant-b/account/x1/state"),
        Some("ta"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{state}");
    assert!(served.stop().success());
}

#[tokio::test]
async fn soft_delete_and_recover_as_wow_has_them_across_a_restart() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("delete.db").display());
    let start = || {
        Served::start(
            &["--store", &store, "--listen", "127.0.0.1:0"],
            &[("WOW_SNAPSHOT_QUERIES", "true")],
        )
    };
    let served = start();
    let client = Client::new();
    open_and_delete_d1_at_version_10(&client, &served.address).await;
    a_deleted_aggregate_refuses_commands_and_hides_its_state(&client, &served.address).await;
    assert!(served.stop().success());

    // After a restart the aggregate is still deleted (no snapshot holds the deleted state).
    let served = start();
    a_deleted_aggregate_stays_deleted_and_replays_its_refusal(&client, &served.address).await;
    a_recovered_aggregate_takes_commands_and_its_view_goes_on(&client, &served.address).await;
    assert!(served.stop().success());
}

/// Opens `d1`, deposits eight times and deletes it: the deletion is version 10, where a
/// snapshot falls due.
async fn open_and_delete_d1_at_version_10(client: &Client, at: &str) {
    let (status, _) = post(
        client,
        at,
        "account/d1/open",
        json!({"name": "D", "balance": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    for _ in 0..8 {
        let (status, _) = post(client, at, "account/d1/deposit", json!({"amount": 1})).await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, deleted) = send(client, reqwest::Method::DELETE, at, "account/d1").await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["aggregateVersion"], 10);
}

/// A deleted aggregate refuses commands (and a second delete) with 410 and has no state; its
/// history is kept, and snapshot queries hide it unless asked.
async fn a_deleted_aggregate_refuses_commands_and_hides_its_state(client: &Client, at: &str) {
    let refused = client
        .post(format!("http://{at}/account/d1/deposit"))
        .header("Command-Request-Id", "after-delete")
        .json(&json!({"amount": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::GONE);
    assert_eq!(
        refused.headers()["Wow-Error-Code"],
        "IllegalAccessDeletedAggregate"
    );
    let (status, _) = send(client, reqwest::Method::DELETE, at, "account/d1").await;
    assert_eq!(
        status,
        StatusCode::GONE,
        "a deleted aggregate is deleted once"
    );
    let (status, _) = get(client, at, "account/d1/state").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // History is kept, and snapshot queries hide the deleted aggregate unless asked.
    let (_, history) = get(client, at, "account/d1/event/10/10").await;
    assert_eq!(history[0]["body"][0]["name"], "DefaultAggregateDeleted");
    let (_, active) = post(client, at, "account/snapshot/count", json!({})).await;
    assert_eq!(active, json!(0));
    let (_, any) = post(
        client,
        at,
        "account/snapshot/count",
        json!({"operator": "DELETED", "value": "DELETED"}),
    )
    .await;
    assert_eq!(any, json!(1));
}

/// After a restart a command is still refused, and a resend of the refused request is answered
/// with its recorded refusal.
async fn a_deleted_aggregate_stays_deleted_and_replays_its_refusal(client: &Client, at: &str) {
    let (status, _) = post(client, at, "account/d1/deposit", json!({"amount": 1})).await;
    assert_eq!(status, StatusCode::GONE);
    let replayed = client
        .post(format!("http://{at}/account/d1/deposit"))
        .header("Command-Request-Id", "after-delete")
        .json(&json!({"amount": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(replayed.status(), StatusCode::GONE);
    assert_eq!(replayed.headers()["Wow-Replayed"], "true");
}

/// A recover succeeds once; the recovered aggregate takes commands, its view went on over the
/// lifecycle events, and the built-in commands have no POST route.
async fn a_recovered_aggregate_takes_commands_and_its_view_goes_on(client: &Client, at: &str) {
    let (status, recovered) = send(client, reqwest::Method::PUT, at, "account/d1/recover").await;
    assert_eq!(status, StatusCode::OK, "{recovered}");
    let (status, again) = send(client, reqwest::Method::PUT, at, "account/d1/recover").await;
    assert_eq!(
        (status, again["errorCode"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("IllegalState"))
    );
    let (status, _) = post(client, at, "account/d1/deposit", json!({"amount": 1})).await;
    assert_eq!(status, StatusCode::OK);
    let (_, state, version) = get_state(client, at, "account/d1/state", None).await;
    assert_eq!((version, state["balance"].as_i64()), (Some(12), Some(14)));
    let (_, view) = get(client, at, "account/d1/view").await;
    assert_eq!(
        view["balance"], 14,
        "the view went on over the lifecycle events: {view}"
    );
    let (status, _) = post(client, at, "account/d1/default_delete_aggregate", json!({})).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "the built-ins answer DELETE and PUT only"
    );
}

#[tokio::test]
async fn the_context_and_owner_prefixes_and_the_owner_and_space_survive_a_restart() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("owners.db").display());
    let args = ["--store", store.as_str(), "--listen", "127.0.0.1:0"];
    let env = [("WOW_SNAPSHOT_QUERIES", "true")];
    let served = Served::start(&args, &env);
    let (client, at) = (Client::new(), served.address.clone());
    // As Wow's generated clients send it: the context's alias, the tenant, the owner.
    let (status, opened) = post(
        &client,
        &at,
        "bank/tenant/t1/owner/u1/account/o1/open",
        json!({"name": "O", "balance": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{opened}");
    assert_eq!(opened["tenantId"], "t1");
    let (status, _) = post(
        &client,
        &at,
        "tenant/t1/owner/u2/account/o2/open",
        json!({"name": "P", "balance": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // A later command names no owner: the aggregate keeps its own; the space is Wow's header.
    let deposited = client
        .post(format!("http://{at}/tenant/t1/account/o1/deposit"))
        .header("Wow-Space-Id", "s1")
        .header("Command-Wait-Stage", "PROJECTED")
        .json(&json!({"amount": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(deposited.status(), StatusCode::OK);
    // A bad owner id is refused, in the path or the header, before anything is sent.
    let (status, refused) = post(
        &client,
        &at,
        "owner/no%20spaces/account/o3/open",
        json!({"name": "Q", "balance": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let refused = client
        .post(format!("http://{at}/account/o3/open"))
        .header("Command-Owner-Id", "no spaces")
        .json(&json!({"name": "Q", "balance": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    // An aggregate owned by its own id, as Wow's owner-id aggregates are.
    let (status, _) = post(
        &client,
        &at,
        "tenant/t1/owner/u3/account/u3/open",
        json!({"name": "U", "balance": 3}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    check_owners(&client, &at, "before the restart").await;
    assert!(served.stop().success());
    let served = Served::start(&args, &env);
    check_owners(&client, &served.address, "after the restart").await;
    assert!(served.stop().success());
}

/// What the owners' queries and history answer, the same before and after a restart.
async fn check_owners(client: &Client, at: &str, round: &str) {
    let (status, owned) = post(
        client,
        at,
        "tenant/t1/owner/u1/account/snapshot/list",
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{round}: {owned}");
    let owned = owned.as_array().unwrap();
    assert_eq!(owned.len(), 1, "{round}: {owned:?}");
    assert_eq!(
        (
            &owned[0]["aggregateId"],
            &owned[0]["ownerId"],
            &owned[0]["spaceId"]
        ),
        (&json!("o1"), &json!("u1"), &json!("s1")),
        "{round}"
    );
    assert_eq!(owned[0]["state"]["balance"], 7, "{round}");
    let (_, all) = post(client, at, "tenant/t1/account/snapshot/count", json!({})).await;
    assert_eq!(all, json!(3), "{round}");
    // Wow's LoadOwnerStateAggregateClient: the state of the aggregate whose id is the owner's,
    // with no id in the path; without the owner prefix the path is no read.
    for path in [
        "bank/tenant/t1/owner/u3/account/state",
        "tenant/t1/owner/u3/account/state",
    ] {
        let (status, state, version) = get_state(client, at, path, None).await;
        assert_eq!(status, StatusCode::OK, "{round} {path}: {state}");
        assert_eq!(state["balance"], 3, "{round} {path}: {state}");
        assert_eq!(version, Some(1), "{round} {path}");
    }
    let (status, _, _) = get_state(client, at, "tenant/t1/owner/u9/account/state", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{round}");
    let (status, _, _) = get_state(client, at, "tenant/t1/account/state", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{round}");
    let (_, others) = post(
        client,
        at,
        "bank/tenant/t1/owner/u2/account/snapshot/count",
        json!({}),
    )
    .await;
    assert_eq!(others, json!(1), "{round}");
    // The streams carry the owner their command named.
    let (_, streams) = post(
        client,
        at,
        "tenant/t1/owner/u1/account/event/list",
        json!({"projection": {"include": ["aggregateId", "version", "ownerId"]}}),
    )
    .await;
    assert_eq!(
        streams,
        json!([{"aggregateId": "o1", "version": 1, "ownerId": "u1"}]),
        "{round}"
    );
    let (status, history) = call(
        client,
        reqwest::Method::GET,
        format!("http://{at}/bank/tenant/t1/account/o1/event/1/2"),
        None,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{round}: {history}");
    assert_eq!(
        (
            &history[0]["ownerId"],
            &history[1]["ownerId"],
            &history[1]["spaceId"]
        ),
        (&json!("u1"), &json!(""), &json!("s1")),
        "{round}"
    );
}

/// What Wow's own TypeScript client needed that it did not get (found by running it against
/// `wow serve`): `function` on every answer, lists streamed for `listStream`, and the bare
/// state under the bounded context's alias (its generated clients' `basePath`).
#[tokio::test]
async fn wows_client_gets_functions_streamed_lists_and_the_bare_state_under_the_context() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("client.db").display());
    let served = Served::start(
        &["--store", &store, "--listen", "127.0.0.1:0"],
        &[("WOW_SNAPSHOT_QUERIES", "true")],
    );
    let (client, at) = (Client::new(), served.address.clone());
    every_answer_names_a_function(&client, &at).await;
    a_streamed_list_is_one_event_per_item(&client, &at).await;
    under_the_context_the_state_routes_answer_the_bare_state(&client, &at).await;
    assert!(served.stop().success());
}

/// Every answer names a function: a stage's own is the framework's.
async fn every_answer_names_a_function(client: &Client, at: &str) {
    let opened: Value = client
        .post(format!("http://{at}/bank/account/f1/open"))
        .json(&json!({"name": "F", "balance": 3}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        opened["function"],
        json!({"functionKind": "COMMAND", "contextName": "wow", "processorName": "SimpleCommandAggregate", "name": "process"}),
        "{opened}"
    );
    let streamed = client
        .post(format!("http://{at}/account/f1/deposit"))
        .header("Accept", "text/event-stream")
        .header("Command-Wait-Stage", "PROJECTED")
        .json(&json!({"amount": 4}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let results = sse_data(&streamed);
    assert_eq!(results.len(), 4, "{streamed}");
    for result in &results {
        assert!(result["function"]["processorName"].is_string(), "{result}");
    }
    assert_eq!(results[0]["function"]["processorName"], "CommandGateway");
}

/// A list with `Accept: text/event-stream`: one event per item.
async fn a_streamed_list_is_one_event_per_item(client: &Client, at: &str) {
    for (path, expected) in [
        ("account/snapshot/list", "f1"),
        ("account/snapshot/list/state", "F"),
        ("account/event/list", "f1"),
    ] {
        let response = client
            .post(format!("http://{at}/{path}"))
            .header("Accept", "text/event-stream")
            .json(&json!({"condition": {"operator": "AGGREGATE_ID", "value": "f1"}, "limit": 10}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert!(response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        assert_eq!(response.headers()["Wow-Error-Code"], "Ok");
        let text = response.text().await.unwrap();
        let items = sse_data(&text);
        let wanted = if path.ends_with("event/list") { 2 } else { 1 };
        assert_eq!(items.len(), wanted, "{path}: {text}");
        assert!(items[0].to_string().contains(expected), "{path}: {text}");
    }
}

/// Under the context's alias, the state routes answer the bare state, as Wow's do, and the
/// same without it; the version in `ETag`.
async fn under_the_context_the_state_routes_answer_the_bare_state(client: &Client, at: &str) {
    for path in [
        "bank/account/f1/state",
        "bank/account/f1/state/2",
        "account/f1/state",
    ] {
        let (status, state, version) = get_state(client, at, path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {state}");
        assert_eq!(state["balance"], 7, "{path}: {state}");
        assert!(state["aggregateId"].is_null(), "{path}: {state}");
        assert_eq!(version, Some(2), "{path}");
    }
}
