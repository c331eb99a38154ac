//! The operations of the service's own routes: commands, the reads of an aggregate, health,
//! metrics, this document and compensation, each with every answer it can give.

use serde_json::{json, Map, Value};
use wow_core::aggregate::Lifecycle;
use wow_core::command::{CommandInfo, CommandKind};
use wow_core::CommandStage;

use super::bounds::{any_case, id_schema, request_id_schema, tenant_schema, whole_number_text};
use crate::config::HttpConfig;

fn header(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "header", "required": false, "description": description, "schema": schema})
}

pub(super) fn path_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description, "schema": schema})
}

fn tenant_header() -> Value {
    header(
        "Command-Tenant-Id",
        "The tenant (default `(0)`): the rules of an aggregate id; 400 IllegalArgument otherwise. Not read when bearer auth is on: the token decides the tenant.",
        tenant_schema(),
    )
}

fn aggregate_id_param() -> Value {
    path_param("id", "The aggregate id.", id_schema())
}

/// The headers every command route reads; the wait stage depends on the command's kind.
fn command_headers(kind: CommandKind, config: &HttpConfig) -> Vec<Value> {
    let stage = if kind == CommandKind::Void {
        header(
            "Command-Wait-Stage",
            "A void command is handled by no aggregate: only SENT can be awaited, and it is the default. A later stage is a 400 IllegalArgument. Void commands are at-least-once: their consumers must be idempotent.",
            json!({"type": "string", "enum": ["SENT"], "default": "SENT"}),
        )
    } else {
        let stages: Vec<&str> = CommandStage::ALL.iter().map(|s| s.as_str()).collect();
        header(
            "Command-Wait-Stage",
            "The stage to wait for.",
            json!({"type": "string", "enum": stages, "default": "PROCESSED"}),
        )
    };
    let max_wait = u64::try_from(config.max_wait_timeout.as_millis()).unwrap_or(u64::MAX);
    let default_wait = u64::try_from(config.default_wait_timeout.as_millis()).unwrap_or(max_wait);
    vec![
        header(
            "Command-Request-Id",
            "The business intent; resend with the same value (1-128 bytes of visible ASCII; default: the command id). A resend of an intent already decided gets the original decision: 409 DuplicateRequestId for an appended one, the original rejection (its status, code and message, header Wow-Replayed: true) for a rejected one; the same request id with another body is 409 RequestIdReused.",
            request_id_schema(),
        ),
        stage,
        header(
            "Command-Wait-Timeout",
            &format!("Milliseconds to wait (default {default_wait}); past it the answer is 408 RequestTimeout (outcome unknown: look it up by request id)."),
            whole_number_text(1, max_wait),
        ),
        header(
            "Command-Aggregate-Version",
            "The version the aggregate must be at; another is 409 CommandExpectVersionConflict.",
            whole_number_text(0, u64::MAX),
        ),
        tenant_header(),
    ]
}

