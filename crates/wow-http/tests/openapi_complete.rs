//! `/openapi.json` is complete and honest: every route the router answers is in it, every
//! route in it is answered by a route, every path parameter is declared, the server's limits
//! are schema bounds, the bearer scheme is there exactly when auth is on, and commands only
//! sagas send and the history of void-only aggregates are not. (`.ci/schemathesis.sh` fuzzes
//! the running service against the same document.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeSet, HashMap};

use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use reqwest::{Client, Method};
use serde_json::{json, Map, Value};
use wow_http::{router, HttpConfig, HttpState};
use wow_runtime::pipeline::LocalPipeline;

use support::{in_memory_bank, listen};

/// The routes `router` answers for the bank, plus the domain's view, as the document must
/// list them.
const EXPECTED_PATHS: [&str; 50] = [
    "/account/event/count",
    "/account/event/list",
    "/account/event/paged",
    "/account/open",
    "/account/snapshot/count",
    "/account/snapshot/list",
    "/account/snapshot/list/state",
    "/account/snapshot/paged",
    "/account/snapshot/paged/state",
    "/account/snapshot/single",
    "/account/snapshot/single/state",
    "/account/snapshot/{afterId}/{limit}",
    "/account/{id}",
    "/account/{id}/check",
    "/account/{id}/deadlines",
    "/account/{id}/deposit",
    "/account/{id}/event/{head}/{tail}",
    "/account/{id}/freeze",
    "/account/{id}/open",
    "/account/{id}/recover",
    "/account/{id}/requests/{requestId}",
    "/account/{id}/snapshot",
    "/account/{id}/state",
    "/account/{id}/state/time/{time}",
    "/account/{id}/state/{version}",
    "/account/{id}/transfer",
    "/account/{id}/view",
    "/account/{id}/withdraw",
    "/audit/{id}/note",
    "/compensation/failures",
    "/compensation/failures/{id}",
    "/compensation/failures/{id}/recoverable",
    "/compensation/failures/{id}/retry",
    "/compensation/failures/{id}/retry-spec",
    "/compensation/failures/{id}/skip",
    "/compensation/parked",
    "/consumers/{consumer}/redispatch",
    "/deadlines",
    "/deadlines/{tenant}/{aggregate}/{id}/{name}",
    "/deadlines/{tenant}/{aggregate}/{id}/{name}/fire",
    "/health",
    "/metrics",
    "/metrics.json",
    "/openapi.json",
    "/rebuilds",
    "/rebuilds/{view}",
    "/ui",
    "/ui/app.css",
    "/ui/app.js",
    "/unique-key/{space}/{value}",
];

/// The operations that need no token when auth is on (`/health` takes one optionally).
const PUBLIC: [&str; 2] = ["/health", "/openapi.json"];

/// The operator's routes: with any token configured, they need an operator token.
const OPERATORS: [&str; 7] = [
    "/deadlines",
    "/metrics",
    "/metrics.json",
    "/rebuilds",
    "/ui",
    "/ui/app.css",
    "/ui/app.js",
];

/// The operator's actions: with any token configured, they need an operator's bearer token
/// (never the page's cookie).
const OPERATOR_ACTIONS: [&str; 3] = [
    "/deadlines/{tenant}/{aggregate}/{id}/{name}",
    "/deadlines/{tenant}/{aggregate}/{id}/{name}/fire",
    "/rebuilds/{view}",
];

/// The operator's commands among the service's routes (path, method): they take an operator
/// token as the bearer token only, and the tenant from `Command-Tenant-Id`.
const OPERATOR_COMMANDS: [(&str, &str); 7] = [
    ("/unique-key/{space}/{value}", "delete"),
    ("/compensation/failures/{id}/skip", "post"),
    ("/compensation/failures/{id}/retry-spec", "put"),
    ("/compensation/failures/{id}/recoverable", "put"),
    ("/consumers/{consumer}/redispatch", "post"),
    ("/account/{id}/snapshot", "put"),
    ("/account/snapshot/{afterId}/{limit}", "put"),
];

