//! The compensation routes (SPEC DS-4, DS-5): list the recorded consumer failures, show one
//! with its events, retry one, and the operator's actions on one: skip it, set its retry
//! spec, judge whether it can recover.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use wow_core::compensation::{
    ExecutionFailed, ExecutionFailedStatus, FailureQuery, RecordEdit, RecoverableType, RetrySpec,
    RetrySpecJson,
};
use wow_core::ErrorCode;
use wow_runtime::compensation::{CompensationError, CompensationScheduler};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::HttpState;

/// The largest page `GET /compensation/failures` returns.
const MAX_LIMIT: usize = 1_000;

/// The query of `GET /compensation/failures`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListParams {
    status: Option<String>,
    consumer: Option<String>,
    /// The aggregate's type (its name), e.g. `account`.
    aggregate: Option<String>,
    /// The aggregate's id.
    #[serde(rename = "aggregateId")]
    aggregate_id: Option<String>,
    /// `RECOVERABLE`, `UNRECOVERABLE` or `UNKNOWN` (any case).
    recoverable: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

/// The header of `GET /compensation/failures` that holds how many records match its filters
/// in all, whatever the page.
pub const TOTAL_HEADER: &str = "Wow-Total";

/// The query of `GET /compensation/failures`; one that does not read is 400 `BadRequest`.
#[derive(Debug)]
pub(crate) struct ListQuery(ListParams);

impl<S: Send + Sync> FromRequestParts<S> for ListQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(params) = Query::from_request_parts(parts, state)
            .await
            .map_err(|rejection: QueryRejection| ApiError::bad_request(rejection.body_text()))?;
        Ok(Self(params))
    }
}

/// The scheduler and the tenant whose records the caller may see (`None`: all of them, when
/// auth is off and no tenant is named); a token bound to an owner or a space is refused
/// (403 `Forbidden`), and a service that records no failures answers 404.
#[derive(Debug)]
pub(crate) struct Scope {
    scheduler: CompensationScheduler,
    tenant_id: Option<String>,
}

impl FromRequestParts<HttpState> for Scope {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        if caller.is_bound() {
            // SPEC TN-2: a failure record holds another owner's events as much as one's own;
            // the operator's routes are for tokens of the whole tenant.
            return Err(ApiError::forbidden(
                "the compensation routes are for tokens of the whole tenant; this token is bound to an owner or a space",
            ));
        }
        let named = !state.config().auth_tokens.is_empty()
            || parts
                .headers
                .contains_key(wow_core::command::headers::TENANT_ID);
        let scheduler = state
            .compensation()
            .ok_or_else(|| ApiError::not_found("this service records no consumer failures"))?;
        Ok(Self {
            scheduler: scheduler.clone(),
            tenant_id: named.then_some(caller.tenant),
        })
    }
}

impl Scope {
    /// The scheduler of the failures, which runs the consumers again.
    pub(crate) fn scheduler(&self) -> &CompensationScheduler {
        &self.scheduler
    }

    /// The tenant the caller acts in; `None`: every tenant (auth off, none named).
    pub(crate) fn tenant_id(&self) -> Option<&str> {
        self.tenant_id.as_deref()
    }

    /// The scope of an operator's action, whose route already checked the operator's bearer
    /// token: the tenant `Command-Tenant-Id` names (the default one when none is), or every
    /// tenant's records when auth is off and none is named.
    pub(crate) fn of_operator(state: &HttpState, headers: &HeaderMap) -> Result<Self, ApiError> {
        let scheduler = state
            .compensation()
            .ok_or_else(|| ApiError::not_found("this service records no consumer failures"))?;
        let named = !state.config().auth_tokens.is_empty()
            || headers.contains_key(wow_core::command::headers::TENANT_ID);
        let tenant_id = if named {
            let tenant = crate::auth::named_tenant(headers)
                .map_err(|refused| ApiError::from(crate::auth::Refused::Tenant(refused)))?;
            Some(tenant.0)
        } else {
            None
        };
        Ok(Self {
            scheduler: scheduler.clone(),
            tenant_id,
        })
    }

