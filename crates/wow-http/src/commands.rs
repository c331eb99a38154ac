//! The command routes: `POST /{aggregate}/{id}/{command}` and `POST /{aggregate}/{command}`.

use std::convert::Infallible;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;
use wow_core::aggregate::{
    is_lifecycle_command, UnknownAggregate, DELETE_AGGREGATE, RECOVER_AGGREGATE,
};
use wow_core::command::{headers, CommandInfo, CommandKind, WaitPlan};
use wow_core::{id, AggregateId, CommandMessage, CommandStage, ErrorCode};

use crate::auth::NoTenant;
use crate::create_id::derived_aggregate_id;
use crate::input::{self, CommandOptions, InputError};
use crate::status::respond;
use crate::{auth, HttpState};

/// `POST /{aggregate}/{id}/{command}`.
async fn send(
    state: HttpState,
    aggregate: String,
    id: String,
    command: String,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if is_lifecycle_command(&command) {
        // The built-ins answer DELETE and PUT only.
        return crate::fallback::error_response(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("aggregate `{aggregate}` has no command `{command}`"),
        );
    }
    handle(state, aggregate, Some(id), command, headers, body).await
}

/// `DELETE /{aggregate}/{id}`: Wow's soft delete. The aggregate keeps its history and refuses
/// every command but `recover` (410 `IllegalAccessDeletedAggregate`).
async fn delete(
    state: HttpState,
    aggregate: String,
    id: String,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let command = DELETE_AGGREGATE.to_owned();
    handle(state, aggregate, Some(id), command, headers, body).await
}

/// `PUT /{aggregate}/{id}/recover`: undoes a soft delete; an aggregate that is not deleted
/// refuses it (`IllegalState`).
async fn recover(
    state: HttpState,
    aggregate: String,
    id: String,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let command = RECOVER_AGGREGATE.to_owned();
    handle(state, aggregate, Some(id), command, headers, body).await
}

/// 404 for a path of no aggregate, whatever the method (as the router's fallback answers).
fn unknown_route(method: &Method, path: &str) -> Response {
    crate::fallback::error_response(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("no route answers {method} {path}"),
    )
}

/// 405, listing in `Allow` what the path answers.
fn not_allowed(method: &Method, path: &str, allow: &'static str) -> Response {
    let mut response = crate::fallback::error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("{path} does not answer {method}"),
    );
    response.headers_mut().insert(
        axum::http::header::ALLOW,
        axum::http::HeaderValue::from_static(allow),
    );
    response
}

