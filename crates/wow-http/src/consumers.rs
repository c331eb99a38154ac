//! `/consumers`: an operator's actions on the service's consumers. `POST
//! /consumers/{consumer}/redispatch` runs one consumer again on a range of history (see
//! [`wow_runtime::event::redispatch`] for what that does to each kind of consumer: a
//! projection with processed-message records applies only what it never applied, a saga
//! resends its commands under the same request ids, positions never move back).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use wow_core::ErrorCode;
use wow_runtime::compensation::CompensationScheduler;
use wow_runtime::event::RedispatchRange;

use crate::compensation::{operator_name, read_body, Scope};
use crate::error::ApiError;
use crate::state::HttpState;

/// The body of `POST /consumers/{consumer}/redispatch`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RedispatchBody {
    /// The aggregate type (its name).
    aggregate: String,
    /// Only this aggregate; every one of the type when absent.
    aggregate_id: Option<String>,
    /// The first version, at least 1.
    from_version: u64,
    /// The last version; each aggregate's head when absent.
    to_version: Option<u64>,
}

/// `POST /consumers/{consumer}/redispatch` with `{"aggregate": "account", "aggregateId":
/// optional, "fromVersion": n, "toVersion": optional}`: an operator runs `consumer` again on
/// the streams of that range, in the tenant `Command-Tenant-Id` names (every tenant's when
/// auth is off and none is named; with an `aggregateId`, the default tenant's), in the
/// background. Answers 202 with what will be re-dispatched; the audit log records who asked,
/// when and what, and what the run did when it ends. 400 `BadRequest` for a bad body
/// (`fromVersion` 0, `toVersion` below it, a bad id), 404 `NotFound` for an unknown consumer
/// or aggregate type, or a service that runs no consumers it can re-dispatch to.
pub(crate) async fn redispatch(
    State(state): State<HttpState>,
    headers: HeaderMap,
    Path(consumer): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let scope = Scope::of_operator(&state, &headers)?;
    let body = checked(read_body(body)?)?;
    let runtime = state.registry().find(&body.aggregate).map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no aggregate is named `{}`", body.aggregate),
        )
    })?;
    let scheduler = scope.scheduler().clone();
    if !scheduler.runs_consumer(&consumer) {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no consumer is named `{consumer}` here"),
        ));
    }
    let range = RedispatchRange {
        aggregate: runtime.named_aggregate().clone(),
        aggregate_id: body.aggregate_id,
        tenant_id: scope.tenant_id().map(str::to_owned),
        from_version: body.from_version,
        to_version: body.to_version,
    };
    let by = operator_name(&headers);
    let at = wow_core::id::now_millis();
    tracing::info!(
        target: "wow::audit",
        action = "consumer.redispatch",
        operator = %by,
        consumer = %consumer,
        aggregate = %range.aggregate.aggregate_name,
        aggregate_id = range.aggregate_id.as_deref().unwrap_or("*"),
        tenant = range.tenant_id.as_deref().unwrap_or("*"),
        from_version = range.from_version,
        to_version = range.to_version.unwrap_or(u64::MAX),
        at,
        "an operator re-dispatched a range of history to a consumer"
    );
    let answer = json!({
        "consumer": consumer,
        "aggregate": range.aggregate.aggregate_name,
        "contextName": range.aggregate.context_name,
        "aggregateId": range.aggregate_id,
        "tenantId": range.tenant_id,
        "fromVersion": range.from_version,
        "toVersion": range.to_version,
        "requestedBy": by,
        "requestedAt": at,
    });
    run_in_background(scheduler, consumer, range, by);
    Ok((StatusCode::ACCEPTED, Json(answer)))
}

/// `body` when its range is one: 400 `BadRequest` for `fromVersion` 0, a `toVersion` below
/// it, or an aggregate id that breaks the rules of an id.
fn checked(body: RedispatchBody) -> Result<RedispatchBody, ApiError> {
    if body.from_version == 0 {
        return Err(ApiError::bad_request("fromVersion must be at least 1"));
    }
    if body.to_version.is_some_and(|to| to < body.from_version) {
        return Err(ApiError::bad_request(
            "toVersion must not be below fromVersion",
        ));
    }
    if let Some(id) = &body.aggregate_id {
        wow_core::check_aggregate_id(id)
            .map_err(|why| ApiError::bad_request(format!("aggregateId {why}")))?;
    }
    Ok(body)
}

/// Runs the re-dispatch of `range` to `consumer` after the answer, and records in the audit
/// log what it did, or that a store stopped it.
fn run_in_background(
    scheduler: CompensationScheduler,
    consumer: String,
    range: RedispatchRange,
    by: String,
) {
    tokio::spawn(async move {
        match scheduler.redispatch(&consumer, &range).await {
            Ok(outcome) => tracing::info!(
                target: "wow::audit",
                action = "consumer.redispatch.done",
                operator = %by,
                consumer = %consumer,
                aggregate = %range.aggregate.aggregate_name,
                aggregates = outcome.aggregates,
                streams_handled = outcome.streams_handled,
                aggregates_failed = outcome.aggregates_failed,
                "a re-dispatch ended"
            ),
            Err(error) => tracing::warn!(
                target: "wow::audit",
                action = "consumer.redispatch.failed",
                operator = %by,
                consumer = %consumer,
                %error,
                "a re-dispatch stopped: a store failed"
            ),
        }
    });
}
