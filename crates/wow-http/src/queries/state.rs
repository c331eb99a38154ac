//! `GET /{aggregate}/{id}/state` and Wow's time travel, `…/state/{version}` and
//! `…/state/time/{time}`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;
use wow_core::aggregate::AggregateState;
use wow_core::eventsourcing::EventStoreError;
use wow_core::{DomainEventStream, ErrorCode};
use wow_runtime::eventsourcing::load_aggregate;

use super::{read_failed, whole};
use crate::error::ApiError;
use crate::extract::ReadTarget;
use crate::prefix::WowPrefixed;
use crate::state::HttpState;

/// The version of `…/state/{version}`, as written.
#[derive(Debug, Deserialize)]
pub(crate) struct AtVersion {
    version: String,
}

/// The time of `…/state/time/{time}`, as written.
#[derive(Debug, Deserialize)]
pub(crate) struct AtTime {
    time: String,
}

/// `GET /{aggregate}/{id}/state`: `{aggregateId, version, state}`; the bare state under
/// `/tenant/{tenantId}/`.
pub(crate) async fn state(
    State(state): State<HttpState>,
    target: ReadTarget,
    prefixed: Option<Extension<WowPrefixed>>,
) -> Result<Response, ApiError> {
    let id = target.id();
    let loaded = load_aggregate(
        target.runtime.as_ref(),
        state.store(),
        state.snapshots(),
        &target.aggregate_id,
    )
    .await
    .map_err(|error| load_failed(&error.error_code(), error.to_string()))?;
    if loaded.is_deleted() {
        return Err(ApiError::read_not_found(format!(
            "aggregate `{id}` is deleted"
        )));
    }
    if !loaded.belongs_to(&target.aggregate_id.tenant_id) {
        return Err(ApiError::read_not_found(format!("no aggregate `{id}`")));
    }
    state_answer(&loaded, id, prefixed.is_some())
}

/// `GET /{aggregate}/{id}/state/{version}`: the state at `version` (Wow's time travel); 404
/// before the aggregate existed or past its last version.
pub(crate) async fn state_at_version(
    State(state): State<HttpState>,
    target: ReadTarget,
    Path(AtVersion { version }): Path<AtVersion>,
    prefixed: Option<Extension<WowPrefixed>>,
) -> Result<Response, ApiError> {
    let id = target.id();
    let version: u64 = whole(&version, "the version is a whole number")?;
    if version == 0 {
        return Err(ApiError::read_not_found(format!(
            "no aggregate `{id}` at version 0"
        )));
    }
    let streams = state.store().load(&target.aggregate_id, 1, version).await;
    let loaded = folded(&target, streams)?;
    if loaded.version() != version {
        return Err(ApiError::read_not_found(format!(
            "aggregate `{id}` has no version {version} (its last is {})",
            loaded.version()
        )));
    }
    state_answer(&loaded, id, prefixed.is_some())
}

/// `GET /{aggregate}/{id}/state/time/{time}`: the state as of `time` (milliseconds since the
/// Unix epoch): every stream made at or before it.
pub(crate) async fn state_at_time(
    State(state): State<HttpState>,
    target: ReadTarget,
    Path(AtTime { time }): Path<AtTime>,
    prefixed: Option<Extension<WowPrefixed>>,
) -> Result<Response, ApiError> {
    let time: i64 = whole(
        &time,
        "the time is a whole number of milliseconds since the Unix epoch",
    )?;
    let streams = state
        .store()
        .load_by_time(&target.aggregate_id, 0, time)
        .await;
    let loaded = folded(&target, streams)?;
    state_answer(&loaded, target.id(), prefixed.is_some())
}

/// A state as answered: `{aggregateId, version, state}` (docs/http-api.md), or the bare state under
/// Wow's `/tenant/{tenantId}/` prefix, as Wow's clients read it.
fn state_answer(loaded: &AggregateState, id: &str, prefixed: bool) -> Result<Response, ApiError> {
    let body = loaded.to_json().map_err(|error| {
        ApiError::read(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::InternalServerError,
            error.to_string(),
        )
    })?;
    if prefixed {
        return Ok(Json(body).into_response());
    }
    Ok(
        Json(json!({"aggregateId": id, "version": loaded.version(), "state": body}))
            .into_response(),
    )
}

/// A state the aggregate's history could not give, as a read's error with `code`'s status.
fn load_failed(code: &ErrorCode, message: String) -> ApiError {
    ApiError::read(crate::status::status_for(code), code, message)
}

/// The state folded from `streams` (the first versions of the aggregate, in order).
fn folded(
    target: &ReadTarget,
    streams: Result<Vec<DomainEventStream>, EventStoreError>,
) -> Result<AggregateState, ApiError> {
    let id = target.id();
    let streams = streams.map_err(|error| read_failed(&error))?;
    let mut folded = target.runtime.initial_state();
    for stream in &streams {
        target
            .runtime
            .apply(&mut folded, stream)
            .map_err(|error| load_failed(&error.error_code(), error.to_string()))?;
    }
    if folded.version() == 0 {
        return Err(ApiError::read_not_found(format!(
            "no aggregate `{id}` then"
        )));
    }
    if folded.is_deleted() {
        return Err(ApiError::read_not_found(format!(
            "aggregate `{id}` was deleted then"
        )));
    }
    Ok(folded)
}
