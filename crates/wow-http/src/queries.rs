//! The read routes: state, history, the outcome look-up, health.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde_json::json;
use wow_core::command::{look_up_request, RequestOutcome};
use wow_core::eventsourcing::{load_aggregate, EventStoreError};
use wow_core::{AggregateId, ErrorCode};

use crate::prefix::WowPrefixed;
use crate::status::look_up_status;
use crate::{auth, HttpState};

fn not_found(message: impl Into<String>) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"errorCode": "NotFound", "errorMsg": message.into()})),
    )
        .into_response()
}

/// The answer to a read the store failed; what an unreachable or failing store said is
/// logged, never answered (it may hold SQL or addresses).
fn store_failed(error: &EventStoreError) -> Response {
    let status = crate::status_for(&error.error_code());
    let message = match error {
        EventStoreError::Unavailable(_) => {
            tracing::warn!(%error, "a read found the store unavailable");
            "the event store is unavailable; try again shortly".to_owned()
        }
        EventStoreError::Internal(_) => {
            tracing::error!(%error, "a read failed in the store");
            "the event store failed; the server's log has the details".to_owned()
        }
        other => other.to_string(),
    };
    (
        status,
        Json(json!({"errorCode": error.error_code(), "errorMsg": message})),
    )
        .into_response()
}

/// The aggregate a read names, in the caller's tenant; `Err` is the response to give.
#[allow(clippy::result_large_err)] // the error is the response itself, built once
fn aggregate(
    state: &HttpState,
    headers: &HeaderMap,
    name: &str,
    id: &str,
) -> Result<AggregateId, Response> {
    let tenant = auth::tenant(state.config(), headers).map_err(|u| u.response())?;
    let runtime = state
        .registry()
        .find(name)
        .map_err(|unknown| not_found(unknown.to_string()))?;
    if crate::input::check_id("aggregateId", id, true).is_err() {
        return Err(not_found(format!("no aggregate `{id}`")));
    }
    Ok(runtime.named_aggregate().aggregate_id(id, tenant.0))
}

/// `GET /health`: `{"status": "UP", "details": {"quarantinedCount": n, "quarantined": [...]}}`,
/// and `details.node` (role, partitions, NATS connection) on a node of a distributed
/// deployment.
///
/// Always 200 and `UP`: a node with quarantined aggregates (SPEC PX-1) serves every other
/// aggregate, so a probe must not take it out of rotation (nor restart it in a loop, which
/// lifts the quarantine only until the aggregate's next command). The quarantine is reported
/// in `details` for monitors and operators instead: how many aggregates are quarantined, and
/// which (aggregate, version, message, since). The list holds only the caller's tenant's when
/// it names one (auth on: its token's, none without a valid token; else `Command-Tenant-Id`),
/// every tenant's otherwise, as `/compensation/failures` does; none for a token bound to an
/// owner or a space (SPEC TN-2); the count is of the listed ones (the gauge
/// `wow_quarantined_aggregates` in `/metrics` counts every tenant's).
pub(crate) async fn health(
    State(state): State<HttpState>,
    headers: HeaderMap,
) -> Json<serde_json::Value> {
    let quarantined = state.quarantine().list();
    let named = !state.config().auth_tokens.is_empty()
        || headers.contains_key(wow_core::command::headers::TENANT_ID);
    let visible: Vec<_> = match (named, auth::caller(state.config(), &headers)) {
        (false, _) => quarantined,
        // SPEC TN-2: which aggregates are quarantined is for tokens of the whole tenant.
        (true, Ok(caller)) if caller.is_bound() => Vec::new(),
        (true, Ok(caller)) => quarantined
            .into_iter()
            .filter(|q| q.aggregate_id.tenant_id == caller.tenant)
            .collect(),
        (true, Err(_)) => Vec::new(),
    };
    // The count is of what the caller may see: another tenant's quarantine is not its
    // business (SPEC TN-1); operators read the whole in `/metrics`.
    let count = visible.len();
    let mut details = json!({"quarantinedCount": count, "quarantined": visible});
    if let Some(node) = state.node_status() {
        details["node"] = node;
    }
    Json(json!({"status": "UP", "details": details}))
}

