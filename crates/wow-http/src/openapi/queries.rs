//! The paths of Wow's query routes and the state's time travel, with the query DSL's schemas
//! under Wow's component names (`wow.api.query.Condition`, ...), tagged per aggregate as Wow's
//! documents are (`context.aggregate`), with Wow's operation ids.

use serde_json::{json, Map, Value};
use wow_core::query::{Operator, MAX_LIST_LIMIT, MAX_PAGE_SIZE};

use super::operations::{error, path_param, OPERATOR_COMMAND};

/// Every operator's JSON name.
fn operators() -> Vec<String> {
    Operator::ALL.iter().map(|op| op.name()).collect()
}

/// The query DSL's shared schemas.
pub(super) fn query_schemas() -> Map<String, Value> {
    let reference = |name: &str| json!({"$ref": format!("#/components/schemas/{name}")});
    let body = |extra: (&str, Value)| {
        let mut properties = Map::new();
        properties.insert("condition".to_owned(), reference("wow.api.query.Condition"));
        properties.insert(
            "projection".to_owned(),
            reference("wow.api.query.Projection"),
        );
        properties.insert(
            "sort".to_owned(),
            json!({"type": "array", "maxItems": 8, "items": reference("wow.api.query.Sort")}),
        );
        if !extra.0.is_empty() {
            properties.insert(extra.0.to_owned(), extra.1);
        }
        json!({"type": "object", "additionalProperties": false, "properties": properties})
    };
    let mut schemas = Map::new();
    schemas.insert(
        "wow.api.query.Operator".to_owned(),
        json!({"type": "string", "enum": operators()}),
    );
    schemas.insert(
        "wow.api.query.Condition".to_owned(),
        super::wow_client::condition_schema(),
    );
    schemas.insert(
        "wow.api.query.Projection".to_owned(),
        json!({
        "type": "object", "additionalProperties": false,
        "properties": {"include": {"type": "array", "items": {"type": "string"}},
                       "exclude": {"type": "array", "items": {"type": "string"}}}}),
    );
    schemas.insert("wow.api.query.Sort".to_owned(), json!({
        "type": "object", "additionalProperties": false, "required": ["field", "direction"],
        "properties": {"field": {"type": "string"}, "direction": {"type": "string", "enum": ["ASC", "DESC"]}}}));
    schemas.insert("wow.api.query.Pagination".to_owned(), json!({
        "type": "object", "additionalProperties": false,
        "properties": {"index": {"type": "integer", "minimum": 1, "default": 1},
                       "size": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": 10}}}));
    schemas.insert(
        "wow.api.query.SingleQuery".to_owned(),
        body(("", Value::Null)),
    );
    schemas.insert(
        "wow.api.query.ListQuery".to_owned(),
        body((
            "limit",
            json!({"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT, "default": 10}),
        )),
    );
    schemas.insert(
        "wow.api.query.PagedQuery".to_owned(),
        body(("pagination", reference("wow.api.query.Pagination"))),
    );
    // No field is required: a projection may leave any out.
    schemas.insert("wow.api.query.MaterializedSnapshot".to_owned(), json!({
        "type": "object",
        "properties": {
            "contextName": {"type": "string"}, "aggregateName": {"type": "string"},
            "tenantId": {"type": "string"}, "ownerId": {"type": "string"}, "spaceId": {"type": "string"},
            "aggregateId": {"type": "string"}, "version": {"type": "integer"}, "eventId": {"type": "string"},
            "firstOperator": {"type": "string"}, "operator": {"type": "string"},
            "firstEventTime": {"type": "integer"}, "eventTime": {"type": "integer"},
            "snapshotTime": {"type": "integer"}, "tags": {"type": "object"}, "deleted": {"type": "boolean"},
            "state": {}}}));
    schemas
}

fn json_body(schema: &str) -> Value {
    json!({"required": false, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

/// A list's answer: JSON, or with `Accept: text/event-stream` one event per item.
fn ok_list(description: &str, schema: Value) -> Value {
    let mut answer = ok(description, schema);
    answer["content"]["text/event-stream"] = json!({"schema": {"type": "string",
        "description": "With `Accept: text/event-stream`: one event per item, in order, its `data` the item as JSON (Wow's listStream)"}});
    answer
}

fn ok(description: &str, schema: Value) -> Value {
    json!({"description": description, "headers": {"Wow-Error-Code": {"description": "`Ok`", "schema": {"type": "string"}}},
        "content": {"application/json": {"schema": schema}}})
}

fn query_operation(
    tag: &str,
    operation_id: String,
    summary: &str,
    body: Value,
    answer: Value,
    single: bool,
) -> Value {
    let mut responses = Map::new();
    responses.insert("200".to_owned(), answer);
    responses.insert(
        "400".to_owned(),
        error("IllegalArgument: a condition, field, option, limit or page the query cannot run, or a limit on its size it is past (named: 64 conditions, 16 levels deep, 1,000 values in a list, 4,000 in all, 64 projection paths per list); BadRequest: the body is not a query"),
    );
    responses.insert(
        "429".to_owned(),
        error("TooManyRequests: the tenant's or the client address's share of heavy reads, or the tenant's share of the query connections, stayed full for the whole wait (Retry-After)"),
    );
    responses.insert(
        "404".to_owned(),
        error(if single {
            "NotFound: no document matches, the aggregate type is unknown, or the service keeps no materialized snapshots"
        } else {
            "NotFound: the aggregate type is unknown, or (snapshots) the service keeps no materialized snapshots"
        }),
    );
    responses.insert(
        "408".to_owned(),
        error("BadRequest: the body did not arrive within the body read timeout"),
    );
    responses.insert(
        "413".to_owned(),
        error("BadRequest: the body is longer than the body limit"),
    );
    responses.insert(
        "503".to_owned(),
        error("ServiceUnavailable: the store cannot be read; QueryTimeout: the query ran past the store's time budget or the read budget and was stopped"),
    );
    responses.insert(
        "500".to_owned(),
        error("InternalServerError: the store failed (what it said is in the server's log, never in the answer)"),
    );
    json!({"post": {
        "operationId": operation_id,
        "tags": [tag],
        "summary": summary,
        "parameters": [{"name": "Command-Tenant-Id", "in": "header", "required": false,
            "description": "The tenant whose documents are queried (not read when bearer auth is on)",
            "schema": super::bounds::tenant_schema()}],
        "requestBody": body,
        "responses": responses,
    }})
}

/// A query over the materialized snapshots takes the freshness headers (SPEC DS-6).
fn fresh_snapshots(operation: &mut Value) {
    if let Some(parameters) = operation["parameters"].as_array_mut() {
        parameters.extend(crate::fresh::openapi_parameters(Some(
            "the id of one of this type's aggregates",
        )));
    }
    operation["responses"]["408"] = error("BadRequest: the body did not arrive within the body read timeout; ViewNotFresh: the snapshot of the aggregate Wow-Fresh-Aggregate names did not include what the freshness headers ask for within their wait (the body adds version, wanted, lag)");
    operation["responses"]["400"]["description"] = json!("IllegalArgument: a condition, field, option, limit or page the query cannot run, or a limit on its size it is past (named: 64 conditions, 16 levels deep, 1,000 values in a list, 4,000 in all, 64 projection paths per list); BadRequest: the body is not a query, a freshness header does not parse, or Wow-Fresh-Aggregate is missing");
}

/// One query route: its path under the aggregate, the tail of its operation id, its summary,
/// body and answer, and whether it answers 404 when nothing matches.
type QueryRoute = (&'static str, &'static str, &'static str, Value, Value, bool);

/// The schemas of one aggregate's query answers.
struct Answers {
    /// A materialized snapshot.
    doc: Value,
    /// The aggregate's state (Wow's client generator types it from this, see wow_client).
    state: Value,
    /// A DomainEventStream with the fields the projection keeps: none is required.
    stream: Value,
    /// The body of a snapshot count: the aggregate's own condition.
    count_body: Value,
}

impl Answers {
    /// The answers of `aggregate` of `context`.
    fn of(context: &str, aggregate: &str) -> Self {
        let keys = super::wow_client::AggregateKeys::new(context, aggregate);
        Self {
            doc: json!({"$ref": "#/components/schemas/wow.api.query.MaterializedSnapshot"}),
            state: super::wow_client::schema_ref(&keys.state()),
            stream: super::wow_client::schema_ref(&keys.stream()),
            count_body: json!({"$ref": format!("#/components/requestBodies/{}", keys.count_query())}),
        }
    }
}

/// An array of `items`.
fn array(items: &Value) -> Value {
    json!({"type": "array", "items": items})
}

/// A page of `items`: `{total, list}`.
fn paged(items: &Value) -> Value {
    json!({"type": "object", "required": ["total", "list"],
    "properties": {"total": {"type": "integer", "minimum": 0}, "list": {"type": "array", "items": items}}})
}

/// The answer of a count: a bare number.
fn count() -> Value {
    ok("How many match", json!({"type": "integer", "minimum": 0}))
}

/// The query paths of `aggregate` of `context`: snapshots and event streams.
pub(super) fn query_paths(context: &str, aggregate: &str, paths: &mut Map<String, Value>) {
    let tag = format!("{context}.{aggregate}");
    let answers = Answers::of(context, aggregate);
    let routes = snapshot_routes(&answers)
        .into_iter()
        .chain(event_routes(&answers));
    for (path, operation, summary, body, answer, single) in routes {
        let mut item = query_operation(
            &tag,
            format!("{tag}.{operation}"),
            summary,
            body,
            answer,
            single,
        );
        if path.starts_with("snapshot/") {
            fresh_snapshots(&mut item["post"]);
        }
        paths.insert(format!("/{aggregate}/{path}"), item);
    }
}

/// `GET /{aggregate}/{id}/snapshot` and the operator's regeneration of materialized
/// snapshots: `PUT /{aggregate}/{id}/snapshot` and `PUT /{aggregate}/snapshot/{afterId}/{limit}`.
pub(super) fn snapshot_paths(context: &str, aggregate: &str, paths: &mut Map<String, Value>) {
    let tag = format!("{context}.{aggregate}");
    let doc = Answers::of(context, aggregate).doc;
    let tenant = json!({"name": "Command-Tenant-Id", "in": "header", "required": false,
        "description": "The tenant", "schema": super::bounds::tenant_schema()});
    let mut load = Map::new();
    load.insert("200".to_owned(), json!({
        "description": "The aggregate's materialized snapshot as its projection last wrote it (wait for PROJECTED to read a command's own change); its version in ETag",
        "headers": {"ETag": {"description": "The snapshot's version, quoted", "schema": {"type": "string"}}},
        "content": {"application/json": {"schema": doc.clone()}},
    }));
    load.insert(
        "400".to_owned(),
        error("IllegalArgument: Command-Tenant-Id breaks the rules of an id"),
    );
    load.insert(
        "404".to_owned(),
        error("NotFound: no snapshot of that aggregate (or snapshot queries are off)"),
    );
    let mut one = Map::new();
    one.insert("200".to_owned(), ok("The regenerated document", doc));
    one.insert(
        "400".to_owned(),
        error("IllegalArgument: the id or Command-Tenant-Id breaks the rules of an id"),
    );
    one.insert(
        "404".to_owned(),
        error("NotFound: no aggregate of that id (or snapshot queries are off)"),
    );
    paths.insert(format!("/{aggregate}/{{id}}/snapshot"), json!({
        "get": {
            "operationId": format!("{tag}.snapshot"),
            "tags": [tag],
            "summary": "The aggregate's materialized snapshot, in Wow's shape",
            "parameters": [tenant.clone()],
            "responses": load,
        },
        "put": {
            "operationId": format!("{tag}.snapshot.regenerate"),
            "tags": [tag],
            "summary": "Regenerates the aggregate's materialized snapshot from its history (an operator's action, recorded: who, when, which aggregate)",
            OPERATOR_COMMAND: true,
            "parameters": [tenant.clone()],
            "responses": one,
        },
    }));
    let mut batch = Map::new();
    batch.insert("200".to_owned(), ok("How many were regenerated, and the cursor of the next batch", json!({
        "type": "object",
        "required": ["afterId", "size"],
        "properties": {"afterId": {"type": "string"}, "size": {"type": "integer", "minimum": 0}},
    })));
    batch.insert("400".to_owned(), error("IllegalArgument: the limit is not from 1 to 1000, or afterId or Command-Tenant-Id breaks the rules of an id"));
    batch.insert(
        "404".to_owned(),
        error("NotFound: snapshot queries are off"),
    );
    paths.insert(format!("/{aggregate}/snapshot/{{afterId}}/{{limit}}"), json!({"put": {
        "operationId": format!("{tag}.snapshot.regenerate_batch"),
        "tags": [tag],
        "summary": "Regenerates the materialized snapshots of up to `limit` aggregates after `afterId` (`(0)`: from the first), in the tenant's id order (an operator's action, recorded)",
        OPERATOR_COMMAND: true,
        "parameters": [
            path_param("afterId", "The last id of the previous batch, or (0) for the first", super::bounds::tenant_schema()),
            path_param("limit", "How many (1 to 1000)", json!({"type": "integer", "minimum": 1, "maximum": 1000})),
            tenant,
        ],
        "responses": batch,
    }}));
}

/// The routes over the materialized snapshots.
fn snapshot_routes(answers: &Answers) -> [QueryRoute; 7] {
    let Answers { doc, state, .. } = answers;
    [
        (
            "snapshot/count",
            "snapshot.count",
            "Count the aggregates whose latest state matches",
            answers.count_body.clone(),
            count(),
            false,
        ),
        (
            "snapshot/single",
            "snapshot.single",
            "The first matching materialized snapshot",
            json_body("wow.api.query.SingleQuery"),
            ok("The document", doc.clone()),
            true,
        ),
        (
            "snapshot/single/state",
            "snapshot_state.single",
            "The state of the first match",
            json_body("wow.api.query.SingleQuery"),
            ok("The state", state.clone()),
            true,
        ),
        (
            "snapshot/list",
            "snapshot.list_query",
            "Matching materialized snapshots",
            json_body("wow.api.query.ListQuery"),
            ok_list("The documents", array(doc)),
            false,
        ),
        (
            "snapshot/list/state",
            "snapshot_state.list_query",
            "The states of the matches",
            json_body("wow.api.query.ListQuery"),
            ok_list("The states", array(state)),
            false,
        ),
        (
            "snapshot/paged",
            "snapshot.paged_query",
            "A page of matching materialized snapshots",
            json_body("wow.api.query.PagedQuery"),
            ok("The page", paged(doc)),
            false,
        ),
        (
            "snapshot/paged/state",
            "snapshot_state.paged_query",
            "A page of the matches' states",
            json_body("wow.api.query.PagedQuery"),
            ok("The page", paged(state)),
            false,
        ),
    ]
}

/// The routes over history: event streams.
fn event_routes(answers: &Answers) -> [QueryRoute; 3] {
    let stream = &answers.stream;
    [
        (
            "event/count",
            "event.count",
            "Count the matching event streams",
            json_body("wow.api.query.Condition"),
            count(),
            false,
        ),
        (
            "event/list",
            "event.list_query",
            "Matching event streams",
            json_body("wow.api.query.ListQuery"),
            ok_list("The streams", array(stream)),
            false,
        ),
        (
            "event/paged",
            "event.paged_query",
            "A page of matching event streams",
            json_body("wow.api.query.PagedQuery"),
            ok("The page", paged(stream)),
            false,
        ),
    ]
}

/// `GET /{aggregate}/{id}/state/{version}` and `/state/time/{time}`.
pub(super) fn time_travel_paths(
    aggregate: &str,
    paths: &mut Map<String, Value>,
    state_answer: &Value,
) {
    let mut responses = Map::new();
    responses.insert("200".to_owned(), state_answer.clone());
    responses.insert("400".to_owned(), error("IllegalArgument: the version or time is not a whole number, or Command-Tenant-Id breaks the rules of an id"));
    responses.insert(
        "404".to_owned(),
        error("NotFound: the aggregate did not exist then, or has no such version"),
    );
    super::operations::heavy_read_errors(&mut responses);
    let tenant = json!({"name": "Command-Tenant-Id", "in": "header", "required": false,
        "description": "The tenant (not read when bearer auth is on)", "schema": super::bounds::tenant_schema()});
    paths.insert(format!("/{aggregate}/{{id}}/state/{{version}}"), json!({"get": {
        "operationId": format!("{aggregate}.state_at_version"),
        "summary": "The state at a version (from 1), that version in ETag",
        "parameters": [path_param("version", "The version", json!({"type": "integer", "minimum": 1, "maximum": u64::MAX})), tenant.clone()],
        "responses": responses.clone(),
    }}));
    paths.insert(format!("/{aggregate}/{{id}}/state/time/{{time}}"), json!({"get": {
        "operationId": format!("{aggregate}.state_at_time"),
        "summary": "The state as of a time (milliseconds since the Unix epoch): every stream made then or before; its version in ETag",
        "parameters": [path_param("time", "Milliseconds since the Unix epoch", json!({"type": "integer", "minimum": 0, "maximum": i64::MAX})), tenant],
        "responses": responses,
    }}));
}