/// A domain's own read route, as `wow serve` merges the bank's view: it answers with an error
/// body that names its code but sets no header, which the router must add.
fn domain_routes() -> Router {
    Router::new().route(
        "/account/{id}/view",
        get(|| async {
            (
                StatusCode::NOT_FOUND,
                Json(json!({"errorCode": "NotFound", "errorMsg": "no such account"})),
            )
        }),
    )
}

/// A domain's own route as a service hands it over: the bank's `GET /account/{id}/view`.
fn domain_paths() -> Map<String, Value> {
    let error = |description: &str| {
        json!({"description": description,
            "headers": {"Wow-Error-Code": {"required": true, "schema": {"type": "string"}}},
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    };
    let view = json!({"get": {
        "operationId": "account.view",
        "summary": "One account as the account_balance read model shows it",
        "parameters": [
            {"name": "id", "in": "path", "required": true, "description": "The account id.",
                "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^([.]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*|[.]{3,})$"}},
            {"name": "Command-Tenant-Id", "in": "header", "required": false,
                "description": "The tenant, as for every query (not read when bearer auth is on).",
                "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^(\\(0\\)|([.]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*|[.]{3,}))$"}},
        ],
        "responses": {
            "200": {"description": "The account: its available balance, the amount held by transfers in flight, the last event version applied",
                "content": {"application/json": {"schema": account_view_schema()}}},
            "400": error("IllegalArgument: the id or Command-Tenant-Id breaks the rules of an id"),
            "404": error("NotFound: no such account in the read model (or another tenant's)"),
            "503": error("ServiceUnavailable: the read model cannot be read"),
        },
    }});
    [("/account/{id}/view".to_owned(), view)]
        .into_iter()
        .collect()
}

/// The JSON Schema of [`AccountView`](crate::projection::AccountView).
fn account_view_schema() -> Value {
    json!({"type": "object", "required": ["id", "name", "balance", "held", "version"],
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "balance": {"type": "integer"},
        "held": {"type": "integer"},
        "version": {"type": "integer", "minimum": 0},
    }})
}

struct Service {
    base: String,
    client: Client,
    _bank: LocalPipeline,
}

async fn service(config: HttpConfig) -> Service {
    let (bank, _) = in_memory_bank().await;
    let state = HttpState::new(&bank, None, config).with_openapi_paths(domain_paths());
    let app = router(state).merge(domain_routes());
    let app = wow_http::error_fallbacks(app, bank.gateway.registry());
    Service {
        base: listen(app).await,
        client: Client::new(),
        _bank: bank,
    }
}

fn with_auth() -> HttpConfig {
    HttpConfig {
        auth_tokens: HashMap::from([("ta".to_owned(), wow_http::TokenBinding::tenant("tenant-a"))]),
        ..HttpConfig::default()
    }
}

impl Service {
    async fn document(&self) -> Value {
        let response = self
            .client
            .get(format!("{}/openapi.json", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        response.json().await.unwrap()
    }
}

/// Every operation of `document`: (path, method, operation).
fn operations(document: &Value) -> Vec<(String, String, Value)> {
    let paths = document["paths"].as_object().expect("paths");
    paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .expect("a path item")
                .iter()
                .map(|(method, operation)| (path.clone(), method.clone(), operation.clone()))
        })
        .collect()
}

fn parameter<'o>(operation: &'o Value, location: &str, name: &str) -> Option<&'o Value> {
    operation["parameters"]
        .as_array()?
        .iter()
        .find(|p| p["in"] == location && p["name"] == name)
}

