//! Wow's query routes, in Wow's query DSL and answer shapes (a document, `[documents]`,
//! `{total, list}`, a bare count), over the caller's tenant:
//! `POST /{aggregate}/snapshot/{single,list,paged,count}` and their `/state` variants over the
//! materialized snapshots, and `POST /{aggregate}/event/{list,paged,count}` over history.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::sync::Arc;
use wow_core::id::{Clock, SystemClock};
use wow_core::query::{
    project, Condition, DocumentQuery, ListQuery, Lowering, Operator, PagedList, PagedQuery,
    Projection, QueryBody, SingleQuery, Target,
};

use wow_core::aggregate::AggregateRuntime;
use wow_core::eventsourcing::EventStoreError;
use wow_core::query::QueryRefusal;
use wow_core::view::{snapshot_view, ViewStore, ViewStoreError};

use crate::{auth, HttpState};

/// Which answer a query route gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Whole documents.
    Snapshot,
    /// Only each document's `state`.
    State,
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let mut response = (
        status,
        Json(json!({"errorCode": code, "errorMsg": message.into(), "succeeded": false})),
    )
        .into_response();
    if let Ok(value) = code.parse() {
        response
            .headers_mut()
            .insert(crate::ERROR_CODE_HEADER, value);
    }
    response
}

/// A list answered as JSON, or, when the caller accepts `text/event-stream` (Wow's clients'
/// `listStream`), as server-sent events: one `data:` event per item, in order, with
/// `Wow-Error-Code: Ok`, as Wow streams a list.
fn list_answer(headers: &HeaderMap, items: Vec<Value>) -> Response {
    let streamed = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|accept| accept.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"));
    if !streamed {
        return ok(Value::Array(items));
    }
    let events = futures::stream::iter(items.into_iter().map(|item| {
        Ok::<_, std::convert::Infallible>(
            axum::response::sse::Event::default().data(item.to_string()),
        )
    }));
    let mut response = axum::response::sse::Sse::new(events).into_response();
    response.headers_mut().insert(
        crate::ERROR_CODE_HEADER,
        axum::http::HeaderValue::from_static("Ok"),
    );
    response
}

fn ok(body: Value) -> Response {
    let mut response = Json(body).into_response();
    response.headers_mut().insert(
        crate::ERROR_CODE_HEADER,
        axum::http::HeaderValue::from_static("Ok"),
    );
    response
}

fn illegal(message: impl std::fmt::Display) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "IllegalArgument",
        message.to_string(),
    )
}

fn store_failed(failure: ViewStoreError) -> Response {
    match failure {
        ViewStoreError::IllegalArgument(message) => illegal(message),
        ViewStoreError::QueryRefused(refusal) => refused(&refusal),
        ViewStoreError::Unavailable(e) => unavailable(&e),
        other => internal(&other),
    }
}

/// A query the store would not run within its bounds: 503 `QueryTimeout` or 429
/// `TooManyRequests` (with `Retry-After`).
fn refused(refusal: &QueryRefusal) -> Response {
    let code = refusal.error_code();
    let mut response = error(crate::status_for(&code), code.as_str(), refusal.to_string());
    if matches!(refusal, QueryRefusal::Busy(_)) {
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("1"),
        );
    }
    response
}

/// 503 `ServiceUnavailable`; what the store said is logged, never answered (it may hold SQL
/// or addresses).
fn unavailable(failure: &dyn std::fmt::Display) -> Response {
    tracing::warn!(error = %failure, "a query found its store unavailable");
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        "the store is unavailable; try again shortly",
    )
}

/// 500 `InternalServerError`; what the store said is logged, never answered.
fn internal(failure: &dyn std::fmt::Display) -> Response {
    tracing::error!(error = %failure, "a query failed in its store");
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalServerError",
        "the query failed in the store; the server's log has the details",
    )
}