    /// The record `id`, when the caller may see it; else 404, as for an unknown one.
    async fn record(&self, id: &str) -> Result<ExecutionFailed, ApiError> {
        self.scheduler
            .failures()
            .get(id)
            .await
            .map_err(|failure| store_failed(&failure))?
            .filter(|record| {
                let tenant = self.tenant_id.as_deref();
                tenant.is_none_or(|tenant| record.aggregate_id.tenant_id == tenant)
            })
            .ok_or_else(|| no_record(id))
    }
}

/// 404 for a record the caller does not see.
fn no_record(id: &str) -> ApiError {
    ApiError::not_found(format!("no failed execution has id `{id}`"))
}

/// 503: the store of the records could not be read.
fn store_failed(failure: &impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::ServiceUnavailable,
        failure.to_string(),
    )
}

/// The value a list's parameter names, in any case (`None` when the parameter is absent); 400
/// `BadRequest` saying `rule` and what was sent when `parse` knows no such name.
fn named<T>(
    given: Option<&str>,
    parse: impl Fn(&str) -> Option<T>,
    rule: &str,
) -> Result<Option<T>, ApiError> {
    given
        .map(str::to_ascii_uppercase)
        .map(|name| {
            parse(&name).ok_or_else(|| ApiError::bad_request(format!("{rule}, not `{name}`")))
        })
        .transpose()
}

/// `GET /compensation/failures?status=&consumer=&aggregate=&aggregateId=&recoverable=&after=&limit=`: the
/// recorded failures in the order they were first recorded, one page (`after` is the last id
/// of the previous page), as a JSON array; header [`TOTAL_HEADER`] says how many match the
/// filters in all (every page).
pub(crate) async fn list(
    scope: Scope,
    ListQuery(params): ListQuery,
) -> Result<(HeaderMap, Json<Vec<ExecutionFailed>>), ApiError> {
    let status = named(
        params.status.as_deref(),
        ExecutionFailedStatus::parse,
        "status must be FAILED, EXHAUSTED, SUCCEEDED or SKIPPED",
    )?;
    let recoverable = named(
        params.recoverable.as_deref(),
        RecoverableType::parse,
        "recoverable must be RECOVERABLE, UNRECOVERABLE or UNKNOWN",
    )?;
    let limit = params.limit.unwrap_or(100);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::bad_request(format!(
            "limit must be 1..={MAX_LIMIT}"
        )));
    }
    let query = FailureQuery {
        status,
        consumer: params.consumer,
        tenant_id: scope.tenant_id,
        aggregate_name: params.aggregate,
        aggregate_id: params.aggregate_id,
        recoverable,
        after_id: params.after,
        limit,
    };
    let failures = scope.scheduler.failures();
    let records = failures
        .list(&query)
        .await
        .map_err(|failure| store_failed(&failure))?;
    let total = failures
        .count(&query)
        .await
        .map_err(|failure| store_failed(&failure))?;
    let mut headers = HeaderMap::new();
    headers.insert(
        axum::http::HeaderName::from_static("wow-total"),
        axum::http::HeaderValue::from(total),
    );
    Ok((headers, Json(records)))
}

/// `POST /compensation/failures/{id}/retry`: runs exactly the recorded consumer on exactly
/// the recorded stream now, and answers with the record after it (`SUCCEEDED`, or one more
/// attempt).
pub(crate) async fn retry(
    scope: Scope,
    Path(id): Path<String>,
) -> Result<Json<ExecutionFailed>, ApiError> {
    scope.record(&id).await?;
    let record = scope
        .scheduler
        .retry(&id)
        .await
        .map_err(|error| retry_failed(error, &id))?;
    Ok(Json(record))
}

/// The query of `GET /compensation/parked`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ParkedParams {
    consumer: Option<String>,
}