/// A JSON answer whose body is the component schema `schema`, with `headers`.
fn answer(description: &str, schema: &str, headers: Map<String, Value>) -> Value {
    json!({"description": description, "headers": headers,
        "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

fn error_code_header() -> (String, Value) {
    (
        "Wow-Error-Code".to_owned(),
        json!({"description": "The answer's error code (`Ok` on success), as in the body", "required": true, "schema": {"type": "string"}}),
    )
}

fn replayed_header() -> (String, Value) {
    (
        "Wow-Replayed".to_owned(),
        json!({"description": "`true` when the answer replays the decision recorded for the request id (SPEC ID-6)", "schema": {"type": "string", "enum": ["true"]}}),
    )
}

/// A command's answer: a `CommandResult` with `Wow-Error-Code`, and `Wow-Replayed` when
/// the status can replay a recorded rejection.
fn result(description: &str, replayable: bool) -> Value {
    let mut headers: Map<String, Value> = [error_code_header()].into_iter().collect();
    if replayable {
        headers.extend([replayed_header()]);
    }
    answer(description, super::wow_client::COMMAND_RESULT, headers)
}

/// An error answer of a route that is not a command: `{errorCode, errorMsg}` with
/// `Wow-Error-Code`.
pub(super) fn error(description: &str) -> Value {
    answer(
        description,
        "Error",
        [error_code_header()].into_iter().collect(),
    )
}

/// An error answer of command routes: its status, its description, whether it is replayed,
/// and which kinds of command meet it.
type CommandError = (&'static str, &'static str, bool, fn(CommandKind) -> bool);

/// The error answers of a command route, in the document's order: status, description,
/// whether a resend with the request id replays it (`Wow-Replayed`), and the kinds of
/// command that can meet it.
const COMMAND_ERRORS: [CommandError; 11] = [
    ("400", "Invalid input, nothing recorded: CommandValidation (bindingErrors name the fields), IllegalArgument (a header or the id breaks its rule), BadRequest (the body is not JSON, repeats a key, or has not the payload's shape)", false, every_kind),
    ("404", "NotFound: the aggregate does not exist (or is another tenant's); also a replayed NotFound", true, |kind| !matches!(kind, CommandKind::Create | CommandKind::AllowCreate | CommandKind::Void)),
    ("403", "IllegalAccessOwnerAggregate / IllegalAccessSpaceAggregate: the aggregate exists and is of another owner or space than the caller's (its token's, or the Command-Owner-Id / Wow-Space-Id it names); nothing recorded, nothing of the aggregate in the answer", false, every_kind),
    ("408", "RequestTimeout: the wait expired, the outcome is unknown: look it up by request id. Or BadRequest: the body did not arrive within the server's body read timeout (the command was not sent)", false, every_kind),
    ("413", "BadRequest: the body is longer than the body limit (refused before it is read when Content-Length announces it); nothing recorded", false, every_kind),
    ("415", "BadRequest: a body sent without `Content-Type: application/json` (or a `+json` type); nothing recorded. A command with no body needs no type", false, every_kind),
    ("409", "A conflict: DuplicateRequestId (with the original version and result.originalCommandId), RequestIdReused, EventVersionConflict, DuplicateAggregateId, DuplicateKey (a unique key another aggregate of the tenant holds; recorded, so a resend is replayed), DeadlineNotPending (a deadline's command whose schedule a later event moved or cancelled; recorded), CommandExpectVersionConflict (also replayed)", true, every_kind),
    ("422", "A business rule of the domain, under its own code (also replayed for a resend of a rejected intent, with result.originalCommandId); IllegalState: a recover of an aggregate that is not deleted", true, |kind| kind != CommandKind::Void),
    ("410", "IllegalAccessDeletedAggregate: the aggregate is deleted (soft delete); only recover reaches it (also replayed)", true, |kind| !matches!(kind, CommandKind::Create | CommandKind::Void)),
    ("500", "InternalServerError: a fault in the service; the outcome is unknown: look it up", false, every_kind),
    ("503", "ServiceUnavailable: bus or store unreachable; the outcome is unknown: look it up. ServiceFailed: a service the handler consulted (a price, say) failed or ran past the command's deadline; nothing was recorded: resend with the same request id. StreamParked: a wait for a consumer whose earlier stream of the aggregate failed; the command was appended and its stream waits in order behind that one", false, every_kind),
];

/// Every kind of command.
fn every_kind(_: CommandKind) -> bool {
    true
}

/// The answers of a command route of `kind`.
fn command_responses(kind: CommandKind) -> Map<String, Value> {
    let mut ok = result(
        if kind == CommandKind::Void {
            "The result at SENT: the bus accepted it"
        } else {
            "The result at the awaited stage"
        },
        false,
    );
    if kind != CommandKind::Void {
        ok["content"]["text/event-stream"] = json!({"schema": {"type": "string", "description": "With `Accept: text/event-stream`: one event per stage, `id` the result's id, `event` the stage, `data` the CommandResult as JSON"}});
    }
    let mut responses = Map::new();
    responses.insert("200".to_owned(), ok);
    for (status, description, replayable, meets) in COMMAND_ERRORS {
        if meets(kind) {
            responses.insert(status.to_owned(), result(description, replayable));
        }
    }
    responses
}

/// `POST /{aggregate}/{id}/{command}`, or `POST /{aggregate}/{command}` when `with_id` is false.
///
/// Wow's client generator reads the operation whose id is `context.aggregate.command`, whose
/// body is the component schema of the payload and whose `200` is `wow.CommandOk`: a create
/// without the id in its path, as Wow routes it, and every other command. A create with the
/// id in its path is `context.aggregate.command.with_id`, answered inline (with its links).
pub(super) fn command_operation(
    context: &str,
    aggregate: &str,
    command: &CommandInfo,
    with_id: bool,
    config: &HttpConfig,
) -> Value {
    let mut parameters = Vec::new();
    let creates = matches!(command.kind, CommandKind::Create | CommandKind::AllowCreate);
    let (operation_id, summary) = if with_id {
        parameters.push(aggregate_id_param());
        (
            if creates {
                format!("{context}.{aggregate}.{}.with_id", command.name)
            } else {
                format!("{context}.{aggregate}.{}", command.name)
            },
            format!("{aggregate} `{}` ({:?})", command.name, command.kind),
        )
    } else {
        parameters.push(header(
            "Command-Aggregate-Id",
            "The new aggregate's id (the rules of an aggregate id; 400 IllegalArgument otherwise). Without it and with a Command-Request-Id, the id is derived from (tenant, aggregate name, request id), so a resend reaches the same aggregate and is answered 409 DuplicateRequestId with the original version, never opening a second aggregate; with neither header, the server makes a fresh id (and a resend would open another aggregate).",
            id_schema(),
        ));
        (
            format!("{context}.{aggregate}.{}", command.name),
            format!(
                "{aggregate} `{}` ({:?}), the id from a header, the request id or the server",
                command.name, command.kind
            ),
        )
    };
    parameters.extend(command_headers(command.kind, config));
    let schema = (command.schema)();
    // An empty body is `{}`: it can be left out only when the payload requires no field.
    let body_required = schema["required"]
        .as_array()
        .is_some_and(|required| !required.is_empty());
    let keys = super::wow_client::AggregateKeys::new(context, aggregate);
    let mut responses = command_responses(command.kind);
    if !(with_id && creates) {
        responses.insert(
            "200".to_owned(),
            json!({"$ref": format!("#/components/responses/{}", super::wow_client::COMMAND_OK)}),
        );
    }
    json!({"post": {
        "operationId": operation_id,
        "tags": [format!("{context}.{aggregate}")],
        "summary": summary,
        "x-command-kind": command.kind,
        "parameters": parameters,
        "requestBody": {"required": body_required, "description": format!("The command's payload as JSON (an empty body is `{{}}`), at most {} bytes (413 above)", config.body_limit), "content": {"application/json": {"schema": super::wow_client::schema_ref(&keys.command(command.name))}}},
        "responses": responses,
    }})
}

/// `DELETE /{aggregate}/{id}` (Wow's soft delete) and `PUT /{aggregate}/{id}/recover`, as the
/// aggregate's `lifecycle` opens them to callers (SPEC DM-6): none for `Internal` and
/// `Disabled`, an operator token's for `Operator` ([`OPERATOR_COMMAND`]).
pub(super) fn lifecycle_paths(
    context: &str,
    aggregate: &str,
    lifecycle: Lifecycle,
    config: &HttpConfig,
    paths: &mut Map<String, Value>,
) {
    if !lifecycle.open_over_http() {
        return;
    }
    let operation = |id: &str, summary: &str| {
        let mut parameters = vec![aggregate_id_param()];
        parameters.extend(command_headers(CommandKind::Normal, config));
        let mut operation = json!({
            "operationId": format!("{context}.{aggregate}.{id}"),
            "tags": [format!("{context}.{aggregate}")],
            "summary": summary,
            "x-command-kind": CommandKind::Normal,
            "parameters": parameters,
            "responses": command_responses(CommandKind::Normal),
        });
        if lifecycle == Lifecycle::Operator {
            operation[OPERATOR_COMMAND] = json!(true);
            if let Some(parameters) = operation["parameters"].as_array_mut() {
                for parameter in parameters {
                    if parameter["name"] == "Command-Tenant-Id" {
                        parameter["description"] = json!("The tenant the operator acts in (default `(0)`): the rules of an aggregate id; 400 IllegalArgument otherwise. Read also when bearer auth is on: an operator token acts in any tenant.");
                    }
                }
            }
        }
        operation
    };
    paths.insert(
        format!("/{aggregate}/{{id}}"),
        json!({"delete": operation("default_delete_aggregate", "Delete softly: history is kept, the aggregate's unique keys are released and its deadlines cancelled; every command but recover is then 410 IllegalAccessDeletedAggregate")}),
    );
    paths.insert(
        format!("/{aggregate}/{{id}}/recover"),
        json!({"put": operation("default_recover_aggregate", "Recover a deleted aggregate: its unique keys are claimed again (409 DuplicateKey when another aggregate took one meanwhile) and its deadlines scheduled again (422 IllegalState when it is not deleted)")}),
    );
}

/// The answers every read of an aggregate can give besides its own.
fn read_errors(responses: &mut Map<String, Value>, not_found: &str) {
    responses.insert(
        "400".to_owned(),
        error("IllegalArgument: Command-Tenant-Id breaks the rules of an id, or an argument is malformed"),
    );
    responses.insert("404".to_owned(), error(not_found));
    responses.insert(
        "503".to_owned(),
        error("ServiceUnavailable: the store cannot be read"),
    );
}

/// What a heavy read answers past its shares or its budget: 429 and 503 `QueryTimeout`.
pub(super) fn heavy_read_errors(responses: &mut Map<String, Value>) {
    responses.insert(
        "429".to_owned(),
        error("TooManyRequests: the tenant's or the client address's share of heavy reads stayed full for the whole wait (Retry-After)"),
    );
    responses.insert(
        "503".to_owned(),
        error("ServiceUnavailable: the store cannot be read; QueryTimeout: the read ran past the read budget and was stopped"),
    );
}

/// `GET /{aggregate}/{id}/state`: the bare state of `aggregate` of `context`, its version in
/// `ETag`.
pub(super) fn state_path(context: &str, aggregate: &str) -> Value {
    let keys = super::wow_client::AggregateKeys::new(context, aggregate);
    let mut responses = Map::new();
    responses.insert(
        "200".to_owned(),
        json!({"description": "The aggregate's state, bare (as Wow's clients read it, under every prefix and none); its version in ETag",
            "headers": {"ETag": {"description": "The state's version as a strong entity tag, quoted: `\"3\"`", "required": true,
                "schema": {"type": "string", "pattern": "^\"[0-9]+\"$"}}},
            "content": {"application/json": {"schema": super::wow_client::schema_ref(&keys.state())}}}),
    );
    read_errors(
        &mut responses,
        "NotFound: no such aggregate (or another tenant's, or an id that breaks the rules)",
    );
    json!({"get": {
        "operationId": format!("{aggregate}.state"),
        "summary": format!("The state of one {aggregate}, its version in ETag"),
        "parameters": [aggregate_id_param(), tenant_header()],
        "responses": responses,
    }})
}

/// A pending deadline, as the store keeps it (SPEC DM-2).
fn scheduled_command() -> Value {
    let string = json!({"type": "string"});
    let aggregate_id = json!({"type": "object", "required": ["contextName", "aggregateName", "aggregateId", "tenantId"], "properties": {
        "contextName": string, "aggregateName": string, "aggregateId": string, "tenantId": string}});
    json!({"type": "object", "required": ["owner", "name", "dueAt", "target", "command", "body", "requestId"], "properties": {
        "owner": aggregate_id, "name": string, "dueAt": {"type": "integer"}, "target": aggregate_id,
        "command": string, "body": {}, "requestId": string}})
}

/// `GET /{aggregate}/{id}/deadlines` (SPEC DM-2).
pub(super) fn deadlines_path(aggregate: &str) -> Value {
    let mut responses = Map::new();
    responses.insert(
        "200".to_owned(),
        json!({"description": "The aggregate's pending deadlines, by name: when each is due (milliseconds since the Unix epoch), the command it sends and the request id it is sent with (empty when none is pending)", "content": {"application/json": {"schema": {
            "type": "array", "items": scheduled_command()}}}}),
    );
    read_errors(
        &mut responses,
        "NotFound: the service keeps no deadlines, or an id that breaks the rules",
    );
    json!({"get": {
        "operationId": format!("{aggregate}.deadlines"),
        "summary": format!("The pending deadlines of one {aggregate}"),
        "parameters": [aggregate_id_param(), tenant_header()],
        "responses": responses,
    }})
}

/// `GET /deadlines` (operators, SPEC DM-2).
pub(crate) fn pending_deadlines() -> Value {
    let mut operation = operator_get(
        "service.deadlines",
        "Every tenant's pending deadlines: how many, the earliest due time, and the earliest rows",
        json!({"description": "The backlog and the earliest rows, earliest first", "content": {"application/json": {"schema": {
            "type": "object", "required": ["pending", "earliest"], "properties": {
                "pending": {"type": "integer", "minimum": 0},
                "nextDueAt": {"type": ["integer", "null"]},
                "earliest": {"type": "array", "items": scheduled_command()}}}}}}),
    );
    operation["get"]["parameters"] = json!([{"name": "limit", "in": "query", "required": false,
        "description": "How many of the earliest rows to list (50 unless given, at most 500)",
        "schema": {"type": "integer", "minimum": 0, "maximum": 500}}]);
    operation
}

/// The path parameters of one pending deadline: its owner and its name.
fn deadline_row_params() -> Value {
    json!([
        path_param(
            "tenant",
            "The owner's tenant (`(0)` for the default tenant).",
            tenant_schema()
        ),
        path_param(
            "aggregate",
            "The owner's aggregate type.",
            json!({"type": "string", "minLength": 1})
        ),
        path_param("id", "The owner's id.", id_schema()),
        path_param(
            "name",
            "The deadline's name; a saga's is `{saga}/{name}`, its `/` written `%2F`.",
            json!({"type": "string", "minLength": 1})
        ),
    ])
}

/// A pending deadline with where its firing stands (SPEC DM-2).
fn pending_deadline() -> Value {
    let mut row = scheduled_command();
    row["properties"]["fireAt"] = json!({"type": "integer"});
    row["properties"]["attempts"] = json!({"type": "integer", "minimum": 0});
    if let Some(required) = row["required"].as_array_mut() {
        required.push(json!("fireAt"));
        required.push(json!("attempts"));
    }
    row
}

/// `POST /deadlines/{tenant}/{aggregate}/{id}/{name}/fire` and
/// `DELETE /deadlines/{tenant}/{aggregate}/{id}/{name}` (operators, SPEC DM-2).
fn deadline_actions(method: &str) -> Value {
    let (operation_id, summary, ok) = if method == "post" {
        ("deadline.fire", "Fires one pending deadline now: its retry delay and any hold lifted (recorded: who, when)", "The row as it now stands, due at once")
    } else {
        (
            "deadline.cancel",
            "Cancels one pending deadline: it never fires (recorded: who, when)",
            "The row as it was",
        )
    };
    json!({method: {"operationId": operation_id, "summary": summary, OPERATOR_COMMAND: true,
    "parameters": deadline_row_params(),
    "responses": {
        "200": {"description": ok, "content": {"application/json": {"schema": pending_deadline()}}},
        "404": error("NotFound: the service keeps no deadlines, the aggregate type is unknown, or the owner has no such deadline pending"),
        "503": error("ServiceUnavailable: the deadline store cannot be reached"),
    }}})
}

/// `GET /{aggregate}/{id}/event/{head}/{tail}`.
pub(super) fn events_path(aggregate: &str) -> Value {
    let version = |name: &str, what: &str| {
        path_param(
            name,
            what,
            json!({"type": "integer", "minimum": 1, "maximum": u64::MAX}),
        )
    };
    let mut responses = Map::new();
    responses.insert(
        "200".to_owned(),
        json!({"description": "The streams with versions in head..=tail, in version order (empty for an aggregate that does not exist)", "content": {"application/json": {"schema": {
            "type": "array", "items": {"$ref": "#/components/schemas/DomainEventStream"}}}}}),
    );
    read_errors(
        &mut responses,
        "NotFound: another tenant's aggregate, or an id that breaks the rules",
    );
    responses.insert(
        "400".to_owned(),
        error(
            "IllegalArgument: head is above tail, the range holds more than 1,000 versions (the message names the page to ask for), or Command-Tenant-Id breaks the rules of an id",
        ),
    );
    heavy_read_errors(&mut responses);
    json!({"get": {
        "operationId": format!("{aggregate}.events"),
        "summary": format!("The event streams of one {aggregate}, in version order"),
        "parameters": [
            aggregate_id_param(),
            version("head", "The first version (from 1); at most tail, else 400 IllegalArgument."),
            version("tail", "The last version."),
            tenant_header(),
        ],
        "responses": responses,
    }})
}

/// `GET /{aggregate}/{id}/requests/{requestId}` (SPEC TO-1).
pub(super) fn look_up_path(aggregate: &str) -> Value {
    let object = |status: &str, mut properties: Map<String, Value>| {
        properties.insert(
            "status".to_owned(),
            json!({"type": "string", "enum": [status]}),
        );
        let required: Vec<&String> = properties.keys().collect();
        json!({"type": "object", "required": required, "properties": properties})
    };
    let fields = |names: &[(&str, Value)]| -> Map<String, Value> {
        names
            .iter()
            .map(|(name, schema)| ((*name).to_owned(), schema.clone()))
            .collect()
    };
    let (string, integer) = (json!({"type": "string"}), json!({"type": "integer"}));
    let content = |schema: Value| json!({"application/json": {"schema": schema}});
    let appended = object(
        "APPENDED",
        fields(&[
            ("version", integer.clone()),
            ("commandId", string.clone()),
            ("createTime", integer.clone()),
            (
                "stream",
                json!({"$ref": "#/components/schemas/DomainEventStream"}),
            ),
        ]),
    );
    let rejected = object(
        "REJECTED",
        fields(&[
            ("errorCode", string.clone()),
            ("errorMsg", string.clone()),
            ("commandId", string.clone()),
            ("createTime", integer.clone()),
            ("version", integer),
        ]),
    );
    // The look-up's UNKNOWN, or the connection limit's `{errorCode, errorMsg}` (no status).
    let unknown = json!({"type": "object", "required": ["errorCode", "errorMsg"], "properties": {
        "status": {"type": "string", "enum": ["UNKNOWN"]}, "errorCode": string, "errorMsg": string}});
    // NONE, or NotFound `{errorCode, errorMsg}` for an aggregate id that breaks the rules.
    let none = json!({"type": "object", "properties": {
            "status": {"type": "string", "enum": ["NONE"]}, "errorCode": string, "errorMsg": string},
        "anyOf": [{"required": ["status"]}, {"required": ["errorCode", "errorMsg"]}]});
    let mut responses = Map::new();
    responses.insert("200".to_owned(), json!({"description": "A final decision. APPENDED: the intent took effect (version, command id, the stream); never resend it as a new intent. REJECTED: refused for good (code, message, the version it was decided on); a resend gets the same answer.", "content": content(json!({"oneOf": [appended, rejected]}))}));
    responses.insert("202".to_owned(), json!({"description": "IN_FLIGHT: this node holds the request and has not decided yet; wait, then look again", "content": content(object("IN_FLIGHT", Map::new()))}));
    responses.insert(
        "400".to_owned(),
        error("IllegalArgument: Command-Tenant-Id breaks the rules of an id, or the request id those of a request id"),
    );
    let (code_name, code) = error_code_header();
    let optional_code = json!({code_name.clone(): {"description": "NotFound when the aggregate id breaks the rules; absent with NONE", "schema": {"type": "string"}}});
    responses.insert("404".to_owned(), json!({"description": "NONE: no decision is recorded and this node does not hold it (or the aggregate id breaks the rules: NotFound); resending with the same request id is safe", "headers": optional_code, "content": content(none)}));
    responses.insert("503".to_owned(), json!({"description": "UNKNOWN: history cannot be asked, or an appended stream cannot be read; stay unknown and escalate, never resend under a new request id; or ServiceUnavailable without a status: the server is at its connection limit", "headers": {code_name: code}, "content": content(unknown)}));
    json!({"get": {
        "operationId": format!("{aggregate}.outcome"),
        "summary": "What became of a request id in this aggregate (SPEC TO-1)",
        "parameters": [
            aggregate_id_param(),
            path_param("requestId", "The request id, percent-encoded as one path segment (a saga's request ids hold `/`): 1 to 128 visible ASCII characters, as a command carries it; another is 400 IllegalArgument.", request_id_schema()),
            tenant_header(),
        ],
        "responses": responses,
    }})
}

/// `GET /metrics`: the Prometheus text, an operator's.
pub(crate) fn metrics_text() -> Value {
    operator_get(
        "service.metrics",
        "Prometheus text: commands by stage and code, latency, duplicates",
        json!({"description": "The Prometheus text format", "content": {"text/plain": {"schema": {"type": "string"}}}}),
    )
}

/// `GET /openapi.json`: this document, anyone's.
pub(crate) fn openapi_document() -> Value {
    public_get(
        "service.openapi",
        "This document",
        json!({"description": "OpenAPI 3.1", "content": {"application/json": {"schema": {"type": "object"}}}}),
    )
}

/// `DELETE /deadlines/{tenant}/{aggregate}/{id}/{name}`: an operator's cancel.
pub(crate) fn cancel_deadline() -> Value {
    deadline_actions("delete")
}

/// `POST /deadlines/{tenant}/{aggregate}/{id}/{name}/fire`: an operator's re-fire.
pub(crate) fn fire_deadline() -> Value {
    deadline_actions("post")
}

/// `GET /metrics.json`: the counters of `/metrics` as JSON.
pub(crate) fn metrics_json() -> Value {
    let count = json!({"type": "integer", "minimum": 0});
    let counted = |fields: &[&str]| {
        let mut properties: Map<String, Value> = fields
            .iter()
            .map(|field| ((*field).to_owned(), json!({"type": "string"})))
            .collect();
        properties.insert("count".to_owned(), count.clone());
        let mut required: Vec<&str> = fields.to_vec();
        required.push("count");
        json!({"type": "array", "items": {"type": "object", "required": required, "properties": properties}})
    };
    operator_get(
        "service.metrics_json",
        "The counters of /metrics as JSON (the operations page draws them): commands by stage and code, the latency histogram (cumulative buckets, seconds), each consumer's signals, the backlog",
        json!({"description": "The counters, since the service started", "content": {"application/json": {"schema": {
            "type": "object",
            "required": ["commands", "latency", "consumerSignals", "eventBacklog", "quarantined"],
            "properties": {
                "commands": counted(&["stage", "errorCode"]),
                "latency": {"type": "object", "required": ["buckets", "count", "sum"], "properties": {
                    "buckets": {"type": "array", "items": {"type": "object", "required": ["le", "count"],
                        "properties": {"le": {"type": "number"}, "count": count}}},
                    "count": count, "sum": {"type": "number", "minimum": 0}}},
                "consumerSignals": counted(&["stage", "consumer", "errorCode"]),
                "consumerLag": consumer_lag(),
                "duplicates": {"type": "object"},
                "bloomHits": count, "handlerRuns": count, "eventBacklog": count, "quarantined": count}}}}}),
    )
}

/// An operations page file, an operator's.
fn page_file(operation_id: &str, summary: &str, media: &str) -> Value {
    operator_get(
        operation_id,
        summary,
        json!({"description": "The file", "content": {media: {"schema": {"type": "string"}}}}),
    )
}

/// `GET /ui`: the operations page, and its sign-in by `?token=` (an operator token sets the
/// cookie the page then loads with).
pub(crate) fn ui_page() -> Value {
    let mut page = page_file("ui.page", "The operations page: failures and their retry, quarantined aggregates, the outcome look-up, live counters", "text/html");
    page["get"]["parameters"] = json!([{"name": "token", "in": "query", "required": false,
        "description": "An operator token, given once by a browser (auth on): answered 303 to `ui` with the cookie `wow-operator` set (HttpOnly, SameSite=Strict); a token that is not an operator's is refused as a bearer token would be. Ignored when no token is configured.",
        "schema": {"type": "string"}}]);
    page
}

/// `GET /ui/app.js`.
pub(crate) fn ui_script() -> Value {
    page_file(
        "ui.script",
        "The operations page's script",
        "text/javascript",
    )
}

/// `GET /ui/app.css`.
pub(crate) fn ui_style() -> Value {
    page_file("ui.style", "The operations page's style sheet", "text/css")
}

/// A `GET` of the operator's that answers only `ok` (the auth answers are added by
/// [`complete`](super::completion::complete) when the operator's routes are gated).
fn operator_get(operation_id: &str, summary: &str, ok: Value) -> Value {
    json!({"get": {"operationId": operation_id, "summary": summary, OPERATOR_AUTH: true, "responses": {"200": ok}}})
}

/// A `GET` that needs no token and answers only `ok`.
fn public_get(operation_id: &str, summary: &str, ok: Value) -> Value {
    json!({"get": {"operationId": operation_id, "summary": summary, "security": [], "responses": {"200": ok}}})
}

/// `GET /unique-key/{space}/{value}` (SPEC DM-1): whether a unique key is taken, and by whom
/// when the caller may see it (SPEC TN-2); `DELETE`, the operator's release
/// ([`OPERATOR_COMMAND`]).
pub(crate) fn unique_key_holder() -> Value {
    let string = json!({"type": "string"});
    let aggregate_id = json!({"type": "object", "required": ["contextName", "aggregateName", "aggregateId", "tenantId"], "properties": {
        "contextName": string, "aggregateName": string, "aggregateId": string, "tenantId": string}});
    let version = json!({"type": "integer", "minimum": 1});
    let reserved_until = json!({"type": "integer", "description": "When the holder's reservation lapses (milliseconds since the Unix epoch); absent when the key is held until released"});
    let taken = json!({"type": "object", "required": ["space", "value", "taken"], "properties": {
        "space": string, "value": string, "taken": {"type": "boolean", "const": true},
        "version": version, "reservedUntil": reserved_until, "aggregateId": aggregate_id}});
    let holder = json!({"type": "object", "required": ["space", "value", "aggregateId", "version"], "properties": {
        "space": string, "value": string, "version": version, "reservedUntil": reserved_until,
        "aggregateId": aggregate_id}});
    let key_params = || {
        vec![
            path_param(
                "space",
                "The key space, as the aggregate names it (`sku`, `email`)",
                json!({"type": "string", "pattern": "^[a-z0-9_.-]{1,64}$"}),
            ),
            path_param(
                "value",
                "The value, percent-encoded as one path segment",
                json!({"type": "string", "minLength": 1, "maxLength": 512}),
            ),
        ]
    };
    let mut responses = Map::new();
    responses.insert("200".to_owned(), json!({"description": "The key is taken by an aggregate of the caller's tenant: `taken: true`, with the holder (`aggregateId`) and the version of the stream that claimed it when the caller may see that aggregate (a token bound to no owner and no space, or the holder is of the token's owner and space); without them otherwise (SPEC TN-2)", "content": {"application/json": {"schema": taken}}}));
    responses.insert(
        "400".to_owned(),
        error("IllegalArgument: the key space is not 1 to 64 of a-z, 0-9, `_`, `-`, `.`, or the value not 1 to 512 bytes; or Command-Tenant-Id breaks the rules of an id"),
    );
    responses.insert(
        "404".to_owned(),
        error("NotFound: no aggregate of the caller's tenant holds the key (it is free to claim)"),
    );
    let mut get_params = key_params();
    get_params.push(tenant_header());
    let mut released = Map::new();
    released.insert("200".to_owned(), json!({"description": "Released: the aggregate that held the key and the version of the stream that claimed it. History is not touched (the holder's state still names the key); the release is logged under the target `wow::audit` with the SHA-256 fingerprint of the operator's token", "content": {"application/json": {"schema": holder}}}));
    released.insert(
        "400".to_owned(),
        error("IllegalArgument: the key space is not 1 to 64 of a-z, 0-9, `_`, `-`, `.`, the value not 1 to 512 bytes, or Command-Tenant-Id breaks the rules of an id; BadRequest: more than one Authorization header"),
    );
    released.insert(
        "404".to_owned(),
        error("NotFound: no aggregate of the tenant held the key; nothing was released"),
    );
    released.insert(
        "503".to_owned(),
        error("ServiceUnavailable: the store cannot be reached; whether the key was released is unknown until it answers (look it up)"),
    );
    let mut delete_params = key_params();
    delete_params.push(header(
        "Command-Tenant-Id",
        "The tenant the operator acts in (default `(0)`): the rules of an aggregate id; 400 IllegalArgument otherwise. Read also when bearer auth is on: an operator token acts in any tenant.",
        tenant_schema(),
    ));
    json!({
        "get": {
            "operationId": "service.unique_key",
            "summary": "Whether a unique key (an SKU, an email) is taken in the caller's tenant, and by whom when the caller may see it (SPEC DM-1, TN-2)",
            "parameters": get_params,
            "responses": responses,
        },
        "delete": {
            "operationId": "service.unique_key_release",
            "summary": "An operator's release of a unique key, whoever holds it (SPEC DM-1): another aggregate may then claim it",
            OPERATOR_COMMAND: true,
            "parameters": delete_params,
            "responses": released,
        },
    })
}

/// `GET /health`: up, with the quarantined aggregates.
pub(crate) fn health() -> Value {
    let quarantined = json!({"type": "object",
        "required": ["contextName", "aggregateName", "aggregateId", "tenantId", "version", "message", "since"],
        "properties": {"contextName": {"type": "string"}, "aggregateName": {"type": "string"},
            "aggregateId": {"type": "string"}, "tenantId": {"type": "string"},
            "version": {"type": "integer"}, "message": {"type": "string"}, "since": {"type": "integer"}}});
    let store = json!({"type": "object",
        "description": "What the store says of itself (PostgreSQL), checked within 1 s; absent for a store with nothing to say",
        "required": ["status", "reachable", "writable"],
        "properties": {
            "status": {"type": "string", "enum": ["UP", "READ_ONLY", "DOWN", "SATURATED"]},
            "reachable": {"type": "boolean"}, "writable": {"type": "boolean"},
            "connections": {"type": ["object", "null"], "properties": {
                "open": {"type": "integer"}, "max": {"type": "integer"},
                "idle": {"type": "integer"}, "waiting": {"type": "integer"}}},
            "lostForMs": {"type": ["integer", "null"], "description": "How long store calls have been failing; null while they are answered"},
            "error": {"type": ["string", "null"], "description": "Why it is not UP, with the SQLSTATE when the server gave one"}}});
    json!({"get": {
        "operationId": "service.health",
        "summary": "Whether the service is up (always UP while it answers); the quarantined aggregates (SPEC PX-1) in details: the count of all, the list of the caller's tenant's when it names one (a token, or Command-Tenant-Id), else of all",
        OPTIONAL_AUTH: true,
        "parameters": [header("Command-Tenant-Id", "Narrows details.quarantined to this tenant's (not read when bearer auth is on; any value is taken, one that is no tenant's lists none)", json!({"type": "string"}))],
        "responses": {"200": {"description": "Up", "content": {"application/json": {"schema": {
            "type": "object", "required": ["status"], "properties": {
                "status": {"type": "string", "enum": ["UP"]},
                "details": {"type": "object", "required": ["quarantinedCount", "quarantined"], "properties": {
                    "quarantinedCount": {"type": "integer", "minimum": 0},
                    "quarantined": {"type": "array", "items": quarantined},
                    "warnings": {"type": "array", "items": {"type": "string"}, "description": "What the service warned of at start (a crate built so that overflows wrap, started with WOW_OVERFLOW_CHECKS=warn); absent when none"},
                    "store": store,
                    "consumerLag": consumer_lag()}}}}}}}},
    }})
}

/// Each consumer's lag (SPEC DS-6), in `/metrics.json` and `/health`.
fn consumer_lag() -> Value {
    let count = json!({"type": "integer", "minimum": 0});
    json!({"type": "array", "description": "Each consumer's lag (SPEC DS-6): streams it has not handled (the process's queue, its failed streams and those parked behind them), streams parked behind a failed one, failures waiting (FAILED, EXHAUSTED), and the age of the oldest stream it holds back", "items": {"type": "object",
        "required": ["consumer", "streamsBehind", "parkedStreams", "failuresWaiting", "oldestUnhandledMs"],
        "properties": {"consumer": {"type": "string"}, "streamsBehind": count, "parkedStreams": count,
            "failuresWaiting": count, "oldestUnhandledMs": count}}})
}

/// The 404 of a compensation route.
const NO_COMPENSATION: &str =
    "NotFound: no such record, or this service records no consumer failures";

/// `GET /compensation/failures`: the recorded consumer failures.
pub(crate) fn compensation_failures() -> Value {
    let mut list = Map::new();
    list.insert("200".to_owned(), json!({"description": "ExecutionFailed records, in the order first recorded: one page", "headers": {
            "Wow-Total": {"description": "How many records match the filters in all, every page", "schema": {"type": "integer", "minimum": 0}}},
        "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/ExecutionFailed"}}}}}));
    list.insert(
        "400".to_owned(),
        error("BadRequest: a bad filter (status, recoverable, limit, an unknown parameter), or IllegalArgument: a bad Command-Tenant-Id"),
    );
    list.insert("404".to_owned(), error(NO_COMPENSATION));
    list.insert(
        "503".to_owned(),
        error("ServiceUnavailable: the store cannot be read"),
    );
    json!({"get": {
        "operationId": "compensation.failures",
        "summary": "Recorded consumer failures (event compensation), in the order first recorded; the caller's tenant's only when a tenant is named",
        "parameters": [
            {"name": "status", "in": "query", "description": "FAILED, EXHAUSTED, SUCCEEDED or SKIPPED (any case)", "schema": {"type": "string", "pattern": any_case(&["FAILED", "EXHAUSTED", "SUCCEEDED", "SKIPPED"])}},
            {"name": "consumer", "in": "query", "schema": {"type": "string"}},
            {"name": "aggregate", "in": "query", "description": "Only records of aggregates of this type (its name)", "schema": {"type": "string"}},
            {"name": "aggregateId", "in": "query", "description": "Only records of the aggregate with this id", "schema": {"type": "string"}},
            {"name": "recoverable", "in": "query", "description": "RECOVERABLE, UNRECOVERABLE or UNKNOWN (any case): only records an operator judged so", "schema": {"type": "string", "pattern": any_case(&["RECOVERABLE", "UNRECOVERABLE", "UNKNOWN"])}},
            {"name": "after", "in": "query", "description": "The last id of the previous page", "schema": {"type": "string"}},
            {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
            tenant_header(),
        ],
        "responses": list,
    }})
}

