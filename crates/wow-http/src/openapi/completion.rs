//! What the document adds to every operation, the service's and a domain's alike: the
//! undeclared path parameters, the bearer requirement, the answers of the server itself; and
//! the links from each create to what can be done with what it made.

use serde_json::{json, Map, Value};

use super::bounds::id_schema;
use super::operations::{error, path_param, OPERATOR_AUTH, OPERATOR_COMMAND, OPTIONAL_AUTH};

/// What the document adds to every operation, its own and a domain's:
///
/// - each `{param}` of the path that is not declared (a string; `id` by the rules of an id);
/// - when auth is on: the bearer requirement, its 401 and the 403 of a token bound to an
///   owner or a space (SPEC TN-2), unless the operation says
///   `security: []` (no auth) or carries [`OPTIONAL_AUTH`] (`security: [{}, {bearer: []}]`);
///   and no `Command-Tenant-Id`, which is not read then (the token decides the tenant);
/// - on an operation of the operator's ([`OPERATOR_AUTH`]), when `operator` (any token is
///   configured): the operator token requirement (bearer, or the page's cookie), its 401, the
///   403 of a tenant's token, and the 303 of the page's sign-in; on an operator's command
///   ([`OPERATOR_COMMAND`]) the same with the bearer token only, and `Command-Tenant-Id`
///   kept (the operator names the tenant);
/// - the answers of the server itself, before any route (the `server` module): 503 past the
///   connection limit and 431 for a header above the limit (both `{errorCode, errorMsg}`),
///   hyper's bare 400 (a head it cannot parse), 414 (a target above 64 KiB) and 431 (a head
///   above its buffer); and 500, the answer to a fault in any handler;
/// - on a path with parameters, the 400 `IllegalArgument` `{errorCode, errorMsg}` of one that
///   is not UTF-8 once percent-decoded (the `rules` module), joined to the route's own 400.
pub(super) fn complete(path: &str, operation: &mut Value, auth: bool, operator: bool) {
    let Some(operation) = operation.as_object_mut() else {
        return;
    };
    let operator_command = operation.remove(OPERATOR_COMMAND).is_some();
    complete_parameters(path, operation, auth && !operator_command);
    let operators = operation.remove(OPERATOR_AUTH).is_some();
    let required = if operators || operator_command {
        if operator {
            let security = if operator_command {
                json!([{"operator": []}])
            } else {
                json!([{"operator": []}, {"operatorCookie": []}])
            };
            operation.insert("security".to_owned(), security);
        }
        false
    } else {
        complete_security(operation, auth)
    };
    let responses = operation
        .entry("responses")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(responses) = responses.as_object_mut() else {
        return;
    };
    if operators && operator {
        add_operator_answers(path, responses, true);
    }
    if operator_command && operator {
        add_operator_answers(path, responses, false);
    }
    if required {
        let mut unauthorized =
            error("Unauthorized: no bearer token, or one the service does not know");
        unauthorized["headers"]["WWW-Authenticate"] =
            json!({"description": "`Bearer`", "required": true, "schema": {"type": "string"}});
        responses.insert("401".to_owned(), unauthorized);
        // SPEC TN-2: a token bound to an owner or a space is refused another's aggregate, a
        // header naming another owner or space than its own, and the operator's routes.
        responses.entry("403").or_insert_with(|| {
            error("IllegalAccessOwnerAggregate / IllegalAccessSpaceAggregate: the token is bound to another owner or space than the aggregate's, or than the one the request names; Forbidden: a route for tokens of the whole tenant")
        });
    }
    if path_params(path).next().is_some() {
        add_not_utf8_answer(responses);
    }
    add_server_answers(responses);
    add_busy_answer(responses);
}

