//! The command routes: `POST /{aggregate}/{id}/{command}`, `POST /{aggregate}/{command}` (a
//! create), and Wow's `DELETE /{aggregate}/{id}` and `PUT /{aggregate}/{id}/recover`.
//!
//! Each route takes a [`CommandTo`] (the `request` module: who sends which command to which
//! aggregate, with which options; the `address` module: how its path names them) and the body, and answers with the command's result, or
//! with its stream of stages (the `stream` module).

mod address;
mod request;
mod stream;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::handler::Handler;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use wow_core::command::CommandKind;
use wow_core::ErrorCode;

use crate::error::ApiError;
use crate::state::HttpState;
use crate::status::respond;
use address::{Create, Delete, Recover, ToAggregate};
use request::{Command, CommandTo, Sendable};

/// `POST /{aggregate}/{command}`: a create (its id from `Command-Aggregate-Id`, derived from
/// `Command-Request-Id`, or made by the server).
async fn create(
    State(state): State<HttpState>,
    command: CommandTo<Create>,
    body: Body,
) -> Result<Response, ApiError> {
    run(state, command.into_command(), body).await
}

/// `DELETE /{aggregate}/{id}`: Wow's soft delete. The aggregate keeps its history and refuses
/// every command but `recover` (410 `IllegalAccessDeletedAggregate`); its keys are released
/// and its deadlines cancelled with the delete's stream (SPEC DM-6). Who may send it is the
/// aggregate's [`Lifecycle`](wow_core::aggregate::Lifecycle): any caller (`Public`), an
/// operator token (`Operator`), no caller (`Internal`: 404), no one (`Disabled`: 405).
async fn delete(
    State(state): State<HttpState>,
    command: CommandTo<Delete>,
    body: Body,
) -> Result<Response, ApiError> {
    run(state, command.into_command(), body).await
}

/// `PUT /{aggregate}/{id}/recover`: undoes a soft delete; an aggregate that is not deleted
/// refuses it (`IllegalState`). Its keys are claimed again (409 `DuplicateKey` when another
/// aggregate took one meanwhile) and its deadlines scheduled again (SPEC DM-6). Who may send
/// it is the aggregate's [`Lifecycle`](wow_core::aggregate::Lifecycle), as for the delete.
async fn recover(
    State(state): State<HttpState>,
    command: CommandTo<Recover>,
    body: Body,
) -> Result<Response, ApiError> {
    run(state, command.into_command(), body).await
}

/// Sends `command` with `body` once its caller may reach the aggregate: its result, or its
/// stream of stages when asked.
async fn run(state: HttpState, command: Command, body: Body) -> Result<Response, ApiError> {
    command.permitted(&state).await?;
    let value = command.body(body, state.config().body_limit).await?;
    let Sendable {
        message,
        plan,
        stream,
        started,
    } = command.into_sendable(value);
    if stream {
        return Ok(stream::stages(state, message, plan, started));
    }
    let result = state
        .gateway()
        .send_and_wait(message, plan)
        .await
        .unwrap_or_else(|error| error.result().clone());
    state.metrics().observe(&result, started.elapsed());
    Ok(respond(result))
}

/// `/{aggregate}/{segment}`: `POST` a create named `segment`, or `DELETE` the aggregate whose
/// id is `segment` (Wow's soft delete). A path answers the methods the document lists for it.
pub(crate) async fn two_segments(
    State(state): State<HttpState>,
    Path((aggregate, segment)): Path<(String, String)>,
    method: Method,
    request: Request,
) -> Result<Response, ApiError> {
    match method {
        Method::POST => Ok(create.call(request, state).await),
        Method::DELETE if !disabled(&state, &aggregate) => Ok(delete.call(request, state).await),
        _ => Err(not_answered(&state, &method, &aggregate, &segment)),
    }
}

/// Whether `aggregate` is one whose domain disables delete and recover (SPEC DM-6): its
/// routes do not answer `DELETE` and `PUT …/recover`.
fn disabled(state: &HttpState, aggregate: &str) -> bool {
    state
        .registry()
        .get(aggregate)
        .is_some_and(|runtime| !runtime.lifecycle().allowed())
}

/// 405 `LifecycleDisabled` for the soft delete or recover of an aggregate whose domain
/// disables both, listing in `Allow` what its path answers instead (`POST` of a create of
/// that name, or nothing).
fn lifecycle_disabled(
    method: &Method,
    path: &str,
    aggregate: &str,
    allow: &'static str,
) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::LifecycleDisabled,
        format!("{path} does not answer {method}: aggregate `{aggregate}` cannot be deleted or recovered, its domain disables both"),
    )
    .with_allow(allow)
}

/// Why `/{aggregate}/{segment}` does not answer `method`: 404 for a path of no aggregate
/// (whatever the method, as the router's fallback answers), else 405 listing in `Allow` what
/// the path answers.
fn not_answered(state: &HttpState, method: &Method, aggregate: &str, segment: &str) -> ApiError {
    let path = format!("/{aggregate}/{segment}");
    let Some(runtime) = state.registry().get(aggregate) else {
        return ApiError::no_route(method, &path);
    };
    let is_create = runtime.commands().iter().any(|c| {
        c.name == segment
            && !c.internal
            && matches!(c.kind, CommandKind::Create | CommandKind::AllowCreate)
    });
    if disabled(state, aggregate) {
        let allow = if is_create { "POST" } else { "" };
        if method == Method::DELETE {
            return lifecycle_disabled(method, &path, aggregate, allow);
        }
        return ApiError::method_not_allowed(method, &path).with_allow(allow);
    }
    let allow = if is_create { "POST" } else { "DELETE" };
    ApiError::method_not_allowed(method, &path).with_allow(allow)
}

/// `/{aggregate}/{id}/{segment}`: `POST` the command `segment`, or `PUT` Wow's recover when
/// `segment` is `recover`.
pub(crate) async fn three_segments(
    State(state): State<HttpState>,
    Path((aggregate, id, segment)): Path<(String, String, String)>,
    method: Method,
    request: Request,
) -> Result<Response, ApiError> {
    if method == Method::POST {
        // The path is read already: the command is read from it, not from the path again.
        let started = std::time::Instant::now();
        let (parts, body) = request.into_parts();
        let command = CommandTo::<ToAggregate>::of_path(
            (aggregate, id, segment),
            &parts.headers,
            &state,
            started,
        )?;
        return run(state, command.into_command(), body).await;
    }
    let path = || format!("/{aggregate}/{id}/{segment}");
    let known = state.registry().get(&aggregate).is_some();
    let recovers = segment == "recover";
    match method {
        _ if !known => Err(ApiError::no_route(&method, &path())),
        Method::PUT if recovers && disabled(&state, &aggregate) => {
            Err(lifecycle_disabled(&method, &path(), &aggregate, "POST"))
        }
        Method::PUT if recovers => Ok(recover.call(request, state).await),
        _ if recovers && disabled(&state, &aggregate) => {
            Err(ApiError::method_not_allowed(&method, &path()).with_allow("POST"))
        }
        _ if recovers => Err(ApiError::method_not_allowed(&method, &path()).with_allow("PUT")),
        _ => Err(ApiError::method_not_allowed(&method, &path()).with_allow("POST")),
    }
}
