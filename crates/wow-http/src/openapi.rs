//! `GET /openapi.json`: the API as this server answers it, generated from the registry and
//! the settings, so it cannot drift from either.
//!
//! Complete: every route the router answers is a path (one per command, the creates without
//! an id, history for aggregates that have one, health, metrics, this document, the
//! compensation routes, and the routes a domain merges in through
//! [`HttpState::with_openapi_paths`](crate::HttpState::with_openapi_paths)), and every `{param}`
//! of a path is declared. Honest: the limits the server enforces are schema bounds (id rules,
//! request id length, wait timeout range, version range), each operation lists every status
//! it can answer with the body it answers then (a `CommandResult` for a command, `{errorCode,
//! errorMsg}` otherwise) and the `Wow-Error-Code` header, and the bearer scheme is there
//! exactly when auth is on (the operator's schemes, over `/metrics` and the operations page,
//! when any token is configured). A void command has no aggregate, so an aggregate with only
//! void commands has no history paths; internal commands (sent by sagas only) are not routed, so
//! they are not here. The answer of each create links to what can be done with the aggregate
//! it made.
//!
//! `.ci/schemathesis.sh` fuzzes a running `wow serve` against this document, without and with
//! auth; `tests/openapi_complete.rs` checks that it lists exactly the routes the router answers.

mod bounds;
mod completion;
pub(crate) mod operations;
mod queries;
mod wow_client;

use serde_json::{json, Map, Value};
use wow_core::aggregate::AggregateRuntime;
use wow_core::command::CommandKind;
use wow_core::{AggregateId, CommandResult, CommandStage, ErrorCode};

use crate::config::HttpConfig;
use crate::state::HttpState;
use completion::{complete, link_creates};
use operations::{command_operation, events_path, look_up_path, state_path};

/// The component schemas: the bodies every answer refers to.
fn schemas() -> Value {
    // The fields of a result, read off a serialized one, so the document cannot drift from
    // the type: a field this table does not know is still listed (and required).
    let sample = CommandResult::for_ids(
        &AggregateId::new("", "", "", ""),
        "",
        "",
        CommandStage::Sent,
        ErrorCode::Ok,
        String::new(),
    );
    let stages: Vec<&str> = CommandStage::ALL.iter().map(|s| s.as_str()).collect();
    let typed = |field: &str| match field {
        "stage" => json!({"type": "string", "enum": stages}),
        "aggregateVersion" => json!({"type": ["integer", "null"], "minimum": 0}),
        "signalTime" => json!({"type": "integer"}),
        "succeeded" => json!({"type": "boolean"}),
        "result" => json!({"type": "object"}),
        "bindingErrors" => {
            json!({"type": "array", "items": {"type": "object", "required": ["name", "msg"],
            "properties": {"name": {"type": "string"}, "msg": {"type": "string"}}}})
        }
        "function" => json!({"type": "object",
            "description": "The function that signalled (Wow's FunctionInfo): a consumer of a downstream stage, or the framework's own for a stage as a whole (context `wow`: CommandGateway.send at SENT, SimpleCommandAggregate.process at PROCESSED, SnapshotDispatcher.save at SNAPSHOT, EventDispatcher.complete when every consumer of a downstream stage handled the stream).",
            "required": ["functionKind", "contextName", "processorName", "name"],
            "properties": {
                "functionKind": {"type": "string", "enum": ["COMMAND", "SOURCING", "EVENT", "STATE_EVENT", "ERROR"]},
                "contextName": {"type": "string"},
                "processorName": {"type": "string"},
                "name": {"type": "string"}}}),
        _ => json!({"type": "string"}),
    };
    let (mut properties, mut required) = (Map::new(), Vec::new());
    if let Ok(Value::Object(fields)) = serde_json::to_value(sample) {
        for field in fields.keys() {
            properties.insert(field.clone(), typed(field));
            required.push(field.clone());
        }
    }
    // Every answer names the function that signalled (the framework's own for a stage as a
    // whole): Wow's clients read it.
    properties.insert("function".to_owned(), typed("function"));
    if !required.iter().any(|field| field == "function") {
        required.push("function".to_owned());
    }
    let string = json!({"type": "string"});
    let integer = json!({"type": "integer"});
    json!({
        (wow_client::COMMAND_RESULT): {"type": "object", "required": required, "properties": properties},
        "Error": {"type": "object", "required": ["errorCode", "errorMsg"], "properties": {
            "errorCode": string, "errorMsg": string, "succeeded": {"type": "boolean", "enum": [false]}}},
        "DomainEventStream": stream_schema(),
        "ExecutionFailed": {"type": "object",
            "required": ["id", "consumer", "stage", "aggregateId", "version", "streamId", "eventIds", "errorCode", "errorMessage", "attempts", "status"],
            "properties": {
                "id": string, "consumer": string, "stage": {"type": "string", "enum": stages},
                "aggregateId": {"type": "object"}, "version": integer, "streamId": string,
                "eventIds": {"type": "array", "items": string}, "errorCode": string,
                "errorMessage": string, "attempts": integer,
                "status": {"type": "string", "enum": ["FAILED", "EXHAUSTED", "SUCCEEDED", "SKIPPED"]},
                "nextRetryAt": {"type": ["integer", "null"]}, "createdAt": integer, "updatedAt": integer,
                "skippedBy": string,
                "retrySpec": operations::retry_spec_schema(), "updatedBy": string,
                "recoverable": operations::recoverable_schema()}},
    })
}