/// The answers of an operator's route when it is gated: 401 without an operator token, 403
/// with a tenant's; the page's 303 of a sign-in by `?token=`. `cookie`: the route takes the
/// page's cookie too (an operator's command does not).
fn add_operator_answers(path: &str, responses: &mut Map<String, Value>, cookie: bool) {
    let mut unauthorized = error(if cookie {
        "Unauthorized: no operator token (as the bearer token, or in the page's cookie `wow-operator`), or one the service does not know"
    } else {
        "Unauthorized: no operator token as the bearer token, or one the service does not know"
    });
    unauthorized["headers"]["WWW-Authenticate"] =
        json!({"description": "`Bearer`", "required": true, "schema": {"type": "string"}});
    responses.insert("401".to_owned(), unauthorized);
    responses.insert(
        "403".to_owned(),
        error("Forbidden: a tenant's token, which is not an operator token"),
    );
    if path == "/ui" {
        responses.insert("303".to_owned(), json!({
            "description": "Signed in by `?token=`: to the page (`Location: ui`), the token in the cookie `wow-operator`",
            "headers": {
                "Location": {"required": true, "schema": {"type": "string"}},
                "Set-Cookie": {"required": true, "schema": {"type": "string"}}}}));
    }
}

/// The 400 of a path parameter that is not UTF-8: its own answer, or joined to the route's.
fn add_not_utf8_answer(responses: &mut Map<String, Value>) {
    let not_utf8 =
        "IllegalArgument: a path parameter is not UTF-8 once percent-decoded (nothing recorded)";
    match responses.get_mut("400").and_then(Value::as_object_mut) {
        None => {
            responses.insert(
                "400".to_owned(),
                error(&format!("{not_utf8}; or the request head cannot be parsed (answered by the HTTP layer, without a body)")),
            );
        }
        Some(answer) => join_error(answer, not_utf8),
    }
}

/// Declares each undeclared `{param}` of the path; with auth on, drops `Command-Tenant-Id`.
fn complete_parameters(path: &str, operation: &mut Map<String, Value>, auth: bool) {
    let parameters = operation
        .entry("parameters")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Some(parameters) = parameters.as_array_mut() else {
        return;
    };
    for name in path_params(path) {
        let declared = parameters
            .iter()
            .any(|p| p["in"] == "path" && p["name"] == name);
        if !declared {
            let schema = if name == "id" {
                id_schema()
            } else {
                json!({"type": "string", "minLength": 1})
            };
            parameters.push(path_param(name, "", schema));
        }
    }
    if auth {
        parameters.retain(|p| !(p["in"] == "header" && p["name"] == "Command-Tenant-Id"));
    }
}

/// Sets the operation's `security` by the auth rules; whether a bearer token is required.
fn complete_security(operation: &mut Map<String, Value>, auth: bool) -> bool {
    let optional = operation.remove(OPTIONAL_AUTH).is_some();
    let public = operation
        .get("security")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty);
    if !auth || public {
        operation.remove("security");
    } else if optional {
        operation.insert("security".to_owned(), json!([{}, {"bearer": []}]));
    } else if !operation.contains_key("security") {
        operation.insert("security".to_owned(), json!([{"bearer": []}]));
    }
    auth && !public && !optional
}

/// The answers of the HTTP layer and of a handler's fault, where the route says none.
fn add_server_answers(responses: &mut Map<String, Value>) {
    responses.entry("400").or_insert_with(|| {
        json!({"description": "The request head cannot be parsed (answered by the HTTP layer, without a body)"})
    });
    responses.entry("414").or_insert_with(|| {
        json!({"description": "URI Too Long: a request target above 64 KiB (answered by the HTTP layer, without a body)"})
    });
    responses.entry("431").or_insert_with(|| {
        error("BadRequest: a header name or value above the server's header limit (a head above the HTTP layer's buffer, or more than 100 headers: without a body)")
    });
    responses
        .entry("500")
        .or_insert_with(|| error("InternalServerError: a fault in the service"));
}

/// The 503 of the connection limit: its own answer, or joined to the route's own 503.
fn add_busy_answer(responses: &mut Map<String, Value>) {
    let busy = "ServiceUnavailable: the server is at its connection limit (Retry-After: 1; the request was not read)";
    match responses.get_mut("503") {
        None => {
            let mut answer = error(busy);
            answer["headers"]["Retry-After"] = json!({"schema": {"type": "string"}});
            responses.insert("503".to_owned(), answer);
        }
        Some(answer) => {
            // The route's own 503, or the connection limit's `{errorCode, errorMsg}`.
            if let Some(answer) = answer.as_object_mut() {
                join_error(answer, busy);
            }
        }
    }
}