/// `GET /compensation/failures/{id}`: one recorded failure with its events.
pub(crate) fn compensation_detail() -> Value {
    let mut detail = Map::new();
    detail.insert("200".to_owned(), json!({"description": "The record and the stream it failed on, its events in today's shape", "content": {"application/json": {"schema": {
        "type": "object", "required": ["failure", "events"], "properties": {
            "failure": {"$ref": "#/components/schemas/ExecutionFailed"},
            "events": {"type": "array", "items": {"$ref": "#/components/schemas/DomainEventStream"}}}}}}}));
    detail.insert(
        "400".to_owned(),
        error("IllegalArgument: Command-Tenant-Id breaks the rules of an id"),
    );
    detail.insert("404".to_owned(), error(NO_COMPENSATION));
    detail.insert(
        "503".to_owned(),
        error("ServiceUnavailable: a store cannot be reached"),
    );
    json!({"get": {
        "operationId": "compensation.failure",
        "summary": "One recorded consumer failure, with the events it failed on",
        "parameters": [path_param("id", "The record's id.", json!({"type": "string", "minLength": 1})), tenant_header()],
        "responses": detail,
    }})
}

/// `POST /compensation/failures/{id}/retry`: one recorded failure run again.
pub(crate) fn compensation_retry() -> Value {
    let mut retry = Map::new();
    retry.insert("200".to_owned(), json!({"description": "The record after the retry: SUCCEEDED, or one attempt more", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ExecutionFailed"}}}}));
    retry.insert(
        "400".to_owned(),
        error("IllegalArgument: Command-Tenant-Id breaks the rules of an id"),
    );
    retry.insert("404".to_owned(), error(NO_COMPENSATION));
    retry.insert(
        "409".to_owned(),
        error("IllegalState: its consumer or stream is gone"),
    );
    retry.insert(
        "503".to_owned(),
        error("ServiceUnavailable: a store cannot be reached"),
    );
    json!({"post": {
        "operationId": "compensation.retry",
        "summary": "Runs exactly the recorded consumer on exactly the recorded stream again",
        "parameters": [path_param("id", "The record's id.", json!({"type": "string", "minLength": 1})), tenant_header()],
        "responses": retry,
    }})
}

/// `GET /compensation/parked`: the open lanes of parked streams (SPEC DS-5).
pub(crate) fn compensation_parked() -> Value {
    let integer = json!({"type": "integer", "minimum": 0});
    let lane = json!({"type": "object",
        "required": ["consumer", "aggregateId", "headVersion", "parkedThrough", "since", "parked"],
        "properties": {
            "consumer": {"type": "string"}, "aggregateId": {"type": "object"},
            "headVersion": integer, "parkedThrough": integer, "since": integer, "parked": integer}});
    let mut parked = Map::new();
    parked.insert("200".to_owned(), json!({"description": "The open lanes, oldest first: per consumer and aggregate, the failed version (headVersion, the only one retried), the highest version waiting behind it (parkedThrough), how many wait (parked) and since when", "content": {"application/json": {"schema": {"type": "array", "items": lane}}}}));
    parked.insert(
        "400".to_owned(),
        error("BadRequest: an unknown parameter, or IllegalArgument: a bad Command-Tenant-Id"),
    );
    parked.insert("404".to_owned(), error(NO_COMPENSATION));
    parked.insert(
        "503".to_owned(),
        error("ServiceUnavailable: a store cannot be reached"),
    );
    json!({"get": {
        "operationId": "compensation.parked",
        "summary": "The streams each consumer holds back behind a failed one of the same aggregate, in version order (SPEC DS-5)",
        "parameters": [
            {"name": "consumer", "in": "query", "description": "Only this consumer's lanes", "schema": {"type": "string"}},
            tenant_header()],
        "responses": parked,
    }})
}

/// `POST /compensation/failures/{id}/skip`: an operator gives up on one recorded failure.
pub(crate) fn compensation_skip() -> Value {
    let mut skip = Map::new();
    skip.insert("200".to_owned(), json!({"description": "The record after the skip: SKIPPED, with skippedBy and updatedAt (a record that had already succeeded or was skipped, as it stands)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ExecutionFailed"}}}}));
    skip.insert(
        "400".to_owned(),
        error("IllegalArgument: Command-Tenant-Id breaks the rules of an id"),
    );
    skip.insert("404".to_owned(), error(NO_COMPENSATION));
    skip.insert(
        "409".to_owned(),
        error("IllegalState: its stream is gone from history"),
    );
    skip.insert(
        "503".to_owned(),
        error("ServiceUnavailable: a store cannot be reached"),
    );
    json!({"post": {
        "operationId": "compensation.skip",
        "summary": "Skips the recorded stream for its consumer (recorded: who, when, which stream): it is never retried, counts as handled, and the consumer's streams of that aggregate parked behind it run in order",
        OPERATOR_COMMAND: true,
        "parameters": [path_param("id", "The record's id.", json!({"type": "string", "minLength": 1})), tenant_header()],
        "responses": skip,
    }})
}