/// The view, tenant and store of a query of `aggregate`, and its body as `T`; `Err` is the
/// answer to give.
async fn prepare<T: DeserializeOwned + Narrow>(
    state: &HttpState,
    headers: &HeaderMap,
    aggregate: &str,
    body: Body,
) -> Result<(String, String, std::sync::Arc<dyn ViewStore>, T), Response> {
    let (runtime, tenant, query) = read_query::<T>(state, headers, aggregate, body).await?;
    let Some(views) = state.views().cloned() else {
        return Err(error(
            StatusCode::NOT_FOUND,
            "NotFound",
            "this service keeps no materialized snapshots: start it with snapshot queries on (WOW_SNAPSHOT_QUERIES=true, or snapshot_queries = true in its file)",
        ));
    };
    let view = snapshot_view(&runtime.named_aggregate().aggregate_name);
    Ok((view, tenant, views, query))
}

/// What a query's documents can be narrowed by: its condition.
trait Narrow {
    /// Whether the body is a bare condition (a count) rather than a query.
    const BARE: bool = false;

    fn condition_of(&mut self) -> &mut Condition;
}

impl Narrow for Condition {
    const BARE: bool = true;

    fn condition_of(&mut self) -> &mut Condition {
        self
    }
}

/// Where a query's parts must be objects (or an array of objects), as the document says.
/// serde reads a struct from a JSON array too (its fields in order), so `{"projection":
/// [[], []]}` would pass as a projection: the shape is checked first.
fn check_parts(value: &Value, bare: bool) -> Result<(), String> {
    fn condition(value: &Value, at: &str) -> Result<(), String> {
        let Some(object) = value.as_object() else {
            return Err(format!("{at}: must be an object (a condition)"));
        };
        if let Some(options) = object.get("options") {
            if !options.is_object() && !options.is_null() {
                return Err(format!("{at}.options: must be an object"));
            }
        }
        match object.get("children") {
            None | Some(Value::Null) => Ok(()),
            Some(Value::Array(children)) => children
                .iter()
                .enumerate()
                .try_for_each(|(i, child)| condition(child, &format!("{at}.children[{i}]"))),
            Some(_) => Err(format!("{at}.children: must be an array of conditions")),
        }
    }
    if bare {
        return condition(value, "body");
    }
    for part in ["projection", "pagination"] {
        match value.get(part) {
            None | Some(Value::Null) | Some(Value::Object(_)) => {}
            Some(_) => return Err(format!("body.{part}: must be an object")),
        }
    }
    if let Some(sort) = value.get("sort").filter(|sort| !sort.is_null()) {
        let objects = sort
            .as_array()
            .is_some_and(|items| items.iter().all(Value::is_object));
        if !objects {
            return Err("body.sort: must be an array of objects".to_owned());
        }
    }
    match value.get("condition") {
        None | Some(Value::Null) => Ok(()),
        Some(found) => condition(found, "body.condition"),
    }
}

macro_rules! narrow_query {
    ($($body:ty),*) => {$(
        impl Narrow for $body {
            fn condition_of(&mut self) -> &mut Condition {
                self.condition_mut()
            }
        }
    )*};
}

narrow_query!(SingleQuery, ListQuery, PagedQuery);