/// `GET /compensation/parked?consumer=`: the open lanes of parked streams (SPEC DS-5), oldest
/// first: per consumer and aggregate, the failed version at the head and how far the
/// aggregate's streams wait behind it. A caller with a tenant sees its tenant's only.
pub(crate) async fn parked(
    scope: Scope,
    params: Result<Query<ParkedParams>, QueryRejection>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let Query(params) = params.map_err(|rejection| ApiError::bad_request(rejection.body_text()))?;
    let Some(lanes) = scope.scheduler.parked() else {
        return Ok(Json(Vec::new()));
    };
    let lanes = lanes
        .lanes(params.consumer.as_deref())
        .await
        .map_err(|failure| store_failed(&failure))?;
    let tenant = scope.tenant_id.as_deref();
    Ok(Json(
        lanes
            .into_iter()
            .filter(|lane| tenant.is_none_or(|tenant| lane.aggregate_id.tenant_id == tenant))
            .map(|lane| {
                let parked = lane.parked();
                let mut value = serde_json::to_value(&lane).unwrap_or_default();
                value["parked"] = json!(parked);
                value
            })
            .collect(),
    ))
}

/// `POST /compensation/failures/{id}/skip`: an operator gives up on the record (SPEC DS-5):
/// it is never retried, its stream counts as handled by its consumer, and the consumer's
/// streams of the aggregate parked behind it run in order. Recorded on the record (who,
/// when) and in the audit log (which stream).
pub(crate) async fn skip(
    State(state): State<HttpState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<ExecutionFailed>, ApiError> {
    let scope = Scope::of_operator(&state, &headers)?;
    scope.record(&id).await?;
    let by = operator_name(&headers);
    let record = scope
        .scheduler
        .skip(&id, &by)
        .await
        .map_err(|error| retry_failed(error, &id))?;
    tracing::info!(
        target: "wow::audit",
        action = "compensation.skip",
        operator = %by,
        id = %record.id,
        consumer = %record.consumer,
        aggregate = %record.aggregate_id,
        version = record.version,
        stream = %record.stream_id,
        at = record.updated_at,
        "an operator skipped a failed stream"
    );
    Ok(Json(record))
}

/// The operator who acts, as a record names them: `operator:` and their token's fingerprint,
/// or `operator` when auth is off.
pub(crate) fn operator_name(headers: &HeaderMap) -> String {
    crate::operator::token_fingerprint(headers).map_or_else(
        || "operator".to_owned(),
        |print| format!("operator:{print}"),
    )
}

/// `body` read strictly as JSON of shape `T` (a repeated key, an unknown field, a missing or
/// mistyped one: 400 `BadRequest`, saying what).
pub(crate) fn read_body<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let body = body.map_err(|rejection| ApiError::bad_request(rejection.body_text()))?;
    let value = serde_json::from_slice::<crate::strict_json::StrictValue>(&body)
        .map_err(|error| ApiError::bad_request(format!("the body is not valid JSON: {error}")))?;
    serde_json::from_value(value.0)
        .map_err(|error| ApiError::bad_request(format!("the body does not read: {error}")))
}