/// `PUT /compensation/failures/{id}/retry-spec`: an operator sets one record's retry spec.
pub(crate) fn compensation_retry_spec() -> Value {
    let mut responses = Map::new();
    responses.insert("200".to_owned(), json!({"description": "The record after the edit: its retrySpec, updatedBy and updatedAt; FAILED with its next retry by the new spec, or EXHAUSTED when the new limit allows no more attempts (a settled record keeps its status)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ExecutionFailed"}}}}));
    responses.insert(
        "400".to_owned(),
        error("BadRequest: a body that is not the retry spec (maxAttempts at least 1, initialBackoffMs at most maxBackoffMs), or IllegalArgument: a bad Command-Tenant-Id"),
    );
    responses.insert("404".to_owned(), error(NO_COMPENSATION));
    responses.insert(
        "503".to_owned(),
        error("ServiceUnavailable: the store cannot be reached"),
    );
    json!({"put": {
        "operationId": "compensation.retry_spec",
        "summary": "Gives the record its own retry spec, which its next retries follow instead of the service's (recorded: who, when, which spec)",
        OPERATOR_COMMAND: true,
        "parameters": [path_param("id", "The record's id.", json!({"type": "string", "minLength": 1})), tenant_header()],
        "requestBody": {"required": true, "content": {"application/json": {"schema": retry_spec_schema()}}},
        "responses": responses,
    }})
}