/// The aggregate's runtime, the caller's tenant and the body as `T`, narrowed to the owner
/// the request names (its token's; else `/owner/{ownerId}/` or `Command-Owner-Id`) and to its
/// token's space, as Wow rewrites a query's condition; `Err` is the answer.
async fn read_query<T: DeserializeOwned + Narrow>(
    state: &HttpState,
    headers: &HeaderMap,
    aggregate: &str,
    body: Body,
) -> Result<(Arc<dyn AggregateRuntime>, String, T), Response> {
    let caller = auth::caller(state.config(), headers).map_err(auth::Refused::response)?;
    let runtime = state
        .registry()
        .find(aggregate)
        .map_err(|unknown| error(StatusCode::NOT_FOUND, "NotFound", unknown.to_string()))?;
    let runtime = runtime.clone();
    let value = crate::input::query_body(body, state.config().body_limit)
        .await
        .map_err(|e| error(e.status(), "BadRequest", e.to_string()))?;
    if !value.is_object() {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "body: must be a JSON object (a query, or a condition for count)",
        ));
    }
    check_parts(&value, T::BARE).map_err(|e| error(StatusCode::BAD_REQUEST, "BadRequest", e))?;
    let query = serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let at = e.path().to_string();
        error(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!("body.{at}: {}", e.into_inner()),
        )
    })?;
    let mut query = query;
    let named = crate::input::owned_id(headers, wow_core::command::headers::OWNER_ID)
        .map_err(|e| error(StatusCode::BAD_REQUEST, "IllegalArgument", e.message))?;
    // SPEC TN-2: a bound caller sees only its owner's (and space's) documents, whatever the
    // condition says; the token's owner wins over the header (which may only repeat it).
    // An aggregate in no space is in every space of its owner (as the command side decides).
    let narrowing = [
        caller
            .owner
            .or(named)
            .map(|owner| Condition::of(Operator::OwnerId, "", owner)),
        caller.space.map(|space| {
            Condition::logical(
                Operator::Or,
                vec![
                    Condition::of(Operator::SpaceId, "", space),
                    Condition::of(Operator::SpaceId, "", ""),
                ],
            )
        }),
    ];
    for owned in narrowing.into_iter().flatten() {
        let condition = std::mem::take(query.condition_of());
        *query.condition_of() = if condition.operator == Operator::All {
            owned
        } else {
            Condition::logical(Operator::And, vec![owned, condition])
        };
    }
    Ok((runtime, caller.tenant, query))
}

/// Wow's guard: snapshot queries see aggregates that are not deleted, unless the condition
/// names `DELETED` at its top or directly under a top `AND`.
fn active_only(condition: Condition) -> Condition {
    let names_deleted = condition.operator == Operator::Deleted
        || (condition.operator == Operator::And
            && condition
                .children
                .iter()
                .any(|child| child.operator == Operator::Deleted));
    if names_deleted {
        return condition;
    }
    let active = Condition::of(Operator::Deleted, "", "ACTIVE");
    if condition.operator == Operator::All {
        return active;
    }
    Condition::logical(Operator::And, vec![active, condition])
}

/// Checks each path of `projection`; an answer's shape must never change silently.
#[allow(clippy::result_large_err)] // the error is the response itself, built once
fn checked_projection(projection: &Projection) -> Result<(), Response> {
    for path in projection.include.iter().chain(&projection.exclude) {
        if path.is_empty() {
            return Err(illegal("a projection's field path is empty"));
        }
        wow_core::query::FieldPath::parse(path).map_err(illegal)?;
    }
    Ok(())
}

fn lowering() -> Lowering {
    Lowering::new(Target::Snapshot, SystemClock.now_millis())
}

/// A stored document as answered: the projection applied, and only `state` for `/state`.
fn answer(document: Value, projection: &Projection, shape: Shape) -> Value {
    let mut document = document;
    if let Some(object) = document.as_object_mut() {
        object.remove("stateVersion");
    }
    match shape {
        Shape::Snapshot => project(projection, document),
        Shape::State => project(
            projection,
            document.get("state").cloned().unwrap_or(Value::Null),
        ),
    }
}

/// A snapshot query of `aggregate`, read, checked and lowered: the view, the tenant, the
/// store, the body and what the store runs; `Err` is the answer to give.
#[allow(clippy::type_complexity)]
async fn snapshot_query<Q: QueryBody + DeserializeOwned + Narrow>(
    state: &HttpState,
    headers: &HeaderMap,
    aggregate: &str,
    body: Body,
) -> Result<(String, String, Arc<dyn ViewStore>, Q, DocumentQuery), Response> {
    let (view, tenant, views, mut query) = prepare::<Q>(state, headers, aggregate, body).await?;
    checked_projection(query.projection())?;
    let condition = std::mem::take(query.condition_mut());
    *query.condition_mut() = active_only(condition);
    let lowered = query.lower(&lowering()).map_err(illegal)?;
    Ok((view, tenant, views, query, lowered))
}

