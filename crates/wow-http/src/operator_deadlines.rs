//! The operator's hand on one pending deadline (SPEC DM-2): fire it now, or cancel it.
//!
//! - `POST /deadlines/{tenant}/{aggregate}/{id}/{name}/fire`: the row is due at once, its
//!   retry delay and any hold lifted (a row held after failing as often as the scheduler
//!   allows fires again); 200 with the row as it now stands.
//! - `DELETE /deadlines/{tenant}/{aggregate}/{id}/{name}`: the row is gone and never fires;
//!   200 with the row as it was.
//!
//! A saga's deadline is named `{saga}/{name}`: its `/` is written `%2F` in the path. Both
//! answer 404 `NotFound` when the aggregate type is unknown or the owner has no such row
//! pending, and 503 when the store fails. Each action is recorded on the `wow::audit` log
//! target, with who (the operator token's fingerprint, never the token) and when.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;
use serde::Deserialize;
use wow_core::deadline::{DeadlineStore, PendingDeadline};
use wow_core::eventsourcing::EventStoreError;
use wow_core::AggregateId;

use crate::error::ApiError;
use crate::ids::{Id, TenantId};
use crate::state::HttpState;

/// The row a route names: its owner (tenant, aggregate type, id) and its name.
#[derive(Debug, Deserialize)]
pub(crate) struct RowPath {
    tenant: String,
    aggregate: String,
    id: String,
    name: String,
}

/// `POST /deadlines/{tenant}/{aggregate}/{id}/{name}/fire`: the row due now.
pub(crate) async fn fire(
    State(state): State<HttpState>,
    headers: HeaderMap,
    Path(path): Path<RowPath>,
) -> Result<Json<PendingDeadline>, ApiError> {
    let (deadlines, owner) = named_row(&state, &path)?;
    if !deadlines
        .fire_now(&owner, &path.name)
        .await
        .map_err(|error| store_failed(&error))?
    {
        return Err(not_pending(&path));
    }
    let row = pending(deadlines.as_ref(), &owner, &path.name)
        .await?
        .ok_or_else(|| not_pending(&path))?;
    audit(&headers, "deadline.fire", &owner, &path.name);
    Ok(Json(row))
}

/// `DELETE /deadlines/{tenant}/{aggregate}/{id}/{name}`: the row cancelled.
pub(crate) async fn cancel(
    State(state): State<HttpState>,
    headers: HeaderMap,
    Path(path): Path<RowPath>,
) -> Result<Json<PendingDeadline>, ApiError> {
    let (deadlines, owner) = named_row(&state, &path)?;
    let row = pending(deadlines.as_ref(), &owner, &path.name)
        .await?
        .ok_or_else(|| not_pending(&path))?;
    if !deadlines
        .cancel(&owner, &path.name)
        .await
        .map_err(|error| store_failed(&error))?
    {
        return Err(not_pending(&path));
    }
    audit(&headers, "deadline.cancel", &owner, &path.name);
    Ok(Json(row))
}

/// The service's deadline store and the owner the path names; 404 when there is no store,
/// no such aggregate type, or an id no aggregate can have.
fn named_row<'a>(
    state: &'a HttpState,
    path: &RowPath,
) -> Result<(&'a std::sync::Arc<dyn DeadlineStore>, AggregateId), ApiError> {
    let deadlines = state
        .deadlines()
        .ok_or_else(|| ApiError::not_found("this service keeps no deadlines"))?;
    let runtime = state
        .registry()
        .find(&path.aggregate)
        .map_err(|unknown| ApiError::not_found(unknown.to_string()))?;
    let id = Id::parse(&path.id)
        .map_err(|_| ApiError::not_found(format!("no aggregate `{}`", path.id)))?;
    let tenant = TenantId::parse(&path.tenant)
        .map_err(|_| ApiError::not_found(format!("no tenant `{}`", path.tenant)))?;
    let owner = runtime
        .named_aggregate()
        .aggregate_id(id.into_string(), tenant.into_string());
    Ok((deadlines, owner))
}

/// `owner`'s pending row `name`, if any.
async fn pending(
    deadlines: &dyn DeadlineStore,
    owner: &AggregateId,
    name: &str,
) -> Result<Option<PendingDeadline>, ApiError> {
    let rows = deadlines
        .pending_for(owner)
        .await
        .map_err(|error| store_failed(&error))?;
    Ok(rows.into_iter().find(|row| row.schedule.name == name))
}

/// 404: the owner has no row of that name pending.
fn not_pending(path: &RowPath) -> ApiError {
    ApiError::not_found(format!(
        "`{}/{}` in tenant `{}` has no pending deadline `{}`",
        path.aggregate, path.id, path.tenant, path.name
    ))
}

/// A store that failed, as 503 (or its own code); what it said is logged, never answered.
fn store_failed(error: &EventStoreError) -> ApiError {
    tracing::warn!(%error, "an operator's deadline action found the store failing");
    let code = error.error_code();
    ApiError::new(
        crate::status::status_for(&code),
        code,
        "the deadline store failed; the server's log has the details",
    )
}

/// Records who did what to which row, and when, on the `wow::audit` log target, as a key's
/// release is: the SHA-256 fingerprint of the operator's token, never the token.
fn audit(headers: &HeaderMap, action: &str, owner: &AggregateId, name: &str) {
    let by = crate::operator::token_fingerprint(headers);
    tracing::info!(
        target: "wow::audit",
        action,
        operator = by.as_deref().unwrap_or("none"),
        tenant = %owner.tenant_id,
        aggregate = %owner.aggregate_name,
        id = %owner.id,
        deadline = %name,
        at = wow_core::id::now_millis(),
        "an operator acted on a pending deadline"
    );
}