/// An event stream as the history routes answer it (docs/http-api.md).
fn stream_schema() -> Value {
    let string = json!({"type": "string"});
    let integer = json!({"type": "integer"});
    json!({"type": "object",
            "required": ["id", "requestId", "commandId", "aggregateId", "aggregateName", "contextName", "tenantId", "version", "createTime", "body"],
            "properties": {
                "id": string, "requestId": string, "commandId": string, "aggregateId": string,
                "aggregateName": string, "contextName": string, "tenantId": string,
                "version": {"type": "integer", "minimum": 1}, "createTime": integer,
                "fingerprint": string, "header": {"type": "object", "additionalProperties": string},
                "body": {"type": "array", "items": {"type": "object", "required": ["id", "name", "revision", "body"],
                    "properties": {"id": string, "name": string, "revision": string, "bodyType": string, "body": {},
                        "storedName": string, "storedRevision": string}}}}})
}

/// The whole document for `state`: the registry's routes, the service's (`service`, its
/// path items), the domain's.
pub(crate) fn build(state: &HttpState, service: Map<String, Value>) -> Value {
    let config = state.config();
    let tags: Vec<Value> = state
        .registry()
        .iter()
        .map(|runtime| {
            let named = runtime.named_aggregate();
            json!({"name": format!("{}.{}", named.context_name, named.aggregate_name)})
        })
        .collect();
    json!({
        "openapi": "3.1.0",
        "info": {"title": "wow-rs", "version": env!("CARGO_PKG_VERSION"),
            "description": "Every route also answers under Wow's prefix /tenant/{tenantId}/, in that tenant, and under the bounded context's alias /{context}/, with the same answers."},
        "tags": tags,
        "paths": paths(state, service),
        "components": components(state, !config.auth_tokens.is_empty(), config.operator_gated()),
    })
}

/// Every path: each aggregate's, the service's and the domain's, each operation completed.
fn paths(state: &HttpState, service: Map<String, Value>) -> Map<String, Value> {
    let config = state.config();
    let mut paths = Map::new();
    for runtime in state.registry().iter() {
        aggregate_paths(runtime.as_ref(), config, &mut paths);
    }
    paths.extend(service);
    for (path, item) in state.openapi_paths() {
        paths.insert(path.clone(), item.clone());
    }
    link_creates(&mut paths);
    let (auth, operator) = (!config.auth_tokens.is_empty(), config.operator_gated());
    for (path, item) in &mut paths {
        if let Some(operations) = item.as_object_mut() {
            for operation in operations.values_mut() {
                complete(path, operation, auth, operator);
            }
        }
    }
    paths
}

