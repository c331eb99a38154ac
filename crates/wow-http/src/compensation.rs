//! The compensation routes (SPEC DS-4): list the recorded consumer failures, show one with
//! its events, and retry one.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use wow_core::compensation::{
    CompensationError, CompensationScheduler, ExecutionFailed, ExecutionFailedStatus, FailureQuery,
};
use wow_core::event::ConsumerStoreError;
use wow_core::ErrorCode;

use crate::{auth, HttpState};

/// The largest page `GET /compensation/failures` returns.
const MAX_LIMIT: usize = 1_000;

/// The query of `GET /compensation/failures`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListParams {
    status: Option<String>,
    consumer: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

fn error(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Response {
    (
        status,
        Json(json!({"errorCode": code, "errorMsg": message.into(), "succeeded": false})),
    )
        .into_response()
}

fn store_failed(failure: &ConsumerStoreError) -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::ServiceUnavailable,
        failure.to_string(),
    )
}

/// The scheduler and the tenant whose records the caller may see (`None`: all of them, when
/// auth is off and no tenant is named); a token bound to an owner or a space is refused
/// (403 `Forbidden`).
#[allow(clippy::result_large_err)] // the error is the response itself, built once
fn scope(
    state: &HttpState,
    headers: &HeaderMap,
) -> Result<(CompensationScheduler, Option<String>), Response> {
    let caller = auth::caller(state.config(), headers).map_err(auth::Refused::response)?;
    if caller.is_bound() {
        // SPEC TN-2: a failure record holds another owner's events as much as one's own; the
        // operator's routes are for tokens of the whole tenant.
        return Err(crate::fallback::error_response(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "the compensation routes are for tokens of the whole tenant; this token is bound to an owner or a space".to_owned(),
        ));
    }
    let named = !state.config().auth_tokens.is_empty()
        || headers.contains_key(wow_core::command::headers::TENANT_ID);
    let scheduler = state.compensation().ok_or_else(|| {
        error(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            "this service records no consumer failures",
        )
    })?;
    Ok((scheduler.clone(), named.then_some(caller.tenant)))
}

/// `GET /compensation/failures?status=&consumer=&after=&limit=`: the recorded failures in the
/// order they were first recorded, one page (`after` is the last id of the previous page).
pub(crate) async fn list(
    State(state): State<HttpState>,
    headers: HeaderMap,
    params: Result<Query<ListParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let (scheduler, tenant_id) = match scope(&state, &headers) {
        Ok(scope) => scope,
        Err(response) => return response,
    };
    let Query(params) = match params {
        Ok(params) => params,
        Err(rejection) => {
            return error(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                rejection.body_text(),
            )
        }
    };
    let status = match params.status.as_deref().map(str::to_ascii_uppercase) {
        None => None,
        Some(name) => match ExecutionFailedStatus::parse(&name) {
            Some(status) => Some(status),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::BadRequest,
                    format!("status must be FAILED, EXHAUSTED or SUCCEEDED, not `{name}`"),
                )
            }
        },
    };
    let limit = params.limit.unwrap_or(100);
    if limit == 0 || limit > MAX_LIMIT {
        return error(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadRequest,
            format!("limit must be 1..={MAX_LIMIT}"),
        );
    }
    let query = FailureQuery {
        status,
        consumer: params.consumer,
        tenant_id,
        after_id: params.after,
        limit,
    };
    match scheduler.failures().list(&query).await {
        Ok(records) => Json(records).into_response(),
        Err(failure) => store_failed(&failure),
    }
}

/// `POST /compensation/failures/{id}/retry`: runs exactly the recorded consumer on exactly
/// the recorded stream now, and answers with the record after it (`SUCCEEDED`, or one more
/// attempt).
pub(crate) async fn retry(
    State(state): State<HttpState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (scheduler, tenant_id) = match scope(&state, &headers) {
        Ok(scope) => scope,
        Err(response) => return response,
    };
    let not_found = || {
        error(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no failed execution has id `{id}`"),
        )
    };
    match scheduler.failures().get(&id).await {
        Ok(Some(record)) if visible(&record, tenant_id.as_deref()) => {}
        Ok(_) => return not_found(),
        Err(failure) => return store_failed(&failure),
    }
    match scheduler.retry(&id).await {
        Ok(record) => Json(record).into_response(),
        Err(CompensationError::NotFound(_)) => not_found(),
        Err(CompensationError::Store(failure)) => store_failed(&failure),
        Err(CompensationError::EventStore(failure)) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ServiceUnavailable,
            failure.to_string(),
        ),
        Err(other) => error(
            StatusCode::CONFLICT,
            ErrorCode::IllegalState,
            other.to_string(),
        ),
    }
}

/// `GET /compensation/failures/{id}`: the record and the stream it failed on, its events in
/// today's shape (as the history route shows them): `{"failure": {...}, "events": [...]}`.
/// Another tenant's record is a 404, as an unknown one.
pub(crate) async fn detail(
    State(state): State<HttpState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (scheduler, tenant_id) = match scope(&state, &headers) {
        Ok(scope) => scope,
        Err(response) => return response,
    };
    let record = match scheduler.failures().get(&id).await {
        Ok(Some(record)) if visible(&record, tenant_id.as_deref()) => record,
        Ok(_) => {
            return error(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound,
                format!("no failed execution has id `{id}`"),
            )
        }
        Err(failure) => return store_failed(&failure),
    };
    let streams = match state
        .store()
        .load(&record.aggregate_id, record.version, record.version)
        .await
    {
        Ok(streams) => streams,
        Err(failure) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::ServiceUnavailable,
                failure.to_string(),
            )
        }
    };
    let runtime = state.registry().find(&record.aggregate_id.aggregate_name);
    let events: Vec<serde_json::Value> = streams
        .iter()
        .map(|stream| match &runtime {
            // Today's shapes where the aggregate is known; as stored otherwise.
            Ok(runtime) => crate::queries::today(runtime.as_ref(), stream)
                .unwrap_or_else(|_| serde_json::to_value(stream).unwrap_or_default()),
            Err(_) => serde_json::to_value(stream).unwrap_or_default(),
        })
        .collect();
    Json(json!({"failure": record, "events": events})).into_response()
}

fn visible(record: &ExecutionFailed, tenant_id: Option<&str>) -> bool {
    tenant_id.is_none_or(|tenant| record.aggregate_id.tenant_id == tenant)
}
