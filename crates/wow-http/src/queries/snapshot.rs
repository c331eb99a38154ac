//! Wow's snapshot routes: `GET /{aggregate}/{id}/snapshot` (the aggregate's materialized
//! snapshot, in Wow's shape), and the operator's regeneration of it from history,
//! `PUT /{aggregate}/{id}/snapshot` for one aggregate and
//! `PUT /{aggregate}/snapshot/{afterId}/{limit}` for a page of a type's aggregates.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use wow_core::aggregate::AggregateRuntime;
use wow_core::view::{ViewKey, ViewRow, ViewStore};
use wow_core::{AggregateId, ErrorCode};
use wow_runtime::view::{regenerate_snapshot, snapshot_view};

use super::whole;
use crate::error::ApiError;
use crate::extract::{Aggregate, ReadTarget};
use crate::ids::Id;
use crate::state::HttpState;

/// Wow's first cursor of a batch: start at the first aggregate.
const FIRST_CURSOR: &str = "(0)";

/// The most aggregates one batch regenerates.
const MAX_BATCH: usize = 1000;

/// The materialized snapshots, or the 404 that says how to keep them.
fn views(state: &HttpState) -> Result<&dyn ViewStore, ApiError> {
    state.views().map(|views| views.as_ref()).ok_or_else(|| {
        ApiError::read_not_found(
            "this service keeps no materialized snapshots: start it with snapshot queries on (WOW_SNAPSHOT_QUERIES=true, the default)",
        )
    })
}

/// A materialized snapshot as Wow answers it: the stored document without what only this
/// service reads (`stateVersion`).
fn wow_shape(row: ViewRow) -> Value {
    let mut document = row.state;
    if let Some(fields) = document.as_object_mut() {
        fields.remove("stateVersion");
    }
    document
}

/// `GET /{aggregate}/{id}/snapshot`: the aggregate's materialized snapshot (`contextName`,
/// `aggregateName`, `tenantId`, `ownerId`, `aggregateId`, `version`, `eventId`,
/// `firstEventTime`, `eventTime`, `snapshotTime`, `deleted`, `state`, ...), as its projection
/// last wrote it (wait for `PROJECTED` to read a command's own change); its version in
/// `ETag`. 404 `NotFound` when it has none.
pub(crate) async fn load(
    State(state): State<HttpState>,
    target: ReadTarget,
) -> Result<Response, ApiError> {
    let id = &target.aggregate_id;
    let key = ViewKey::new(snapshot_view(&id.aggregate_name), &id.tenant_id, &id.id);
    let row = views(&state)?
        .load(&key)
        .await
        .map_err(|error| {
            ApiError::read(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::ServiceUnavailable,
                error.to_string(),
            )
        })?
        .ok_or_else(|| ApiError::read_not_found(format!("no snapshot of aggregate `{}`", id.id)))?;
    let etag = format!("\"{}\"", row.version);
    Ok(([(axum::http::header::ETAG, etag)], Json(wow_shape(row))).into_response())
}

/// The path of `PUT /{aggregate}/{id}/snapshot`.
#[derive(Debug, Deserialize)]
pub(crate) struct One {
    id: String,
}

/// `PUT /{aggregate}/{id}/snapshot` (an operator's action): folds the aggregate's whole
/// history into its materialized snapshot and writes it, in the tenant `Command-Tenant-Id`
/// names; answers the document. Recorded in the audit log (who, when, which aggregate).
pub(crate) async fn regenerate(
    State(state): State<HttpState>,
    Aggregate(runtime): Aggregate,
    headers: HeaderMap,
    Path(One { id }): Path<One>,
) -> Result<Response, ApiError> {
    let aggregate_id = operator_target(runtime.as_ref(), &headers, &id)?;
    let row = regenerate_one(&state, runtime.as_ref(), &aggregate_id)
        .await?
        .ok_or_else(|| ApiError::read_not_found(format!("no aggregate `{id}`")))?;
    audit(&headers, "snapshot.regenerate", &aggregate_id, 1);
    Ok(Json(wow_shape(row)).into_response())
}