/// A state as answered: `{aggregateId, version, state}` (DESIGN §5), or the bare state under
/// Wow's `/tenant/{tenantId}/` prefix, as Wow's clients read it.
fn state_answer(
    loaded: &wow_core::aggregate::AggregateState,
    id: &str,
    prefixed: bool,
) -> Response {
    match loaded.to_json() {
        Ok(body) if prefixed => Json(body).into_response(),
        Ok(body) => Json(json!({"aggregateId": id, "version": loaded.version(), "state": body}))
            .into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"errorCode": "InternalServerError", "errorMsg": error.to_string()})),
        )
            .into_response(),
    }
}

fn load_failed(code: &ErrorCode, message: String) -> Response {
    (
        crate::status_for(code),
        Json(json!({"errorCode": code, "errorMsg": message})),
    )
        .into_response()
}

/// `GET /{aggregate}/{id}/state`: `{aggregateId, version, state}`; the bare state under
/// `/tenant/{tenantId}/`.
pub(crate) async fn state(
    State(state): State<HttpState>,
    Path((name, id)): Path<(String, String)>,
    prefixed: Option<Extension<WowPrefixed>>,
    headers: HeaderMap,
) -> Response {
    let aggregate_id = match aggregate(&state, &headers, &name, &id) {
        Ok(aggregate_id) => aggregate_id,
        Err(response) => return response,
    };
    let runtime = match state.registry().find(&name) {
        Ok(runtime) => runtime,
        Err(unknown) => return not_found(unknown.to_string()),
    };
    match load_aggregate(
        runtime.as_ref(),
        state.store(),
        state.snapshots(),
        &aggregate_id,
    )
    .await
    {
        Ok(loaded) if loaded.is_deleted() => not_found(format!("aggregate `{id}` is deleted")),
        Ok(loaded) if loaded.belongs_to(&aggregate_id.tenant_id) => {
            state_answer(&loaded, &id, prefixed.is_some())
        }
        Ok(_) => not_found(format!("no aggregate `{id}`")),
        Err(error) => load_failed(&error.error_code(), error.to_string()),
    }
}

/// The state folded from `streams` (the first versions of the aggregate, in order).
async fn folded(
    state: &HttpState,
    name: &str,
    id: &str,
    streams: Result<Vec<wow_core::DomainEventStream>, EventStoreError>,
) -> Result<wow_core::aggregate::AggregateState, Response> {
    let runtime = state
        .registry()
        .find(name)
        .map_err(|unknown| not_found(unknown.to_string()))?;
    let streams = streams.map_err(|error| store_failed(&error))?;
    let mut folded = runtime.initial_state();
    for stream in &streams {
        runtime
            .apply(&mut folded, stream)
            .map_err(|error| load_failed(&error.error_code(), error.to_string()))?;
    }
    if folded.version() == 0 {
        return Err(not_found(format!("no aggregate `{id}` then")));
    }
    if folded.is_deleted() {
        return Err(not_found(format!("aggregate `{id}` was deleted then")));
    }
    Ok(folded)
}

/// `GET /{aggregate}/{id}/state/{version}`: the state at `version` (Wow's time travel); 404
/// before the aggregate existed or past its last version.
pub(crate) async fn state_at_version(
    State(state): State<HttpState>,
    Path((name, id, version)): Path<(String, String, String)>,
    prefixed: Option<Extension<WowPrefixed>>,
    headers: HeaderMap,
) -> Response {
    let aggregate_id = match aggregate(&state, &headers, &name, &id) {
        Ok(aggregate_id) => aggregate_id,
        Err(response) => return response,
    };
    let Ok(version) = version.parse::<u64>() else {
        return (StatusCode::BAD_REQUEST, Json(json!({"errorCode": "IllegalArgument", "errorMsg": "the version is a whole number"}))).into_response();
    };
    if version == 0 {
        return not_found(format!("no aggregate `{id}` at version 0"));
    }
    let streams = state.store().load(&aggregate_id, 1, version).await;
    match folded(&state, &name, &id, streams).await {
        Ok(loaded) if loaded.version() == version => state_answer(&loaded, &id, prefixed.is_some()),
        Ok(loaded) => not_found(format!(
            "aggregate `{id}` has no version {version} (its last is {})",
            loaded.version()
        )),
        Err(response) => response,
    }
}