/// The paths of one aggregate into `paths`: its commands (and creates without an id), and,
/// unless all its commands are void, its reads, queries and Wow's lifecycle routes.
fn aggregate_paths(
    runtime: &dyn AggregateRuntime,
    config: &HttpConfig,
    paths: &mut Map<String, Value>,
) {
    let aggregate = &runtime.named_aggregate().aggregate_name;
    let context = &runtime.named_aggregate().context_name;
    let commands = runtime.commands();
    for command in commands.iter().filter(|c| !c.internal) {
        paths.insert(
            format!("/{aggregate}/{{id}}/{}", command.name),
            command_operation(context, aggregate, command, true, config),
        );
        if matches!(command.kind, CommandKind::Create | CommandKind::AllowCreate) {
            paths.insert(
                format!("/{aggregate}/{}", command.name),
                command_operation(context, aggregate, command, false, config),
            );
        }
    }
    // An aggregate whose commands are all void has no aggregate to read: no history.
    if commands.iter().all(|c| c.kind == CommandKind::Void) {
        return;
    }
    paths.insert(
        format!("/{aggregate}/{{id}}/state"),
        state_path(context, aggregate),
    );
    paths.insert(
        format!("/{aggregate}/{{id}}/deadlines"),
        operations::deadlines_path(aggregate),
    );
    paths.insert(
        format!("/{aggregate}/{{id}}/event/{{head}}/{{tail}}"),
        events_path(aggregate),
    );
    paths.insert(
        format!("/{aggregate}/{{id}}/requests/{{requestId}}"),
        look_up_path(aggregate),
    );
    let state = state_path(context, aggregate);
    let state_answer = state["get"]["responses"]["200"].clone();
    queries::time_travel_paths(aggregate, paths, &state_answer);
    queries::query_paths(context, aggregate, paths);
    queries::snapshot_paths(context, aggregate, paths);
    operations::lifecycle_paths(context, aggregate, runtime.lifecycle(), config, paths);
}

/// The components: the schemas and request bodies every operation refers to, the shared
/// response of a command, and the security schemes auth and the operator's routes need.
fn components(state: &HttpState, auth: bool, operator: bool) -> Map<String, Value> {
    let mut components = Map::new();
    let mut all_schemas = match schemas() {
        Value::Object(all) => all,
        _ => Map::new(),
    };
    all_schemas.extend(queries::query_schemas());
    let mut request_bodies = Map::new();
    for runtime in state.registry().iter() {
        wow_client::aggregate_components(runtime.as_ref(), &mut all_schemas, &mut request_bodies);
    }
    components.insert("schemas".to_owned(), Value::Object(all_schemas));
    components.insert("requestBodies".to_owned(), Value::Object(request_bodies));
    components.insert(
        "responses".to_owned(),
        json!({(wow_client::COMMAND_OK): wow_client::command_ok()}),
    );
    let schemes = security_schemes(auth, operator);
    if !schemes.is_empty() {
        components.insert("securitySchemes".to_owned(), Value::Object(schemes));
    }
    components
}

/// The bearer scheme when auth is on; the operator's bearer and cookie when any token is
/// configured.
fn security_schemes(auth: bool, operator: bool) -> Map<String, Value> {
    let mut schemes = Map::new();
    if auth {
        schemes.insert(
            "bearer".to_owned(),
            json!({"type": "http", "scheme": "bearer", "description": "A token of the service's auth_tokens; it decides the tenant"}),
        );
    }
    if operator {
        schemes.insert(
            "operator".to_owned(),
            json!({"type": "http", "scheme": "bearer", "description": "A token of the service's operator_tokens: /metrics, /metrics.json, /deadlines, the operations page, and the delete and recover of an aggregate only operators may delete"}),
        );
        schemes.insert(
            "operatorCookie".to_owned(),
            json!({"type": "apiKey", "in": "cookie", "name": "wow-operator", "description": "An operator token, as GET /ui?token= sets it for the browser"}),
        );
    }
    schemes
}