/// `/{aggregate}/{segment}`: `POST` a create named `segment`, or `DELETE` the aggregate whose
/// id is `segment` (Wow's soft delete). A path answers the methods the document lists for it.
pub(crate) async fn two_segments(
    State(state): State<HttpState>,
    Path((aggregate, segment)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let is_create = state.registry().get(&aggregate).is_some_and(|runtime| {
        runtime.commands().iter().any(|c| {
            c.name == segment
                && !c.internal
                && matches!(c.kind, CommandKind::Create | CommandKind::AllowCreate)
        })
    });
    let path = format!("/{aggregate}/{segment}");
    let known = state.registry().get(&aggregate).is_some();
    match method {
        Method::POST => create(state, aggregate, segment, headers, body).await,
        Method::DELETE => delete(state, aggregate, segment, headers, body).await,
        _ if !known => unknown_route(&method, &path),
        _ if is_create => not_allowed(&method, &path, "POST"),
        _ => not_allowed(&method, &path, "DELETE"),
    }
}

/// `/{aggregate}/{id}/{segment}`: `POST` the command `segment`, or `PUT` Wow's recover when
/// `segment` is `recover`.
pub(crate) async fn three_segments(
    State(state): State<HttpState>,
    Path((aggregate, id, segment)): Path<(String, String, String)>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let path = format!("/{aggregate}/{id}/{segment}");
    let known = state.registry().get(&aggregate).is_some();
    match method {
        Method::POST => send(state, aggregate, id, segment, headers, body).await,
        _ if !known => unknown_route(&method, &path),
        Method::PUT if segment == "recover" => recover(state, aggregate, id, headers, body).await,
        _ if segment == "recover" => not_allowed(&method, &path, "PUT"),
        _ => not_allowed(&method, &path, "POST"),
    }
}

/// `POST /{aggregate}/{command}`: a create whose id comes from `Command-Aggregate-Id`; or,
/// absent that, derived from the tenant, the aggregate name and `Command-Request-Id` (so a
/// resend reaches the same aggregate and is answered as a duplicate, never opens a second
/// one); or, with neither header, made by the server.
async fn create(
    state: HttpState,
    aggregate: String,
    command: String,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let named = headers
        .get(headers::AGGREGATE_ID)
        .map(|v| v.to_str().map(str::to_owned).unwrap_or_default());
    if is_lifecycle_command(&command) {
        return crate::fallback::error_response(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("aggregate `{aggregate}` has no command `{command}`"),
        );
    }
    handle(state, aggregate, named, command, headers, body).await
}

/// The id of a create that names none: derived from the intent when the request carries a
/// valid request id, else a fresh one.
fn unnamed_id(headers: &HeaderMap, tenant: &str, aggregate: &str) -> String {
    let request_id = headers
        .get(headers::REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|id| input::check_id(headers::REQUEST_ID, id, false).is_ok());
    match request_id {
        // SPEC ES-4: the resend of a create must meet its first attempt in one aggregate.
        Some(request_id) => derived_aggregate_id(tenant, aggregate, request_id),
        None => id::new_id(),
    }
}

/// A command's whole route: who sends it, to which aggregate, with which options and body;
/// then either its result or, when asked, its stream of stages.
async fn handle(
    state: HttpState,
    aggregate: String,
    id: Option<String>,
    command: String,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let caller = match auth::caller(state.config(), &headers) {
        Ok(caller) => caller,
        Err(auth::Refused::Tenant(refused)) => {
            return refuse_tenant(refused, &headers, &aggregate, id.as_deref())
        }
        Err(auth::Refused::Access(refused)) => {
            let named = AggregateId::new("", aggregate, id.unwrap_or_default(), "");
            return refuse_access(refused, &named, &headers);
        }
    };
    let tenant = caller.tenant.clone();
    let id = id.unwrap_or_else(|| unnamed_id(&headers, &tenant, &aggregate));
    let Some(runtime) = state.registry().get(&aggregate) else {
        return unknown_aggregate(aggregate, id, tenant);
    };
    let aggregate_id = runtime.named_aggregate().aggregate_id(id.clone(), tenant);
    let prepared = input::options(&headers, state.config()).and_then(|options| {
        input::check_id("aggregateId", &id, true)?;
        Ok((
            options,
            find_command(runtime.commands(), &aggregate, &command)?,
        ))
    });
    let (mut options, info) = match prepared {
        Ok(prepared) => prepared,
        Err(error) => return respond(error.result(&aggregate_id, request_id_header(&headers))),
    };
    // SPEC TN-2: checked before anything is sent, so nothing is recorded for a refused caller.
    match crate::access::permitted(&state, &caller, &aggregate_id).await {
        Ok(()) => {}
        Err(crate::access::Denied::Refused(refused)) => {
            return refuse_access(refused, &aggregate_id, &headers)
        }
        Err(denied) => return denied.response(),
    }
    // The token's owner and space win over the headers (which may only repeat them).
    options.owner_id = caller.owner.or(options.owner_id);
    options.space_id = caller.space.or(options.space_id);
    let value = match input::body(body, state.config().body_limit).await {
        Ok(value) => value,
        Err(error) => return respond(error.result(&aggregate_id, options.request_id.as_deref())),
    };
    let stream = options.stream && info.kind != CommandKind::Void;
    let (message, plan) = message_and_plan(aggregate_id, info, options, value);
    if stream {
        return stream_stages(state, message, plan, started);
    }
    let result = match state.gateway().send_and_wait(message, plan).await {
        Ok(result) => result,
        Err(error) => error.result().clone(),
    };
    state.metrics().observe(&result, started.elapsed());
    respond(result)
}

/// The raw `Command-Request-Id` header, as the caller sent it.
fn request_id_header(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(headers::REQUEST_ID)
        .and_then(|v| v.to_str().ok())
}

/// The answer to a request whose tenant is refused: unauthorized, or a tenant id that
/// breaks the rules.
fn refuse_tenant(
    refused: NoTenant,
    headers: &HeaderMap,
    aggregate: &str,
    id: Option<&str>,
) -> Response {
    match refused {
        // A command's error carries its ids (SPEC ID-4); the tenant it named is not one.
        NoTenant::Invalid(rule) => {
            let named = AggregateId::new("", aggregate, id.unwrap_or_default(), "");
            let error = InputError::bad(ErrorCode::IllegalArgument, headers::TENANT_ID, rule);
            respond(error.result(&named, request_id_header(headers)))
        }
        unauthorized => unauthorized.response(),
    }
}

/// The answer to a command of a caller bound to another owner or space than the aggregate's
/// (SPEC TN-2): 403 with the code and the caller's own ids, nothing of the aggregate's.
fn refuse_access(
    refused: wow_core::aggregate::AccessRefused,
    named: &AggregateId,
    headers: &HeaderMap,
) -> Response {
    let error = InputError {
        code: refused.code,
        message: refused.message,
        binding_errors: Vec::new(),
    };
    respond(error.result(named, request_id_header(headers)))
}

/// The answer to a command for an aggregate this service does not have.
fn unknown_aggregate(aggregate: String, id: String, tenant: String) -> Response {
    let message = UnknownAggregate(aggregate.clone()).to_string();
    let unknown = AggregateId::new("", aggregate, id, tenant);
    let error = InputError {
        code: ErrorCode::NotFound,
        message,
        binding_errors: Vec::new(),
    };
    respond(error.result(&unknown, None))
}

/// The command a caller may send by this name.
fn find_command(
    commands: &[CommandInfo],
    aggregate: &str,
    command: &str,
) -> Result<CommandInfo, InputError> {
    // The built-in soft delete and recover: routed by DELETE and PUT only (their names are
    // no aggregate's commands).
    let builtin = |name: &'static str| CommandInfo {
        name,
        kind: CommandKind::Normal,
        internal: false,
        schema: || serde_json::json!({"type": "object"}),
    };
    if command == DELETE_AGGREGATE {
        return Ok(builtin(DELETE_AGGREGATE));
    }
    if command == RECOVER_AGGREGATE {
        return Ok(builtin(RECOVER_AGGREGATE));
    }
    commands
        .iter()
        // An internal command is sent by sagas only: to a caller it does not exist.
        .find(|c| c.name == command && !c.internal)
        .copied()
        .ok_or_else(|| InputError {
            code: ErrorCode::NotFound,
            message: format!("aggregate `{aggregate}` has no command `{command}`"),
            binding_errors: Vec::new(),
        })
}