/// `PUT /compensation/failures/{id}/recoverable`: an operator judges whether one record can
/// recover.
pub(crate) fn compensation_recoverable() -> Value {
    let mut responses = Map::new();
    responses.insert("200".to_owned(), json!({"description": "The record after the edit: its recoverable, updatedBy and updatedAt (nothing else changes)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ExecutionFailed"}}}}));
    responses.insert(
        "400".to_owned(),
        error("BadRequest: a body that is not {\"recoverable\": RECOVERABLE | UNRECOVERABLE | UNKNOWN}, or IllegalArgument: a bad Command-Tenant-Id"),
    );
    responses.insert("404".to_owned(), error(NO_COMPENSATION));
    responses.insert(
        "503".to_owned(),
        error("ServiceUnavailable: the store cannot be reached"),
    );
    json!({"put": {
        "operationId": "compensation.recoverable",
        "summary": "Judges whether a retry of the record can succeed (Wow's RecoverableType): the scheduler does not retry an UNRECOVERABLE record by itself, a manual retry still runs it (recorded: who, when, which judgement)",
        OPERATOR_COMMAND: true,
        "parameters": [path_param("id", "The record's id.", json!({"type": "string", "minLength": 1})), tenant_header()],
        "requestBody": {"required": true, "content": {"application/json": {"schema": {
            "type": "object", "additionalProperties": false, "required": ["recoverable"],
            "properties": {"recoverable": recoverable_schema()}}}}},
        "responses": responses,
    }})
}