async fn single(
    state: HttpState,
    headers: HeaderMap,
    aggregate: String,
    body: Body,
    shape: Shape,
) -> Response {
    let (view, tenant, views, query, lowered) =
        match snapshot_query::<SingleQuery>(&state, &headers, &aggregate, body).await {
            Ok(prepared) => prepared,
            Err(response) => return response,
        };
    match views.query(&view, &tenant, &lowered).await {
        Ok(rows) => match rows.into_iter().next() {
            Some(row) => ok(answer(row.state, &query.projection, shape)),
            None => error(StatusCode::NOT_FOUND, "NotFound", "Not found resource!"),
        },
        Err(e) => store_failed(e),
    }
}

async fn list(
    state: HttpState,
    headers: HeaderMap,
    aggregate: String,
    body: Body,
    shape: Shape,
) -> Response {
    let (view, tenant, views, query, lowered) =
        match snapshot_query::<ListQuery>(&state, &headers, &aggregate, body).await {
            Ok(prepared) => prepared,
            Err(response) => return response,
        };
    match views.query(&view, &tenant, &lowered).await {
        Ok(rows) => list_answer(
            &headers,
            rows.into_iter()
                .map(|row| answer(row.state, &query.projection, shape))
                .collect(),
        ),
        Err(e) => store_failed(e),
    }
}

async fn paged(
    state: HttpState,
    headers: HeaderMap,
    aggregate: String,
    body: Body,
    shape: Shape,
) -> Response {
    let (view, tenant, views, query, lowered) =
        match snapshot_query::<PagedQuery>(&state, &headers, &aggregate, body).await {
            Ok(prepared) => prepared,
            Err(response) => return response,
        };
    let total = match views.count(&view, &tenant, &lowered.filter).await {
        Ok(total) => total,
        Err(e) => return store_failed(e),
    };
    match views.query(&view, &tenant, &lowered).await {
        Ok(rows) => {
            let page = PagedList {
                total,
                list: rows
                    .into_iter()
                    .map(|row| answer(row.state, &query.projection, shape))
                    .collect(),
            };
            ok(serde_json::to_value(page).unwrap_or(Value::Null))
        }
        Err(e) => store_failed(e),
    }
}

/// `POST /{aggregate}/snapshot/count`: the bare condition in, a bare number out.
pub(crate) async fn count(
    State(state): State<HttpState>,
    Path(aggregate): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (view, tenant, views, condition) =
        match prepare::<Condition>(&state, &headers, &aggregate, body).await {
            Ok(prepared) => prepared,
            Err(response) => return response,
        };
    let filter = match lowering().lower(&active_only(condition)) {
        Ok(filter) => filter,
        Err(e) => return illegal(e),
    };
    match views.count(&view, &tenant, &filter).await {
        Ok(total) => ok(json!(total)),
        Err(e) => store_failed(e),
    }
}

macro_rules! route {
    ($name:ident, $run:ident, $shape:expr, $doc:literal) => {
        #[doc = $doc]
        pub(crate) async fn $name(
            State(state): State<HttpState>,
            Path(aggregate): Path<String>,
            headers: HeaderMap,
            body: Body,
        ) -> Response {
            $run(state, headers, aggregate, body, $shape).await
        }
    };
}

route!(
    single_snapshot,
    single,
    Shape::Snapshot,
    "`POST /{aggregate}/snapshot/single`: the first matching document, or 404."
);
route!(
    single_state,
    single,
    Shape::State,
    "`POST /{aggregate}/snapshot/single/state`: its state, or 404."
);
route!(
    list_snapshots,
    list,
    Shape::Snapshot,
    "`POST /{aggregate}/snapshot/list`: up to `limit` documents."
);
route!(
    list_states,
    list,
    Shape::State,
    "`POST /{aggregate}/snapshot/list/state`: their states."
);
route!(
    paged_snapshots,
    paged,
    Shape::Snapshot,
    "`POST /{aggregate}/snapshot/paged`: `{total, list}` of documents."
);
route!(
    paged_states,
    paged,
    Shape::State,
    "`POST /{aggregate}/snapshot/paged/state`: `{total, list}` of states."
);

