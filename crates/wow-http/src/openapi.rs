//! `GET /openapi.json`: the API generated from the registry, one path per command.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Map, Value};
use wow_core::command::CommandKind;
use wow_core::{AggregateId, CommandResult, CommandStage, ErrorCode};

use crate::HttpState;

fn header(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "header", "required": false, "description": description, "schema": schema})
}

/// The headers every command route reads; the wait stage depends on the command's kind.
fn command_headers(kind: CommandKind) -> Vec<Value> {
    let stage = if kind == CommandKind::Void {
        header(
            "Command-Wait-Stage",
            "A void command is handled by no aggregate: only SENT can be awaited, and it is the default. A later stage is a 400 IllegalArgument. Void commands are at-least-once: their consumers must be idempotent.",
            json!({"type": "string", "enum": ["SENT"], "default": "SENT"}),
        )
    } else {
        header(
            "Command-Wait-Stage",
            "The stage to wait for.",
            json!({"type": "string", "enum": ["SENT", "PROCESSED", "SNAPSHOT", "PROJECTED", "EVENT_HANDLED", "SAGA_HANDLED"], "default": "PROCESSED"}),
        )
    };
    vec![
        header(
            "Command-Request-Id",
            "The business intent; resend with the same value (1-128 bytes). A resend of an intent already decided gets the original decision: 409 DuplicateRequestId for an appended one, the original rejection (its status, code and message, header Wow-Replayed: true) for a rejected one.",
            json!({"type": "string", "maxLength": 128}),
        ),
        stage,
        header(
            "Command-Wait-Timeout",
            "Milliseconds to wait.",
            json!({"type": "integer", "minimum": 1, "default": 30000}),
        ),
        header(
            "Command-Aggregate-Version",
            "The version the aggregate must be at.",
            json!({"type": "integer", "minimum": 0}),
        ),
        header(
            "Command-Tenant-Id",
            "The tenant (ignored when bearer auth is on).",
            json!({"type": "string"}),
        ),
    ]
}