/// `POST /consumers/{consumer}/redispatch`: an operator runs one consumer again on a range of
/// history.
pub(crate) fn consumer_redispatch() -> Value {
    let version = json!({"type": "integer", "minimum": 1, "maximum": i64::MAX});
    let text = json!({"type": "string"});
    let mut responses = Map::new();
    responses.insert("202".to_owned(), json!({"description": "Accepted: the consumer runs on the range in the background (the audit log records when it ends and what it did)", "content": {"application/json": {"schema": {
        "type": "object", "required": ["consumer", "aggregate", "contextName", "fromVersion", "requestedBy", "requestedAt"],
        "properties": {
            "consumer": text, "aggregate": text, "contextName": text,
            "aggregateId": {"type": ["string", "null"]}, "tenantId": {"type": ["string", "null"]},
            "fromVersion": version, "toVersion": {"type": ["integer", "null"], "minimum": 1, "maximum": i64::MAX},
            "requestedBy": text, "requestedAt": {"type": "integer"}}}}}}));
    responses.insert(
        "400".to_owned(),
        error("BadRequest: a body that is not the range (fromVersion 0, toVersion below fromVersion, a bad aggregateId), or IllegalArgument: a bad Command-Tenant-Id"),
    );
    responses.insert(
        "404".to_owned(),
        error("NotFound: no consumer of that name, no aggregate type of that name, or the service runs no consumer it can re-dispatch to"),
    );
    json!({"post": {
        "operationId": "consumer.redispatch",
        "summary": "Runs one consumer again on a range of history, in version order (recorded: who, when, what): a projection with processed-message records applies only what it never applied, a saga resends its commands under the same request ids (answered as duplicates), positions never move back",
        OPERATOR_COMMAND: true,
        "parameters": [path_param("consumer", "The consumer's name.", json!({"type": "string", "minLength": 1})), tenant_header()],
        "requestBody": {"required": true, "content": {"application/json": {"schema": {
            "type": "object", "additionalProperties": false, "required": ["aggregate", "fromVersion"],
            "properties": {
                "aggregate": {"type": "string", "minLength": 1},
                "aggregateId": id_schema(),
                "fromVersion": version, "toVersion": version}}}}},
        "responses": responses,
    }})
}