/// The message to send and how long and for which stage to wait.
fn message_and_plan(
    aggregate_id: AggregateId,
    info: CommandInfo,
    options: CommandOptions,
    value: Value,
) -> (CommandMessage<Value>, WaitPlan) {
    let mut message = CommandMessage::new(aggregate_id, info.name, info.kind, value);
    if let Some(request_id) = options.request_id {
        message.request_id = request_id;
    }
    message.aggregate_version = options.expected_version;
    for (header, value) in [
        (wow_core::command::OWNER_ID_HEADER, options.owner_id),
        (wow_core::command::SPACE_ID_HEADER, options.space_id),
    ] {
        if let Some(value) = value {
            message.header.insert(header.to_owned(), value);
        }
    }
    // A void command can be awaited only up to SENT (SPEC RQ-12), so that is its default; an
    // explicit later stage is still refused by the gateway.
    // A chained wait starts at SAGA_HANDLED; another stage named with a tail is refused.
    let stage = options.stage.unwrap_or(if info.kind == CommandKind::Void {
        CommandStage::Sent
    } else if options.wait_tail.is_some() {
        CommandStage::SagaHandled
    } else {
        CommandStage::Processed
    });
    let plan = WaitPlan::new(stage).with_timeout(options.timeout);
    let plan = match options.wait_function {
        Some(function) => plan.for_wait_function(function),
        None => plan,
    };
    let plan = match options.wait_tail {
        Some(tail) => plan.with_tail(tail),
        None => plan,
    };
    (message, plan)
}

/// Sends the command and answers with one server-sent event per stage (DESIGN.md §5).
fn stream_stages(
    state: HttpState,
    message: CommandMessage<Value>,
    plan: WaitPlan,
    started: Instant,
) -> Response {
    let metrics_state = state.clone();
    let awaited = plan.stage;
    // One event per stage (DESIGN.md §5); a caller that waits for one consumer (Wow's
    // `Command-Wait-Processor`) gets that consumer's signals too, as Wow streams them.
    let awaited_function = plan.function.clone();
    let events = state
        .gateway()
        .send_and_wait_stream(message, plan)
        .filter(move |result| {
            let shown = match (&result.function, &awaited_function) {
                (None, _) => true,
                (Some(function), Some(wanted)) => wanted.matches(function),
                (Some(_), None) => false,
            };
            std::future::ready(shown)
        })
        .map(move |result| {
            // A command counts once, by the element that ends its stream: the awaited
            // stage, or a failure (a timeout included).
            if result.stage == awaited || !result.succeeded {
                metrics_state.metrics().observe(&result, started.elapsed());
            }
            let event = Event::default()
                .id(result.id.clone())
                .event(result.stage.as_str());
            Ok::<_, Infallible>(
                event
                    .json_data(crate::status::wire(&result))
                    .unwrap_or_else(|_| Event::default().data("{}")),
            )
        });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response();
    // The stream was accepted; each event's `errorCode` says how its stage went.
    response.headers_mut().insert(
        crate::ERROR_CODE_HEADER,
        axum::http::HeaderValue::from_static("Ok"),
    );
    response
}