/// The answers of a command route.
fn command_responses(kind: CommandKind) -> Value {
    let ok = if kind == CommandKind::Void {
        "The result at SENT: the bus accepted it"
    } else {
        "The result at the awaited stage"
    };
    let replayed = json!({"Wow-Replayed": {"description": "`true` when the answer replays the decision recorded for the request id (SPEC ID-6)", "schema": {"type": "string", "enum": ["true"]}}});
    json!({
        "200": {"description": ok, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CommandResult"}}}},
        "400": {"description": "Invalid input (CommandValidation, IllegalArgument, BadRequest)"},
        "404": {"description": "Unknown aggregate, command, or aggregate (also a replayed NotFound)", "headers": replayed},
        "408": {"description": "The wait expired: outcome unknown; look it up by request id"},
        "409": {"description": "A conflict (DuplicateRequestId with the original version and result.originalCommandId, RequestIdReused, versions; also a replayed DuplicateAggregateId or CommandExpectVersionConflict)", "headers": replayed},
        "422": {"description": "A business rule (also replayed for a resend of a rejected intent, with result.originalCommandId)", "headers": replayed},
        "503": {"description": "Bus or store unreachable: outcome unknown; look it up by request id"}
    })
}

/// `GET /{aggregate}/{id}/requests/{requestId}` (SPEC TO-1).
fn look_up_path(aggregate: &str, id_param: &Value) -> Value {
    let object = |status: &str, mut properties: Map<String, Value>| {
        properties.insert(
            "status".to_owned(),
            json!({"type": "string", "enum": [status]}),
        );
        json!({"type": "object", "required": ["status"], "properties": properties})
    };
    let fields = |names: &[(&str, &str)]| -> Map<String, Value> {
        names
            .iter()
            .map(|(name, kind)| ((*name).to_owned(), json!({"type": kind})))
            .collect()
    };
    let content = |schema: Value| json!({"application/json": {"schema": schema}});
    let appended = object(
        "APPENDED",
        fields(&[
            ("version", "integer"),
            ("commandId", "string"),
            ("createTime", "integer"),
            ("stream", "object"),
        ]),
    );
    let rejected = object(
        "REJECTED",
        fields(&[
            ("errorCode", "string"),
            ("errorMsg", "string"),
            ("commandId", "string"),
            ("createTime", "integer"),
            ("version", "integer"),
        ]),
    );
    let unknown = object(
        "UNKNOWN",
        fields(&[("errorCode", "string"), ("errorMsg", "string")]),
    );
    let mut parameters = id_param.as_array().cloned().unwrap_or_default();
    parameters.push(json!({"name": "requestId", "in": "path", "required": true, "description": "The request id, percent-encoded as one path segment (a saga's request ids hold `/`).", "schema": {"type": "string"}}));
    parameters.push(header(
        "Command-Tenant-Id",
        "The tenant (ignored when bearer auth is on).",
        json!({"type": "string"}),
    ));
    json!({"get": {
        "operationId": format!("{aggregate}.outcome"),
        "summary": "What became of a request id in this aggregate (SPEC TO-1)",
        "parameters": parameters,
        "responses": {
            "200": {"description": "A final decision. APPENDED: the intent took effect (version, command id, the stream); never resend it as a new intent. REJECTED: refused for good (code, message, the version it was decided on); a resend gets the same answer.", "content": content(json!({"oneOf": [appended, rejected]}))},
            "202": {"description": "IN_FLIGHT: this node holds the request and has not decided yet; wait, then look again", "content": content(object("IN_FLIGHT", Map::new()))},
            "404": {"description": "NONE: no decision is recorded and this node does not hold it; resending with the same request id is safe", "content": content(object("NONE", Map::new()))},
            "503": {"description": "UNKNOWN: history cannot be asked, or an appended stream cannot be read; stay unknown and escalate, never resend under a new request id", "content": content(unknown)}
        }
    }})
}

/// `GET /openapi.json`.
pub(crate) async fn document(State(state): State<HttpState>) -> Json<Value> {
    let mut paths = Map::new();
    for runtime in state.registry().iter() {
        let aggregate = &runtime.named_aggregate().aggregate_name;
        for command in runtime.commands().iter().filter(|c| !c.internal) {
            let path = format!("/{aggregate}/{{id}}/{}", command.name);
            let mut parameters = vec![
                json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"}}),
            ];
            parameters.extend(command_headers(command.kind));
            let body = json!({"required": false, "content": {"application/json": {"schema": (command.schema)()}}});
            paths.insert(
                path,
                json!({"post": {
                    "operationId": format!("{aggregate}.{}", command.name),
                    "summary": format!("{} `{}` ({:?})", aggregate, command.name, command.kind),
                    "x-command-kind": command.kind,
                    "parameters": parameters,
                    "requestBody": body,
                    "responses": command_responses(command.kind),
                }}),
            );
            if matches!(command.kind, CommandKind::Create | CommandKind::AllowCreate) {
                let mut parameters = vec![header(
                    "Command-Aggregate-Id",
                    "The new aggregate's id. Without it and with a Command-Request-Id, the id is derived from (tenant, aggregate name, request id), so a resend reaches the same aggregate and is answered 409 DuplicateRequestId with the original version, never opening a second aggregate; with neither header, the server makes a fresh id (and a resend would open another aggregate).",
                    json!({"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"}),
                )];
                parameters.extend(command_headers(command.kind));
                paths.insert(
                    format!("/{aggregate}/{}", command.name),
                    json!({"post": {
                        "operationId": format!("{aggregate}.{}.without_id", command.name),
                        "summary": format!("{} `{}` ({:?}), the id from a header, the request id or the server", aggregate, command.name, command.kind),
                        "x-command-kind": command.kind,
                        "parameters": parameters,
                        "requestBody": body,
                        "responses": command_responses(command.kind),
                    }}),
                );
            }
        }
        let id_param =
            json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]);
        paths.insert(format!("/{aggregate}/{{id}}/state"), json!({"get": {"operationId": format!("{aggregate}.state"), "parameters": id_param.clone(), "responses": {"200": {"description": "{aggregateId, version, state}"}, "404": {"description": "No such aggregate"}}}}));
        paths.insert(
            format!("/{aggregate}/{{id}}/requests/{{requestId}}"),
            look_up_path(aggregate, &id_param),
        );
        paths.insert(format!("/{aggregate}/{{id}}/event/{{head}}/{{tail}}"), json!({"get": {"operationId": format!("{aggregate}.events"), "responses": {"200": {"description": "Streams in version order"}}}}));
    }
    paths.insert("/compensation/failures".to_owned(), json!({"get": {
        "operationId": "compensation.failures",
        "summary": "Recorded consumer failures (event compensation), in the order first recorded",
        "parameters": [
            {"name": "status", "in": "query", "schema": {"enum": ["FAILED", "EXHAUSTED", "SUCCEEDED"]}},
            {"name": "consumer", "in": "query", "schema": {"type": "string"}},
            {"name": "after", "in": "query", "description": "The last id of the previous page", "schema": {"type": "string"}},
            {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
        ],
        "responses": {"200": {"description": "ExecutionFailed records"}, "400": {"description": "A bad filter"}, "503": {"description": "The store cannot be read"}},
    }}));
    paths.insert("/compensation/failures/{id}/retry".to_owned(), json!({"post": {
        "operationId": "compensation.retry",
        "summary": "Runs exactly the recorded consumer on exactly the recorded stream again",
        "responses": {"200": {"description": "The record after the retry: SUCCEEDED, or one attempt more"}, "404": {"description": "No such record"}, "409": {"description": "Its consumer or stream is gone"}, "503": {"description": "A store cannot be reached"}},
    }}));
    // The fields of a result, read off a serialized one, so the document cannot drift from
    // the type.
    let sample = CommandResult::for_ids(
        &AggregateId::new("", "", "", ""),
        "",
        "",
        CommandStage::Sent,
        ErrorCode::Ok,
        String::new(),
    );
    let properties: Map<String, Value> = match serde_json::to_value(sample) {
        Ok(Value::Object(fields)) => fields.keys().map(|f| (f.clone(), json!({}))).collect(),
        _ => Map::new(),
    };
    Json(json!({
        "openapi": "3.1.0",
        "info": {"title": "wow-rs", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {"schemas": {"CommandResult": {"type": "object", "properties": properties}}}
    }))
}
