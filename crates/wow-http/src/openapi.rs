//! `GET /openapi.json`: the API generated from the registry, one path per command.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Map, Value};
use wow_core::{AggregateId, CommandResult, CommandStage, ErrorCode};

use crate::HttpState;

fn command_headers() -> Value {
    let header = |name: &str, description: &str, schema: Value| json!({"name": name, "in": "header", "required": false, "description": description, "schema": schema});
    json!([
        header(
            "Command-Request-Id",
            "The business intent; resend with the same value (1-128 bytes).",
            json!({"type": "string", "maxLength": 128})
        ),
        header(
            "Command-Wait-Stage",
            "The stage to wait for.",
            json!({"type": "string", "enum": ["SENT", "PROCESSED", "SNAPSHOT", "PROJECTED", "EVENT_HANDLED", "SAGA_HANDLED"], "default": "PROCESSED"})
        ),
        header(
            "Command-Wait-Timeout",
            "Milliseconds to wait.",
            json!({"type": "integer", "minimum": 1, "default": 30000})
        ),
        header(
            "Command-Aggregate-Version",
            "The version the aggregate must be at.",
            json!({"type": "integer", "minimum": 0})
        ),
        header(
            "Command-Tenant-Id",
            "The tenant (ignored when bearer auth is on).",
            json!({"type": "string"})
        ),
    ])
}

/// `GET /openapi.json`.
pub(crate) async fn document(State(state): State<HttpState>) -> Json<Value> {
    let mut paths = Map::new();
    for runtime in state.registry().iter() {
        let aggregate = &runtime.named_aggregate().aggregate_name;
        for command in runtime.commands() {
            let path = format!("/{aggregate}/{{id}}/{}", command.name);
            let mut parameters = vec![
                json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"}}),
            ];
            if let Value::Array(headers) = command_headers() {
                parameters.extend(headers);
            }
            paths.insert(
                path,
                json!({"post": {
                    "operationId": format!("{aggregate}.{}", command.name),
                    "summary": format!("{} `{}` ({:?})", aggregate, command.name, command.kind),
                    "x-command-kind": command.kind,
                    "parameters": parameters,
                    "requestBody": {"required": false, "content": {"application/json": {"schema": (command.schema)()}}},
                    "responses": {
                        "200": {"description": "The result at the awaited stage", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CommandResult"}}}},
                        "400": {"description": "Invalid input (CommandValidation, IllegalArgument, BadRequest)"},
                        "404": {"description": "Unknown aggregate, command, or aggregate"},
                        "408": {"description": "The wait expired: outcome unknown"},
                        "409": {"description": "A conflict (DuplicateRequestId, RequestIdReused, versions)"},
                        "422": {"description": "A business rule"},
                        "503": {"description": "Bus or store unreachable"}
                    }
                }}),
            );
        }
        let id_param =
            json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]);
        paths.insert(format!("/{aggregate}/{{id}}/state"), json!({"get": {"operationId": format!("{aggregate}.state"), "parameters": id_param, "responses": {"200": {"description": "{aggregateId, version, state}"}, "404": {"description": "No such aggregate"}}}}));
        paths.insert(format!("/{aggregate}/{{id}}/requests/{{requestId}}"), json!({"get": {"operationId": format!("{aggregate}.outcome"), "responses": {"200": {"description": "APPENDED"}, "404": {"description": "NOT_APPENDED"}, "503": {"description": "UNKNOWN"}}}}));
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