/// Joins an `{errorCode, errorMsg}` answer the server gives before the route (`other`, its
/// description) to the route's own of that status: both descriptions, either body.
fn join_error(answer: &mut Map<String, Value>, other: &str) {
    let own = answer
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    let description = format!("{own}; or {other}");
    answer.insert("description".to_owned(), Value::String(description));
    let error = json!({"$ref": "#/components/schemas/Error"});
    let content = answer.entry("content").or_insert_with(|| json!({}));
    let media = content
        .as_object_mut()
        .map(|content| {
            content
                .entry("application/json")
                .or_insert_with(|| json!({}))
        })
        .and_then(Value::as_object_mut);
    if let Some(media) = media {
        let schema = match media.remove("schema") {
            None | Some(Value::Null) => error,
            Some(schema) if schema == error || takes_error(&schema) => schema,
            Some(schema) => json!({"anyOf": [schema, error]}),
        };
        media.insert("schema".to_owned(), schema);
    }
}

/// Whether an object `schema` takes an `{errorCode, errorMsg}` body as it is: it requires no
/// other field.
fn takes_error(schema: &Value) -> bool {
    schema["type"] == "object"
        && schema.get("anyOf").is_none()
        && schema["required"].as_array().is_some_and(|required| {
            required
                .iter()
                .all(|field| field == "errorCode" || field == "errorMsg")
        })
}

/// Links from the answer of each create to what can be done with the aggregate it made: every
/// operation under `/{aggregate}/{id}/` (the domain's included) but the creates, with `id`
/// from the answer's `aggregateId`, `requestId` from its `requestId`, and the versions from
/// 1 to its `aggregateVersion`. They let a client (and schemathesis' stateful phase) follow
/// a create to the commands and reads of what it created.
pub(super) fn link_creates(paths: &mut Map<String, Value>) {
    let is_create = |operation: &Value| {
        matches!(
            operation["x-command-kind"].as_str(),
            Some("CREATE" | "ALLOW_CREATE")
        )
    };
    let targets: Vec<(String, String, Vec<String>)> = paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .into_iter()
                .flat_map(|operations| operations.values())
                .filter(|operation| !is_create(operation))
                .filter_map(|operation| {
                    let id = operation["operationId"].as_str()?.to_owned();
                    let params = path_params(path).map(str::to_owned).collect();
                    Some((path.clone(), id, params))
                })
        })
        .collect();
    for (path, item) in paths.iter_mut() {
        let Some(aggregate) = path.split('/').nth(1) else {
            continue;
        };
        let prefix = format!("/{aggregate}/{{id}}/");
        let links: Map<String, Value> = targets
            .iter()
            .filter(|(target, _, _)| target.starts_with(&prefix))
            .map(|(_, operation_id, params)| {
                let parameters: Map<String, Value> = params
                    .iter()
                    .filter_map(|name| {
                        let value = match name.as_str() {
                            "id" => json!("$response.body#/aggregateId"),
                            "requestId" => json!("$response.body#/requestId"),
                            "head" => json!(1),
                            "tail" => json!("$response.body#/aggregateVersion"),
                            _ => return None,
                        };
                        Some((name.clone(), value))
                    })
                    .collect();
                (
                    operation_id.clone(),
                    json!({"operationId": operation_id, "parameters": parameters}),
                )
            })
            .collect();
        let creates = item
            .as_object_mut()
            .into_iter()
            .flat_map(|operations| operations.values_mut())
            .filter(|operation| is_create(operation));
        for operation in creates {
            if let Some(ok) = operation
                .get_mut("responses")
                .and_then(|responses| responses.get_mut("200"))
                .and_then(Value::as_object_mut)
                .filter(|ok| !ok.contains_key("$ref"))
            {
                // A shared answer (`$ref`) takes no links of its own.
                ok.insert("links".to_owned(), Value::Object(links.clone()));
            }
        }
    }
}

/// The names in `{...}` of a path template.
fn path_params(path: &str) -> impl Iterator<Item = &str> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_params_are_read_off_the_template() {
        let names: Vec<&str> = path_params("/a/{id}/event/{head}/{tail}").collect();
        assert_eq!(names, ["id", "head", "tail"]);
    }
}