#[tokio::test]
async fn every_route_the_router_answers_is_in_the_document_and_nothing_else() {
    let s = service(HttpConfig::default()).await;
    let document = s.document().await;
    let listed: BTreeSet<&str> = document["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(listed, BTreeSet::from(EXPECTED_PATHS));
}

#[tokio::test]
async fn every_documented_operation_is_answered_by_a_route() {
    let s = service(HttpConfig::default()).await;
    for (path, method, _) in operations(&s.document().await) {
        let concrete = path
            .replace("{id}", "acc-1")
            .replace("{head}", "1")
            .replace("{tail}", "2")
            .replace("{requestId}", "r-1");
        let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let response = s
            .client
            .request(method.clone(), format!("{}{concrete}", s.base))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        let fallback = body["errorMsg"]
            .as_str()
            .is_some_and(|m| m.starts_with("no route answers"));
        assert!(!fallback, "{method} {path} is answered by no route: {body}");
    }
}

#[tokio::test]
async fn every_path_parameter_is_declared_as_a_required_path_parameter() {
    for config in [HttpConfig::default(), with_auth()] {
        let s = service(config).await;
        for (path, method, operation) in operations(&s.document().await) {
            let names: Vec<&str> = path
                .split('/')
                .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
                .collect();
            for name in &names {
                let declared = parameter(&operation, "path", name)
                    .unwrap_or_else(|| panic!("{method} {path}: `{name}` is not declared"));
                assert_eq!(declared["required"], true, "{method} {path}: {name}");
                assert!(declared["schema"].is_object(), "{method} {path}: {name}");
            }
            let declared = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "path")
                .count();
            assert_eq!(
                declared,
                names.len(),
                "{method} {path}: no extra path parameter"
            );
        }
    }
}

#[tokio::test]
async fn the_server_limits_are_schema_bounds() {
    let config = HttpConfig::default();
    let max_wait = config.max_wait_timeout.as_millis() as u64;
    let s = service(config).await;
    let document = s.document().await;
    let deposit = &document["paths"]["/account/{id}/deposit"]["post"];
    let id = &parameter(deposit, "path", "id").unwrap()["schema"];
    assert_eq!(
        (id["minLength"].as_u64(), id["maxLength"].as_u64()),
        (Some(1), Some(128))
    );
    assert_eq!(
        id["pattern"],
        "^([.]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*|[.]{3,})$"
    );
    let header = |name: &str| &parameter(deposit, "header", name).unwrap()["schema"];
    // Whole numbers in headers are text with a pattern that states the range exactly.
    let pattern = |name: &str| header(name)["pattern"].as_str().unwrap().to_owned();
    let timeout = pattern("Command-Wait-Timeout");
    assert!(timeout.starts_with("^\\+?0*([1-9]|"), "from 1: {timeout}");
    assert!(
        timeout.ends_with(&format!("|{max_wait})$")),
        "to {max_wait}: {timeout}"
    );
    let version = pattern("Command-Aggregate-Version");
    assert!(version.starts_with("^\\+?0*([0-9]|"), "from 0: {version}");
    assert!(
        version.ends_with("|1844674407370955161[0-5])$"),
        "to u64::MAX: {version}"
    );
    let request_id = header("Command-Request-Id");
    assert_eq!(
        (
            request_id["minLength"].as_u64(),
            request_id["maxLength"].as_u64()
        ),
        (Some(1), Some(128))
    );
    let tenant = header("Command-Tenant-Id");
    assert_eq!(tenant["maxLength"].as_u64(), Some(128));
    assert!(tenant["pattern"]
        .as_str()
        .unwrap()
        .contains("[A-Za-z0-9_:-][A-Za-z0-9._:-]*"));
    let created = &document["paths"]["/account/open"]["post"];
    let named = &parameter(created, "header", "Command-Aggregate-Id").unwrap()["schema"];
    assert_eq!(
        named["pattern"],
        "^([.]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*|[.]{3,})$"
    );
    let stages = &parameter(
        &document["paths"]["/audit/{id}/note"]["post"],
        "header",
        "Command-Wait-Stage",
    )
    .unwrap()["schema"]["enum"];
    assert_eq!(*stages, json!(["SENT"]), "a void command awaits SENT only");
}

