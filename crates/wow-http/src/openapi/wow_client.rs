//! The shapes Wow's client generator reads (the `fetcher-generator` of Wow's TypeScript
//! client), so that a team can generate its typed clients from `/openapi.json` as it does
//! from Wow's document.
//!
//! The generator finds an aggregate by a top-level tag `context.aggregate`; in the operations
//! tagged with it, a command by an operation id of three parts (`context.aggregate.command`)
//! whose `200` is the shared response `wow.CommandOk` and whose body is a component schema;
//! the state by the `200` schema of `*.snapshot_state.single`; the events by the items of
//! `*.event.list_query` (a stream whose `body.items.anyOf` names each event by a `const`);
//! and the fields a condition names by the `field` of the condition that `*.snapshot.count`
//! takes, as a shared request body. This module makes those components, keyed
//! `context.aggregate.Name` as Wow keys them.

use serde_json::{json, Map, Value};
use wow_core::aggregate::{AggregateRuntime, AGGREGATE_DELETED, AGGREGATE_RECOVERED};
use wow_core::command::CommandKind;

/// The shared answer of every command operation.
pub(super) const COMMAND_OK: &str = "wow.CommandOk";
/// The component name of a command's result.
pub(super) const COMMAND_RESULT: &str = "wow.command.CommandResult";

/// `snake_case` as `PascalCase` (`receive_transfer` → `ReceiveTransfer`).
pub(super) fn pascal(name: &str) -> String {
    name.split(['_', '-'])
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// The component keys of one aggregate.
#[derive(Debug, Clone)]
pub(super) struct AggregateKeys {
    prefix: String,
    pascal: String,
}

impl AggregateKeys {
    pub(super) fn new(context: &str, aggregate: &str) -> Self {
        Self {
            prefix: format!("{context}.{aggregate}"),
            pascal: pascal(aggregate),
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{}.{name}", self.prefix)
    }

    /// The schema of the command `command`'s payload.
    pub(super) fn command(&self, command: &str) -> String {
        self.key(&pascal(command))
    }

    /// The schema of the aggregate's state.
    pub(super) fn state(&self) -> String {
        self.key(&format!("{}State", self.pascal))
    }

    /// The schema of one of the aggregate's event streams, its events named.
    pub(super) fn stream(&self) -> String {
        self.key(&format!("{}AggregatedDomainEventStream", self.pascal))
    }

    fn condition(&self) -> String {
        self.key(&format!("{}AggregatedCondition", self.pascal))
    }

    fn fields(&self) -> String {
        self.key(&format!("{}AggregatedFields", self.pascal))
    }

    fn event(&self, event: &str) -> String {
        self.key(event)
    }

    /// The request body of the count query (a bare condition on the aggregate's fields).
    pub(super) fn count_query(&self) -> String {
        self.key("CountQuery")
    }
}

/// `{"$ref": "#/components/schemas/{key}"}`.
pub(super) fn schema_ref(key: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{key}")})
}

/// Removes every `required` list from `schema`, nested schemas included.
fn drop_required(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if object.get("required").is_some_and(Value::is_array) {
                object.remove("required");
            }
            object.values_mut().for_each(drop_required);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_required),
        _ => {}
    }
}

/// The components of one aggregate: the schemas and the request bodies.
pub(super) fn aggregate_components(
    runtime: &dyn AggregateRuntime,
    schemas: &mut Map<String, Value>,
    request_bodies: &mut Map<String, Value>,
) {
    let named = runtime.named_aggregate();
    let keys = AggregateKeys::new(&named.context_name, &named.aggregate_name);
    if runtime
        .commands()
        .iter()
        .all(|c| c.kind == CommandKind::Void)
    {
        // No aggregate to read, no history: only the commands' payloads.
        command_schemas(runtime, &keys, schemas);
        return;
    }
    command_schemas(runtime, &keys, schemas);
    let mut state = runtime.state_schema();
    if let Some(state) = state.as_object_mut() {
        state.remove("$schema");
    }
    // The state as the query routes answer it, and a projection may leave any field out
    // (`snapshot/single/state` with `projection.include`): no field is required, at any depth.
    drop_required(&mut state);
    let fields = field_names(&state);
    schemas.insert(keys.state(), state);
    schemas.insert(
        keys.fields(),
        json!({
            "type": "string",
            "description": format!("A field of the materialized snapshot (any path; those the state declares: {})", fields.join(", ")),
            "examples": fields,
        }),
    );
    let mut condition = condition_schema();
    condition["properties"]["field"] = schema_ref(&keys.fields());
    condition["properties"]["children"]["items"] = schema_ref(&keys.condition());
    schemas.insert(keys.condition(), condition);
    request_bodies.insert(
        keys.count_query(),
        json!({"required": false, "content": {"application/json": {"schema": schema_ref(&keys.condition())}}}),
    );
    let mut events = Vec::new();
    // Every aggregate's own events, then the soft delete's, whose schemas carry the
    // aggregate's name (several aggregates of one context export theirs side by side).
    let own = runtime
        .events()
        .iter()
        .map(|event| (*event, keys.event(event)));
    let built_in = [AGGREGATE_DELETED, AGGREGATE_RECOVERED]
        .map(|event| (event, keys.event(&format!("{}{event}", keys.pascal))));
    for (event, key) in own.chain(built_in) {
        schemas.insert(
            key.clone(),
            json!({"title": event, "type": ["object", "null"]}),
        );
        events.push(json!({
            "title": event,
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "name": {"type": "string", "const": event},
                "revision": {"type": "string"},
                "bodyType": {"type": "string"},
                "body": schema_ref(&key),
                "storedName": {"type": "string"},
                "storedRevision": {"type": "string"},
            },
        }));
    }
    // A projection may leave any field out: nothing is required.
    let mut stream = super::stream_schema();
    if let Some(stream) = stream.as_object_mut() {
        stream.remove("required");
    }
    stream["title"] = json!(format!("{} event stream", named.aggregate_name));
    stream["properties"]["body"]["items"] = json!({"anyOf": events});
    schemas.insert(keys.stream(), stream);
}