/// Wow's `RecoverableType`, as a record shows it.
pub(crate) fn recoverable_schema() -> Value {
    json!({"type": "string", "enum": ["RECOVERABLE", "UNRECOVERABLE", "UNKNOWN"]})
}

/// A record's own retry spec, as `PUT .../retry-spec` takes it and the record shows it.
pub(crate) fn retry_spec_schema() -> Value {
    json!({"type": "object", "additionalProperties": false,
        "required": ["maxAttempts", "initialBackoffMs", "maxBackoffMs"],
        "properties": {
            "maxAttempts": {"type": "integer", "minimum": 1, "maximum": u32::MAX},
            "initialBackoffMs": {"type": "integer", "minimum": 0, "maximum": u64::MAX},
            "maxBackoffMs": {"type": "integer", "minimum": 0, "maximum": u64::MAX}}})
}

/// A rebuild's progress, as `/rebuilds` answers it.
fn rebuild_progress() -> Value {
    let count = json!({"type": "integer", "minimum": 0});
    json!({"type": "object",
        "required": ["view", "generation", "version", "state", "aggregatesTotal", "aggregatesDone", "streams", "elapsedMs"],
        "properties": {
            "view": {"type": "string"}, "generation": count, "version": count,
            "state": {"type": "string", "enum": ["ANNOUNCED", "RUNNING", "SWAPPED", "FAILED"]},
            "aggregatesTotal": count, "aggregatesDone": count, "streams": count,
            "elapsedMs": count, "etaMs": {"type": ["integer", "null"], "minimum": 0},
            "error": {"type": ["string", "null"]}}})
}

