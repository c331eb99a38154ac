//! The read routes: state, history, the outcome look-up, health.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use wow_core::eventsourcing::{load_aggregate, EventStoreError};
use wow_core::AggregateId;

use crate::{auth, HttpState};

fn not_found(message: impl Into<String>) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"errorCode": "NotFound", "errorMsg": message.into()})),
    )
        .into_response()
}

fn store_failed(error: &EventStoreError) -> Response {
    let status = crate::status_for(&error.error_code());
    (
        status,
        Json(json!({"errorCode": error.error_code(), "errorMsg": error.to_string()})),
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
        .get(name)
        .ok_or_else(|| not_found(format!("no aggregate named `{name}`")))?;
    if crate::input::check_id("aggregateId", id, true).is_err() {
        return Err(not_found(format!("no aggregate `{id}`")));
    }
    Ok(runtime.named_aggregate().aggregate_id(id, tenant.0))
}

/// `GET /health`.
pub(crate) async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "UP"}))
}

/// `GET /{aggregate}/{id}/state`: `{aggregateId, version, state}`.
pub(crate) async fn state(
    State(state): State<HttpState>,
    Path((name, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let aggregate_id = match aggregate(&state, &headers, &name, &id) {
        Ok(aggregate_id) => aggregate_id,
        Err(response) => return response,
    };
    let Some(runtime) = state.registry().get(&name) else {
        return not_found(format!("no aggregate named `{name}`"));
    };
    match load_aggregate(
        runtime.as_ref(),
        state.store(),
        state.snapshots(),
        &aggregate_id,
    )
    .await
    {
        Ok(loaded) if loaded.belongs_to(&aggregate_id.tenant_id) => match loaded.to_json() {
            Ok(body) => {
                Json(json!({"aggregateId": id, "version": loaded.version(), "state": body}))
                    .into_response()
            }
            Err(error) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"errorCode": "InternalServerError", "errorMsg": error.to_string()})),
            )
                .into_response(),
        },
        Ok(_) => not_found(format!("no aggregate `{id}`")),
        Err(error) => {
            let status = crate::status_for(&error.error_code());
            (
                status,
                Json(json!({"errorCode": error.error_code(), "errorMsg": error.to_string()})),
            )
                .into_response()
        }
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
    match state.store().load(&aggregate_id, head, tail).await {
        Ok(streams)
            if streams
                .iter()
                .all(|s| s.aggregate_id.tenant_id == aggregate_id.tenant_id) =>
        {
            Json(streams).into_response()
        }
        Ok(_) => not_found(format!("no aggregate `{id}`")),
        Err(error) => store_failed(&error),
    }
}

/// `GET /{aggregate}/{id}/requests/{requestId}` (SPEC TO-1): `APPENDED` with the stream,
/// `NOT_APPENDED` (404), or `UNKNOWN` (503) when the store cannot be asked.
pub(crate) async fn outcome(
    State(state): State<HttpState>,
    Path((name, id, request_id)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let aggregate_id = match aggregate(&state, &headers, &name, &id) {
        Ok(aggregate_id) => aggregate_id,
        Err(response) => return response,
    };
    let unknown = |error: &EventStoreError| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "UNKNOWN", "errorMsg": error.to_string()})),
        )
            .into_response()
    };
    let not_appended = || {
        (
            StatusCode::NOT_FOUND,
            Json(json!({"status": "NOT_APPENDED"})),
        )
            .into_response()
    };
    let record = match state.store().find_request(&aggregate_id, &request_id).await {
        Ok(Some(record)) => record,
        Ok(None) => return not_appended(),
        Err(error) => return unknown(&error),
    };
    match state
        .store()
        .load(&aggregate_id, record.version, record.version)
        .await
    {
        Ok(mut streams) if !streams.is_empty() => {
            let stream = streams.remove(0);
            if stream.aggregate_id.tenant_id != aggregate_id.tenant_id {
                return not_appended();
            }
            Json(json!({
                "status": "APPENDED",
                "version": record.version,
                "commandId": record.command_id,
                "createTime": record.create_time,
                "stream": stream,
            }))
            .into_response()
        }
        Ok(_) => not_appended(),
        Err(error) => unknown(&error),
    }
}