/// The path of `PUT /{aggregate}/snapshot/{afterId}/{limit}`.
#[derive(Debug, Deserialize)]
pub(crate) struct Batch {
    #[serde(rename = "afterId")]
    after_id: String,
    limit: String,
}

/// `PUT /{aggregate}/snapshot/{afterId}/{limit}` (an operator's action): regenerates the
/// materialized snapshots of up to `limit` (at most 1,000) aggregates of the type in the
/// tenant `Command-Tenant-Id` names, in id order after `afterId` (`(0)`: from the first), and
/// answers Wow's `{afterId, size}`: pass `afterId` back for the next batch, until `size` is 0.
pub(crate) async fn regenerate_batch(
    State(state): State<HttpState>,
    Aggregate(runtime): Aggregate,
    headers: HeaderMap,
    Path(Batch { after_id, limit }): Path<Batch>,
) -> Result<Json<Value>, ApiError> {
    let limit: usize = whole(&limit, "the limit is a whole number from 1 to 1000")?;
    if limit == 0 || limit > MAX_BATCH {
        return Err(ApiError::read(
            StatusCode::BAD_REQUEST,
            ErrorCode::IllegalArgument,
            "the limit is a whole number from 1 to 1000",
        ));
    }
    let cursor = if after_id == FIRST_CURSOR {
        ""
    } else {
        after_id.as_str()
    };
    let first = operator_target(runtime.as_ref(), &headers, cursor).or_else(|refused| {
        if cursor.is_empty() {
            let tenant = crate::auth::named_tenant(&headers).map_err(refused_tenant)?;
            Ok(runtime
                .named_aggregate()
                .aggregate_id(String::new(), tenant.0))
        } else {
            Err(refused)
        }
    })?;
    let ids = state
        .store()
        .scan_aggregate_ids(runtime.named_aggregate(), Some(&first), limit)
        .await
        .map_err(|error| super::read_failed(&error))?;
    let mut last = after_id;
    let mut size = 0usize;
    for aggregate_id in ids.iter().filter(|id| id.tenant_id == first.tenant_id) {
        regenerate_one(&state, runtime.as_ref(), aggregate_id).await?;
        last.clone_from(&aggregate_id.id);
        size += 1;
    }
    audit(&headers, "snapshot.regenerate_batch", &first, size);
    Ok(Json(json!({"afterId": last, "size": size})))
}

/// The aggregate `id` of `runtime`'s type in the tenant an operator names.
fn operator_target(
    runtime: &dyn AggregateRuntime,
    headers: &HeaderMap,
    id: &str,
) -> Result<AggregateId, ApiError> {
    let tenant = crate::auth::named_tenant(headers).map_err(refused_tenant)?;
    let id = Id::parse(id).map_err(|invalid| {
        ApiError::read(
            StatusCode::BAD_REQUEST,
            ErrorCode::IllegalArgument,
            invalid.to_string(),
        )
    })?;
    Ok(runtime
        .named_aggregate()
        .aggregate_id(id.into_string(), tenant.0))
}

fn refused_tenant(error: crate::auth::NoTenant) -> ApiError {
    ApiError::from(crate::auth::Refused::Tenant(error))
}

/// Regenerates one aggregate's materialized snapshot.
async fn regenerate_one(
    state: &HttpState,
    runtime: &dyn AggregateRuntime,
    aggregate_id: &AggregateId,
) -> Result<Option<ViewRow>, ApiError> {
    let now = wow_core::id::now_millis();
    regenerate_snapshot(runtime, state.store(), views(state)?, aggregate_id, now)
        .await
        .map_err(|error| {
            ApiError::read(
                crate::status::status_for(&error.code),
                error.code.clone(),
                error.message.clone(),
            )
        })
}

/// One line of the audit log for an operator's regeneration.
fn audit(headers: &HeaderMap, action: &str, aggregate_id: &AggregateId, size: usize) {
    let by = crate::operator::token_fingerprint(headers);
    tracing::info!(
        target: "wow::audit",
        action,
        operator = by.as_deref().unwrap_or("none"),
        aggregate = %aggregate_id,
        size,
        at = wow_core::id::now_millis(),
        "an operator regenerated materialized snapshots"
    );
}