/// `GET /{aggregate}/{id}/state/time/{time}`: the state as of `time` (milliseconds since the
/// Unix epoch): every stream made at or before it.
pub(crate) async fn state_at_time(
    State(state): State<HttpState>,
    Path((name, id, time)): Path<(String, String, String)>,
    prefixed: Option<Extension<WowPrefixed>>,
    headers: HeaderMap,
) -> Response {
    let aggregate_id = match aggregate(&state, &headers, &name, &id) {
        Ok(aggregate_id) => aggregate_id,
        Err(response) => return response,
    };
    let Ok(time) = time.parse::<i64>() else {
        return (StatusCode::BAD_REQUEST, Json(json!({"errorCode": "IllegalArgument", "errorMsg": "the time is a whole number of milliseconds since the Unix epoch"}))).into_response();
    };
    let streams = state.store().load_by_time(&aggregate_id, 0, time).await;
    match folded(&state, &name, &id, streams).await {
        Ok(loaded) => state_answer(&loaded, &id, prefixed.is_some()),
        Err(response) => response,
    }
}

/// `GET /{aggregate}/{id}/event/{head}/{tail}`: the streams with versions in `head..=tail`.
pub(crate) async fn events(
    State(state): State<HttpState>,
    Path((name, id, head, tail)): Path<(String, String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let aggregate_id = match aggregate(&state, &headers, &name, &id) {
        Ok(aggregate_id) => aggregate_id,
        Err(response) => return response,
    };
    let (Ok(head), Ok(tail)) = (head.parse::<u64>(), tail.parse::<u64>()) else {
        return (StatusCode::BAD_REQUEST, Json(json!({"errorCode": "IllegalArgument", "errorMsg": "head and tail are whole numbers"}))).into_response();
    };
    // The tenant leads the store's key: the load sees only the caller's tenant (SPEC TN-1),
    // and an aggregate it does not hold is an empty history, as in any tenant.
    let runtime = match state.registry().find(&name) {
        Ok(runtime) => runtime.clone(),
        Err(unknown) => return not_found(unknown.to_string()),
    };
    match state.store().load(&aggregate_id, head, tail).await {
        Ok(streams) => match streams
            .iter()
            .map(|stream| today(runtime.as_ref(), stream))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(streams) => Json(streams).into_response(),
            Err(error) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"errorCode": error.error_code(), "errorMsg": error.to_string()})),
            )
                .into_response(),
        },
        Err(error) => store_failed(&error),
    }
}

/// `stream` as JSON with its events in today's shape (the aggregate's upcasters applied).
/// An event that was upcast says what it was stored as: `storedName` and `storedRevision`;
/// the parts of a split event after the first get the id `{id}.{n}`.
pub(crate) fn today(
    runtime: &dyn wow_core::aggregate::AggregateRuntime,
    stream: &wow_core::DomainEventStream,
) -> Result<serde_json::Value, wow_core::aggregate::AggregateError> {
    let shapes = runtime.upcast(stream)?;
    let mut json = serde_json::to_value(stream).unwrap_or_default();
    let mut parts = std::collections::HashMap::<usize, usize>::new();
    let events: Vec<serde_json::Value> = shapes
        .into_iter()
        .map(|(index, shape)| {
            let stored = &stream.body[index];
            let part = parts.entry(index).or_default();
            let id = if *part == 0 {
                stored.id.clone()
            } else {
                format!("{}.{part}", stored.id)
            };
            *part += 1;
            // Wow names each event's body type; here it is the event qualified by its aggregate.
            let body_type = format!(
                "{}.{}.{}",
                stream.aggregate_id.context_name, stream.aggregate_id.aggregate_name, shape.name
            );
            let mut event = json!({"id": id, "name": shape.name, "revision": shape.revision, "bodyType": body_type, "body": shape.body});
            if shape.name != stored.name || shape.revision != stored.revision {
                event["storedName"] = json!(stored.name);
                event["storedRevision"] = json!(stored.revision);
            }
            event
        })
        .collect();
    json["body"] = json!(events);
    let document = wow_core::eventsourcing::stream_document(stream);
    for field in ["ownerId", "spaceId"] {
        json[field] = document[field].clone();
    }
    Ok(json)
}