#[tokio::test]
async fn commands_only_sagas_send_are_not_in_the_document() {
    let s = service(HttpConfig::default()).await;
    let document = s.document().await;
    let paths: Vec<&String> = document["paths"].as_object().unwrap().keys().collect();
    for internal in ["receive_transfer", "confirm_transfer", "cancel_transfer"] {
        assert!(
            !paths.iter().any(|p| p.contains(internal)),
            "{internal} is not routed, so not listed"
        );
    }
}

#[tokio::test]
async fn an_aggregate_of_void_commands_has_no_history_routes() {
    let s = service(HttpConfig::default()).await;
    let document = s.document().await;
    let paths = document["paths"].as_object().unwrap();
    assert!(paths.contains_key("/audit/{id}/note"));
    let audit: Vec<&String> = paths.keys().filter(|p| p.starts_with("/audit/")).collect();
    assert_eq!(audit, ["/audit/{id}/note"], "no state, events or look-up");
}

#[tokio::test]
async fn the_bearer_scheme_is_there_exactly_when_auth_is_on() {
    let off = service(HttpConfig::default()).await.document().await;
    assert!(off["components"]["securitySchemes"].is_null());
    for (path, method, operation) in operations(&off) {
        assert!(operation["security"].is_null(), "{method} {path}");
        assert!(operation["responses"]["401"].is_null(), "{method} {path}");
    }
    assert!(parameter(
        &off["paths"]["/account/{id}/state"]["get"],
        "header",
        "Command-Tenant-Id"
    )
    .is_some());

    let on = service(with_auth()).await.document().await;
    assert_eq!(
        on["components"]["securitySchemes"]["bearer"],
        json!({"type": "http", "scheme": "bearer", "description": on["components"]["securitySchemes"]["bearer"]["description"]})
    );
    for (path, method, operation) in operations(&on) {
        if OPERATOR_COMMANDS.contains(&(path.as_str(), method.as_str())) {
            an_operators_command_asks_for_the_operator_in_the_tenant_named(
                &path, &method, &operation,
            );
            continue;
        }
        assert!(
            parameter(&operation, "header", "Command-Tenant-Id").is_none(),
            "{method} {path}: the token decides the tenant"
        );
        an_operation_asks_for_the_token_its_route_needs(&path, &method, &operation);
    }
}

/// An operator's command: the operator's bearer token only, in the tenant named.
fn an_operators_command_asks_for_the_operator_in_the_tenant_named(
    path: &str,
    method: &str,
    operation: &Value,
) {
    assert_eq!(
        operation["security"],
        json!([{"operator": []}]),
        "{method} {path}"
    );
    assert!(
        parameter(operation, "header", "Command-Tenant-Id").is_some(),
        "{method} {path}: the operator names the tenant"
    );
    let responses = &operation["responses"];
    assert!(
        responses["401"]["headers"]["WWW-Authenticate"].is_object(),
        "{method} {path}"
    );
    assert!(responses["403"].is_object(), "{method} {path}");
}

/// With auth on, an operation's security by its route: optional on `/health`, none on the
/// other public routes, the operator's on the operator's, the bearer token on every other.
fn an_operation_asks_for_the_token_its_route_needs(path: &str, method: &str, operation: &Value) {
    if path == "/health" {
        assert_eq!(
            operation["security"],
            json!([{}, {"bearer": []}]),
            "optional"
        );
        assert!(operation["responses"]["401"].is_null());
    } else if PUBLIC.contains(&path) {
        assert!(operation["security"].is_null(), "{method} {path}");
        assert!(operation["responses"]["401"].is_null(), "{method} {path}");
    } else if OPERATOR_ACTIONS.contains(&path) {
        assert_eq!(
            operation["security"],
            json!([{"operator": []}]),
            "{method} {path}"
        );
        assert!(operation["responses"]["403"].is_object(), "{method} {path}");
    } else if OPERATORS.contains(&path) {
        assert_eq!(
            operation["security"],
            json!([{"operator": []}, {"operatorCookie": []}]),
            "{method} {path}"
        );
        let responses = &operation["responses"];
        assert!(
            responses["401"]["headers"]["WWW-Authenticate"].is_object(),
            "{method} {path}"
        );
        assert!(responses["403"].is_object(), "{method} {path}");
    } else {
        assert_eq!(
            operation["security"],
            json!([{"bearer": []}]),
            "{method} {path}"
        );
        let unauthorized = &operation["responses"]["401"];
        assert!(
            unauthorized["headers"]["WWW-Authenticate"].is_object(),
            "{method} {path}: {unauthorized}"
        );
    }
}