/// The payload schema of each command a caller can send.
fn command_schemas(
    runtime: &dyn AggregateRuntime,
    keys: &AggregateKeys,
    schemas: &mut Map<String, Value>,
) {
    for command in runtime.commands().iter().filter(|c| !c.internal) {
        let mut schema = (command.schema)();
        if let Some(schema) = schema.as_object_mut() {
            schema.remove("$schema");
            schema
                .entry("title")
                .or_insert_with(|| Value::String(pascal(command.name)));
        }
        schemas.insert(keys.command(command.name), schema);
    }
}

/// The document's fields and the state's, as paths a condition names: the snapshot's own
/// fields, `state`, and `state.…` for each property the state schema declares (nested
/// objects too, three levels at most).
fn field_names(state: &Value) -> Vec<String> {
    let mut fields: Vec<String> = [
        "aggregateId",
        "tenantId",
        "ownerId",
        "spaceId",
        "version",
        "eventId",
        "firstOperator",
        "operator",
        "firstEventTime",
        "eventTime",
        "tags",
        "deleted",
        "state",
    ]
    .map(str::to_owned)
    .to_vec();
    fn walk(schema: &Value, path: &str, depth: usize, fields: &mut Vec<String>) {
        let Some(properties) = schema["properties"].as_object() else {
            return;
        };
        for (name, property) in properties {
            let field = format!("{path}.{name}");
            fields.push(field.clone());
            if depth < 3 {
                walk(property, &field, depth + 1, fields);
            }
        }
    }
    walk(state, "state", 1, &mut fields);
    fields
}

/// A condition of the query DSL, its children conditions again.
pub(super) fn condition_schema() -> Value {
    json!({
        "type": "object", "additionalProperties": false,
        "description": "A condition of Wow's query DSL; every part is optional (an empty condition is ALL). docs/coming-from-wow.md gives each operator's value and semantics.",
        "properties": {
            "field": {"type": "string", "description": "A field path (`state.balance`)"},
            "operator": {"$ref": "#/components/schemas/wow.api.query.Operator"},
            "value": {"description": "By operator: a scalar, an array, a number of days, ACTIVE/DELETED/ALL"},
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/wow.api.query.Condition"}},
            "options": {"type": "object", "description": "`ignoreCase` (text operators), `zoneId` (date operators)"}}})
}

/// The shared answer of a command: the result, as JSON or (SSE) one event per stage.
pub(super) fn command_ok() -> Value {
    json!({
        "description": "The result at the awaited stage (SENT for a void command)",
        "headers": {"Wow-Error-Code": {"description": "The answer's error code (`Ok` on success), as in the body", "required": true, "schema": {"type": "string"}}},
        "content": {
            "application/json": {"schema": schema_ref(COMMAND_RESULT)},
            "text/event-stream": {"schema": {"type": "string", "description": "With `Accept: text/event-stream`: one event per stage, `id` the result's id, `event` the stage, `data` the CommandResult as JSON"}},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_pascal_case_as_wow_keys_them() {
        assert_eq!(pascal("receive_transfer"), "ReceiveTransfer");
        assert_eq!(pascal("open"), "Open");
        let keys = AggregateKeys::new("bank", "account");
        assert_eq!(keys.command("deposit"), "bank.account.Deposit");
        assert_eq!(keys.state(), "bank.account.AccountState");
        assert_eq!(
            keys.stream(),
            "bank.account.AccountAggregatedDomainEventStream"
        );
    }

    #[test]
    fn fields_are_the_documents_and_the_states_paths() {
        let state = json!({"properties": {"balance": {"type": "integer"},
            "owner": {"type": "object", "properties": {"name": {"type": "string"}}}}});
        let fields = field_names(&state);
        for field in ["aggregateId", "state", "state.balance", "state.owner.name"] {
            assert!(fields.contains(&field.to_owned()), "{field}: {fields:?}");
        }
    }
}