/// `GET /{aggregate}/{id}/requests/{requestId}` (SPEC TO-1), through
/// [`look_up_request`]: 200 `APPENDED` with its stream, 200 `REJECTED` with the recorded
/// code and message, 202 `IN_FLIGHT` (this node or the bus holds it: look again), 404 `NONE` (no
/// decision recorded: a resend with the same request id is safe), 503 `UNKNOWN`.
///
/// An appended record whose stream cannot be loaded (the load fails or finds nothing) is
/// `UNKNOWN`, never `NONE`: the intent was appended, and `NONE` would invite a resend that
/// history says is not needed. A decision on another tenant's aggregate is `NONE` to this
/// caller, as the aggregate itself is absent to it (SPEC TN-1).
pub(crate) async fn outcome(
    State(state): State<HttpState>,
    Path((name, id, request_id)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let aggregate_id = match aggregate(&state, &headers, &name, &id) {
        Ok(aggregate_id) => aggregate_id,
        Err(response) => return response,
    };
    if let Err(rule) = wow_core::check_request_id(&request_id) {
        return crate::fallback::error_response(
            StatusCode::BAD_REQUEST,
            "IllegalArgument",
            format!("requestId {rule}: no command can carry it, so none is recorded"),
        );
    }
    let record = match look_up_request(state.gateway(), state.store(), &aggregate_id, &request_id)
        .await
    {
        RequestOutcome::Appended(record) => record,
        RequestOutcome::Rejected(record) => {
            return match owned(state.store(), &aggregate_id, record.version).await {
                Ok(true) => answer(
                    "REJECTED",
                    json!({
                        "errorCode": record.error_code,
                        "errorMsg": record.error_msg,
                        "commandId": record.command_id,
                        "createTime": record.create_time,
                        "version": record.version,
                    }),
                ),
                Ok(false) => answer("NONE", json!({})),
                Err(response) => response,
            }
        }
        RequestOutcome::InFlight => return answer("IN_FLIGHT", json!({})),
        RequestOutcome::None => return answer("NONE", json!({})),
        RequestOutcome::Unknown(error) => return unknown(error.error_code(), error.to_string()),
        // An answer this version does not know: it cannot say what happened.
        _ => {
            return unknown(
                ErrorCode::InternalServerError,
                "the look-up gave an answer this service does not know".to_owned(),
            )
        }
    };
    let stream = match state
        .store()
        .load(&aggregate_id, record.version, record.version)
        .await
    {
        Ok(streams) => streams.into_iter().next(),
        Err(error) => {
            return unknown(
                error.error_code(),
                format!(
                    "request id `{request_id}` was appended at version {}, but its stream cannot be read: {error}",
                    record.version
                ),
            )
        }
    };
    match stream {
        Some(stream) if stream.aggregate_id.tenant_id == aggregate_id.tenant_id => answer(
            "APPENDED",
            json!({
                "version": record.version,
                "commandId": record.command_id,
                "createTime": record.create_time,
                "stream": stream,
            }),
        ),
        Some(_) => answer("NONE", json!({})),
        None => unknown(
            ErrorCode::ServiceUnavailable,
            format!(
                "request id `{request_id}` was appended at version {}, but its stream cannot be found",
                record.version
            ),
        ),
    }
}

/// One answer of the look-up: `status` added to `body`, with the status code of
/// [`look_up_status`].
fn answer(status: &'static str, mut body: serde_json::Value) -> Response {
    body["status"] = json!(status);
    (look_up_status(status), Json(body)).into_response()
}

fn unknown(code: ErrorCode, message: String) -> Response {
    answer("UNKNOWN", json!({"errorCode": code, "errorMsg": message}))
}

/// Whether the aggregate a rejection was decided on (at `version`) is the caller's: its
/// first stream is in the caller's tenant. A rejection decided on no aggregate (version 0)
/// names no tenant's data and is shown. `Err` is the `UNKNOWN` answer when history cannot
/// tell.
#[allow(clippy::result_large_err)] // the error is the response itself, built once
async fn owned(
    store: &dyn wow_core::eventsourcing::EventStore,
    aggregate_id: &AggregateId,
    version: u64,
) -> Result<bool, Response> {
    if version == 0 {
        return Ok(true);
    }
    match store.load(aggregate_id, 1, 1).await {
        Ok(streams) => match streams.first() {
            Some(first) => Ok(first.aggregate_id.tenant_id == aggregate_id.tenant_id),
            None => Err(unknown(
                ErrorCode::ServiceUnavailable,
                format!("a rejection was decided at version {version}, but the aggregate's history cannot be found"),
            )),
        },
        Err(error) => Err(unknown(error.error_code(), error.to_string())),
    }
}