#[tokio::test]
async fn every_error_answer_has_a_body_schema_and_the_error_code_header() {
    let document = service(with_auth()).await.document().await;
    let schemas = document["components"]["schemas"].as_object().unwrap();
    for (path, method, operation) in operations(&document) {
        let responses: &Map<String, Value> = operation["responses"].as_object().unwrap();
        let command = operation["x-command-kind"].is_string();
        let expected: &[&str] = if command {
            &[
                "400", "401", "408", "409", "413", "415", "431", "500", "503",
            ]
        } else {
            &["400", "431", "500", "503"]
        };
        for status in expected {
            assert!(responses.contains_key(*status), "{method} {path}: {status}");
        }
        for (status, answer) in responses {
            // hyper's own refusals (a bare 400, 414) carry no body; no route answers them.
            let bare = answer["content"].is_null();
            if status.starts_with('2') || bare {
                continue;
            }
            let schema = &answer["content"]["application/json"]["schema"];
            assert!(!schema.is_null(), "{method} {path} {status}: a body schema");
            if path.ends_with("/requests/{requestId}") && status == "404" {
                continue; // NONE is an answer of the look-up, not an error: no code
            }
            assert_eq!(
                answer["headers"]["Wow-Error-Code"]["required"], true,
                "{method} {path} {status}"
            );
        }
    }
    let result = &schemas["wow.command.CommandResult"];
    for field in [
        "errorCode",
        "errorMsg",
        "aggregateId",
        "requestId",
        "stage",
        "succeeded",
    ] {
        assert!(
            result["required"]
                .as_array()
                .unwrap()
                .contains(&json!(field)),
            "{field}"
        );
    }
    assert_eq!(
        schemas["Error"]["required"],
        json!(["errorCode", "errorMsg"])
    );
}

#[tokio::test]
async fn a_domain_route_error_without_the_header_gets_it_from_its_body() {
    let s = service(HttpConfig::default()).await;
    let response = s
        .client
        .get(format!("{}/account/acc-1/view", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(response.headers()["wow-error-code"], "NotFound");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["errorMsg"], "no such account", "the body is kept");
}

/// The component a local `$ref` names (`#/components/{kind}/{key}`), which must exist.
fn resolve<'d>(document: &'d Value, reference: &Value) -> &'d Value {
    let pointer = reference["$ref"]
        .as_str()
        .unwrap_or_else(|| panic!("a $ref: {reference}"));
    let found = document
        .pointer(pointer.trim_start_matches('#'))
        .unwrap_or_else(|| panic!("{pointer} is not in the document"));
    assert!(!found.is_null(), "{pointer}");
    found
}