fn events_failed(failure: EventStoreError) -> Response {
    match failure {
        EventStoreError::IllegalArgument(message) => illegal(message),
        EventStoreError::QueryRefused(refusal) => refused(&refusal),
        EventStoreError::Unavailable(e) => unavailable(&e),
        other => internal(&other),
    }
}

fn event_lowering() -> Lowering {
    Lowering::new(Target::EventStream, SystemClock.now_millis())
}

/// An event stream query of `aggregate`, read, checked and lowered; `Err` is the answer.
#[allow(clippy::type_complexity)]
async fn event_query<Q: QueryBody + DeserializeOwned + Narrow>(
    state: &HttpState,
    headers: &HeaderMap,
    aggregate: &str,
    body: Body,
) -> Result<(Arc<dyn AggregateRuntime>, String, Q, DocumentQuery), Response> {
    let (runtime, tenant, query) = read_query::<Q>(state, headers, aggregate, body).await?;
    checked_projection(query.projection())?;
    let lowered = query.lower(&event_lowering()).map_err(illegal)?;
    Ok((runtime, tenant, query, lowered))
}

/// The streams as answered: today's shapes (as the history route shows them), projected.
#[allow(clippy::result_large_err)] // the error is the response itself, built once
fn streams_answer(
    runtime: &dyn AggregateRuntime,
    streams: Vec<wow_core::DomainEventStream>,
    projection: &Projection,
) -> Result<Vec<Value>, Response> {
    streams
        .iter()
        .map(|stream| {
            crate::queries::today(runtime, stream)
                .map(|json| project(projection, json))
                .map_err(|e| {
                    error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        &e.error_code().to_string(),
                        e.to_string(),
                    )
                })
        })
        .collect()
}

/// `POST /{aggregate}/event/list`: up to `limit` streams.
pub(crate) async fn list_events(
    State(state): State<HttpState>,
    Path(aggregate): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (runtime, tenant, query, lowered) =
        match event_query::<ListQuery>(&state, &headers, &aggregate, body).await {
            Ok(read) => read,
            Err(response) => return response,
        };
    let named = runtime.named_aggregate().clone();
    match state.store().query_streams(&named, &tenant, &lowered).await {
        Ok(streams) => match streams_answer(runtime.as_ref(), streams, &query.projection) {
            Ok(list) => list_answer(&headers, list),
            Err(response) => response,
        },
        Err(e) => events_failed(e),
    }
}

/// `POST /{aggregate}/event/paged`: `{total, list}` of streams.
pub(crate) async fn paged_events(
    State(state): State<HttpState>,
    Path(aggregate): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (runtime, tenant, query, lowered) =
        match event_query::<PagedQuery>(&state, &headers, &aggregate, body).await {
            Ok(read) => read,
            Err(response) => return response,
        };
    let named = runtime.named_aggregate().clone();
    let total = match state
        .store()
        .count_streams(&named, &tenant, &lowered.filter)
        .await
    {
        Ok(total) => total,
        Err(e) => return events_failed(e),
    };
    match state.store().query_streams(&named, &tenant, &lowered).await {
        Ok(streams) => match streams_answer(runtime.as_ref(), streams, &query.projection) {
            Ok(list) => ok(serde_json::to_value(PagedList { total, list }).unwrap_or(Value::Null)),
            Err(response) => response,
        },
        Err(e) => events_failed(e),
    }
}

/// `POST /{aggregate}/event/count`: the bare condition in, a bare number out.
pub(crate) async fn count_events(
    State(state): State<HttpState>,
    Path(aggregate): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (runtime, tenant, condition) =
        match read_query::<Condition>(&state, &headers, &aggregate, body).await {
            Ok(read) => read,
            Err(response) => return response,
        };
    let filter = match event_lowering().lower(&condition) {
        Ok(filter) => filter,
        Err(e) => return illegal(e),
    };
    let named = runtime.named_aggregate().clone();
    match state.store().count_streams(&named, &tenant, &filter).await {
        Ok(total) => ok(json!(total)),
        Err(e) => events_failed(e),
    }
}