/// `GET /rebuilds`: the views that can be rebuilt and each rebuild's progress.
pub(crate) fn rebuilds() -> Value {
    operator_get(
        "service.rebuilds",
        "The views that can be rebuilt beside themselves, and each rebuild this process ran or runs, with its progress and the time left (SPEC DS-6)",
        json!({"description": "The views and the rebuilds", "content": {"application/json": {"schema": {
            "type": "object", "required": ["views", "rebuilds"], "properties": {
                "views": {"type": "array", "items": {"type": "string"}},
                "rebuilds": {"type": "array", "items": rebuild_progress()}}}}}}),
    )
}

/// `POST /rebuilds/{view}`: starts a rebuild of one view beside the live one.
pub(crate) fn rebuild_start() -> Value {
    let mut responses = Map::new();
    responses.insert("202".to_owned(), json!({"description": "Started: the view's readers read its active generation until the new one has caught up, then the new one; follow it at GET /rebuilds", "content": {"application/json": {"schema": rebuild_progress()}}}));
    responses.insert(
        "404".to_owned(),
        error("NotFound: no view of that name (or the service rebuilds none)"),
    );
    responses.insert(
        "409".to_owned(),
        error("IllegalState: the view is being rebuilt already"),
    );
    json!({"post": {
        "operationId": "service.rebuild",
        "summary": "Rebuilds a view from history beside the live one, and swaps to it once it has caught up (recorded: who, when, which view)",
        OPERATOR_COMMAND: true,
        "parameters": [path_param("view", "The view's name.", json!({"type": "string", "minLength": 1}))],
        "responses": responses,
    }})
}

/// The marker of an operation of the operator's (`/metrics`, the operations page): with any
/// token configured it needs an operator token. Removed by [`complete`].
pub(super) const OPERATOR_AUTH: &str = "x-wow-operator-auth";

/// The marker of a command only an operator's bearer token sends (the built-in delete and
/// recover of an aggregate whose lifecycle is `Operator`, SPEC DM-6): with any token
/// configured it needs an operator token (never the page's cookie) and names its tenant by
/// `Command-Tenant-Id`. Removed by [`complete`](super::completion::complete).
pub(super) const OPERATOR_COMMAND: &str = "x-wow-operator-command";

/// The marker of an operation whose caller may, but need not, present a token (auth on):
/// it reads the tenant from one when given and never answers 401. Removed by [`complete`].
pub(super) const OPTIONAL_AUTH: &str = "x-wow-optional-auth";