/// The rules by which Wow's client generator (`fetcher-generator`) reads a document: an
/// aggregate per `context.aggregate` tag; a command per three-part operation id answered by
/// `wow.CommandOk` with a component payload; the state of `*.snapshot_state.single`; the
/// events named by `const` in the items of `*.event.list_query`; the fields of the condition
/// `*.snapshot.count` takes as a shared request body. (Checked here without it; the generator
/// itself was run against this document once, see docs/coming-from-wow.md.)
#[tokio::test]
async fn wows_client_generator_finds_every_aggregate_command_state_event_and_field() {
    let document = service(HttpConfig::default()).await.document().await;
    let tags: Vec<&str> = document["tags"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tag| tag["name"].as_str())
        .collect();
    assert!(tags.contains(&"bank.account"), "{tags:?}");
    let by_id: HashMap<String, Value> = operations(&document)
        .into_iter()
        .filter_map(|(_, _, operation)| {
            Some((operation["operationId"].as_str()?.to_owned(), operation))
        })
        .collect();
    assert_eq!(
        by_id.len(),
        operations(&document).len(),
        "operation ids are unique"
    );
    every_command_is_found_under_its_three_part_id(&document, &by_id);
    the_state_and_every_event_are_typed(&document, &by_id);
    // The fields a condition names.
    let body = resolve(
        &document,
        &by_id["bank.account.snapshot.count"]["requestBody"],
    );
    let condition = resolve(&document, &body["content"]["application/json"]["schema"]);
    let fields = resolve(&document, &condition["properties"]["field"]);
    assert!(fields["examples"]
        .as_array()
        .unwrap()
        .contains(&json!("state.balance")));
}

/// Every command a caller can send, under its three-part id, answered by `wow.CommandOk` with
/// a component payload; internal commands stay out.
fn every_command_is_found_under_its_three_part_id(
    document: &Value,
    by_id: &HashMap<String, Value>,
) {
    let mut commands = BTreeSet::new();
    for (id, operation) in by_id {
        let parts: Vec<&str> = id.split('.').collect();
        if parts.len() != 3 || operation["responses"]["200"]["$ref"].is_null() {
            continue;
        }
        assert_eq!(
            operation["responses"]["200"]["$ref"], "#/components/responses/wow.CommandOk",
            "{id}"
        );
        assert_eq!(
            operation["tags"],
            json!([format!("{}.{}", parts[0], parts[1])])
        );
        let payload = &operation["requestBody"]["content"]["application/json"]["schema"];
        assert!(resolve(document, payload).is_object(), "{id}");
        commands.insert(id.clone());
    }
    for command in ["open", "deposit", "withdraw", "transfer", "freeze", "check"] {
        assert!(
            commands.contains(&format!("bank.account.{command}")),
            "{command}: {commands:?}"
        );
    }
    assert!(
        !commands.contains("bank.account.receive_transfer"),
        "internal commands stay out"
    );
    let ok = resolve(
        document,
        &json!({"$ref": "#/components/responses/wow.CommandOk"}),
    );
    let result = &ok["content"]["application/json"]["schema"];
    assert_eq!(
        result["$ref"],
        "#/components/schemas/wow.command.CommandResult"
    );
}

/// The state of `*.snapshot_state.single`, typed, and the state routes' the same; the events
/// in the items of `*.event.list_query`, each by name.
fn the_state_and_every_event_are_typed(document: &Value, by_id: &HashMap<String, Value>) {
    let state = &by_id["bank.account.snapshot_state.single"]["responses"]["200"]["content"]
        ["application/json"]["schema"];
    assert!(resolve(document, state)["properties"]["balance"].is_object());
    // The state routes answer that same state, bare, its version in ETag.
    for id in [
        "account.state",
        "account.state_at_version",
        "account.state_at_time",
    ] {
        let answer = &by_id[id]["responses"]["200"];
        assert_eq!(
            &answer["content"]["application/json"]["schema"], state,
            "{id}"
        );
        assert_eq!(answer["headers"]["ETag"]["required"], true, "{id}");
    }

    // The events, each by name.
    let streams = &by_id["bank.account.event.list_query"]["responses"]["200"]["content"]
        ["application/json"]["schema"];
    let stream = resolve(document, &streams["items"]);
    let events = stream["properties"]["body"]["items"]["anyOf"]
        .as_array()
        .unwrap();
    let names: BTreeSet<&str> = events
        .iter()
        .map(|event| {
            resolve(document, &event["properties"]["body"]);
            event["properties"]["name"]["const"].as_str().unwrap()
        })
        .collect();
    for event in [
        "AccountOpened",
        "Deposited",
        "TransferPrepared",
        "DefaultAggregateDeleted",
    ] {
        assert!(names.contains(event), "{event}: {names:?}");
    }
}