/// `PUT /compensation/failures/{id}/retry-spec` with
/// `{"maxAttempts": n, "initialBackoffMs": ms, "maxBackoffMs": ms}`: an operator gives the
/// record its own retry spec, which its next retries follow instead of the service's; the
/// record is judged by it at once (see [`wow_core::compensation::edited`]: a limit already
/// reached makes it `EXHAUSTED`, a higher one retries an `EXHAUSTED` one again). Recorded on
/// the record (`updatedBy`, `updatedAt`) and in the audit log. A bad body is 400 `BadRequest`
/// (`maxAttempts` at least 1, `initialBackoffMs` at most `maxBackoffMs`), an unknown record
/// 404.
pub(crate) async fn edit_retry_spec(
    State(state): State<HttpState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ExecutionFailed>, ApiError> {
    let scope = Scope::of_operator(&state, &headers)?;
    let spec = RetrySpec::from(read_body::<RetrySpecJson>(body)?);
    if let Some(why) = spec.invalid() {
        return Err(ApiError::bad_request(why));
    }
    let (before, record, by) = edited(&scope, &headers, &id, RecordEdit::RetrySpec(spec)).await?;
    tracing::info!(
        target: "wow::audit",
        action = "compensation.retry_spec",
        operator = %by,
        id = %record.id,
        consumer = %record.consumer,
        aggregate = %record.aggregate_id,
        version = record.version,
        max_attempts = spec.max_attempts,
        initial_backoff_ms = spec.initial_backoff_ms,
        max_backoff_ms = spec.max_backoff_ms,
        status_before = before.status.as_str(),
        status = record.status.as_str(),
        at = record.updated_at,
        "an operator set a failed execution's retry spec"
    );
    Ok(Json(record))
}

/// Makes `edit` to the record `id` as the operator the request's token names: the record
/// before, the record after, and who edited it; 404 for an unknown record.
async fn edited(
    scope: &Scope,
    headers: &HeaderMap,
    id: &str,
    edit: RecordEdit,
) -> Result<(ExecutionFailed, ExecutionFailed, String), ApiError> {
    let before = scope.record(id).await?;
    let by = operator_name(headers);
    let record = scope
        .scheduler
        .edit(id, &edit, &by)
        .await
        .map_err(|error| retry_failed(error, id))?;
    Ok((before, record, by))
}

/// The body of `PUT /compensation/failures/{id}/recoverable`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecoverableBody {
    recoverable: RecoverableType,
}

/// `PUT /compensation/failures/{id}/recoverable` with
/// `{"recoverable": "RECOVERABLE" | "UNRECOVERABLE" | "UNKNOWN"}`: an operator judges whether
/// a retry of the record can succeed (Wow's `RecoverableType`). The scheduler does not retry
/// an `UNRECOVERABLE` record by itself (`POST .../retry` still runs it); marked otherwise, it
/// is due again at its retry time. Nothing else of the record changes. Recorded on the record
/// (`updatedBy`, `updatedAt`) and in the audit log. A bad body is 400 `BadRequest`, an unknown
/// record 404.
pub(crate) async fn edit_recoverable(
    State(state): State<HttpState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ExecutionFailed>, ApiError> {
    let scope = Scope::of_operator(&state, &headers)?;
    let RecoverableBody { recoverable } = read_body(body)?;
    let (before, record, by) =
        edited(&scope, &headers, &id, RecordEdit::Recoverable(recoverable)).await?;
    tracing::info!(
        target: "wow::audit",
        action = "compensation.recoverable",
        operator = %by,
        id = %record.id,
        consumer = %record.consumer,
        aggregate = %record.aggregate_id,
        version = record.version,
        recoverable_before = before.recoverable.as_str(),
        recoverable = record.recoverable.as_str(),
        at = record.updated_at,
        "an operator judged whether a failed execution can recover"
    );
    Ok(Json(record))
}

/// Why a retry did not run: the record is gone (404), a store failed (503), or the record
/// cannot be retried now (409 `IllegalState`).
fn retry_failed(error: CompensationError, id: &str) -> ApiError {
    match error {
        CompensationError::NotFound(_) => no_record(id),
        CompensationError::Store(failure) => store_failed(&failure),
        CompensationError::EventStore(failure) => store_failed(&failure),
        other => ApiError::new(
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
    scope: Scope,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = scope.record(&id).await?;
    let streams = state
        .store()
        .load(&record.aggregate_id, record.version, record.version)
        .await
        .map_err(|failure| store_failed(&failure))?;
    let runtime = state.registry().find(&record.aggregate_id.aggregate_name);
    let events: Vec<Value> = streams
        .iter()
        .map(|stream| match &runtime {
            // Today's shapes where the aggregate is known; as stored otherwise.
            Ok(runtime) => crate::queries::today(runtime.as_ref(), stream)
                .unwrap_or_else(|_| serde_json::to_value(stream).unwrap_or_default()),
            Err(_) => serde_json::to_value(stream).unwrap_or_default(),
        })
        .collect();
    Ok(Json(json!({"failure": record, "events": events})))
}
