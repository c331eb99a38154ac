//! Wow's query routes, in Wow's query DSL and answer shapes (a document, `[documents]`,
//! `{total, list}`, a bare count), over the caller's tenant:
//! `POST /{aggregate}/snapshot/{single,list,paged,count}` and their `/state` variants over the
//! materialized snapshots, and `POST /{aggregate}/event/{list,paged,count}` over history.
//!
//! Each route takes a [`DslQuery`] (the `read` module) and answers as the `answer` module
//! writes it.

mod answer;
mod read;

use std::future::Future;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use serde_json::{json, Value};
use wow_core::aggregate::AggregateRuntime;
use wow_core::id::{Clock, SystemClock};
use wow_core::query::{
    project, Condition, DocumentQuery, Filter, ListQuery, Lowering, Operator, PagedList,
    PagedQuery, Projection, QueryBody, SingleQuery, Target,
};
use wow_core::view::{ViewKey, ViewRow, ViewStore};
use wow_core::{DomainEventStream, NamedAggregate};
use wow_runtime::view::snapshot_view;

use crate::error::ApiError;
use crate::fresh;
use crate::reads::ReadPlace;
use crate::state::HttpState;
use answer::{events_failed, illegal, ok, view_failed, Shape, Streamed};
pub(crate) use answer::{Answer, Documents, States};
use read::DslQuery;

/// `POST /{aggregate}/snapshot/count`: the bare condition in, a bare number out.
pub(crate) async fn count(
    State(state): State<HttpState>,
    read: ReadPlace,
    query: DslQuery<Condition>,
) -> Result<Response, ApiError> {
    let snapshots = Snapshots::of(&state, &query)?;
    let filter = lowering()
        .lower(&active_only(query.query.clone()))
        .map_err(illegal)?;
    if let Err(answer) = snapshots.fresh(&state, &query).await {
        return Ok(answer);
    }
    let total = read.within(snapshots.count(&query.tenant, &filter)).await?;
    Ok(ok(json!(total)))
}

/// `POST /{aggregate}/snapshot/single` (and `/state`): the first matching document (or its
/// state), or 404.
pub(crate) async fn single<A: Answer>(
    State(state): State<HttpState>,
    read: ReadPlace,
    mut query: DslQuery<SingleQuery>,
) -> Result<Response, ApiError> {
    let shape = A::SHAPE;
    let snapshots = Snapshots::of(&state, &query)?;
    let lowered = snapshot_lowered(&mut query.query)?;
    if let Err(answer) = snapshots.fresh(&state, &query).await {
        return Ok(answer);
    }
    let rows = read.within(snapshots.rows(&query.tenant, &lowered)).await?;
    let row = rows
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::not_found("Not found resource!"))?;
    let projection = query.query.projection;
    let document = read
        .shaped(move |_| Ok(answer::document(row.state, &projection, shape)))
        .await?;
    Ok(ok(document))
}

/// `POST /{aggregate}/snapshot/list` (and `/state`): up to `limit` documents (or their
/// states).
pub(crate) async fn list<A: Answer>(
    State(state): State<HttpState>,
    streamed: Streamed,
    read: ReadPlace,
    mut query: DslQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let snapshots = Snapshots::of(&state, &query)?;
    let lowered = snapshot_lowered(&mut query.query)?;
    if let Err(answer) = snapshots.fresh(&state, &query).await {
        return Ok(answer);
    }
    let rows = read.within(snapshots.rows(&query.tenant, &lowered)).await?;
    let list = documents(&read, rows, query.query.projection, A::SHAPE).await?;
    Ok(answer::list(streamed, list))
}

/// `POST /{aggregate}/snapshot/paged` (and `/state`): `{total, list}` of documents (or of
/// their states).
pub(crate) async fn paged<A: Answer>(
    State(state): State<HttpState>,
    read: ReadPlace,
    mut query: DslQuery<PagedQuery>,
) -> Result<Response, ApiError> {
    let snapshots = Snapshots::of(&state, &query)?;
    let lowered = snapshot_lowered(&mut query.query)?;
    if let Err(answer) = snapshots.fresh(&state, &query).await {
        return Ok(answer);
    }
    let (total, rows) = read
        .within(counted(
            snapshots.count(&query.tenant, &lowered.filter),
            snapshots.rows(&query.tenant, &lowered),
        ))
        .await?;
    let list = documents(&read, rows, query.query.projection, A::SHAPE).await?;
    Ok(paged_answer(total, list))
}

/// `POST /{aggregate}/event/list`: up to `limit` streams.
pub(crate) async fn list_events(
    State(state): State<HttpState>,
    streamed: Streamed,
    read: ReadPlace,
    mut query: DslQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let lowered = event_lowered(&mut query.query)?;
    let streams = Streams::of(&state, &query);
    let found = read.within(streams.rows(&query.tenant, &lowered)).await?;
    let list = streams_answer(&read, query.runtime, found, query.query.projection).await?;
    Ok(answer::list(streamed, list))
}

/// `POST /{aggregate}/event/paged`: `{total, list}` of streams.
pub(crate) async fn paged_events(
    State(state): State<HttpState>,
    read: ReadPlace,
    mut query: DslQuery<PagedQuery>,
) -> Result<Response, ApiError> {
    let lowered = event_lowered(&mut query.query)?;
    let streams = Streams::of(&state, &query);
    let (total, found) = read
        .within(counted(
            streams.count(&query.tenant, &lowered.filter),
            streams.rows(&query.tenant, &lowered),
        ))
        .await?;
    let list = streams_answer(&read, query.runtime, found, query.query.projection).await?;
    Ok(paged_answer(total, list))
}

/// `POST /{aggregate}/event/count`: the bare condition in, a bare number out.
pub(crate) async fn count_events(
    State(state): State<HttpState>,
    read: ReadPlace,
    query: DslQuery<Condition>,
) -> Result<Response, ApiError> {
    let filter = event_lowering().lower(&query.query).map_err(illegal)?;
    let streams = Streams::of(&state, &query);
    let total = read.within(streams.count(&query.tenant, &filter)).await?;
    Ok(ok(json!(total)))
}

/// `{total, list}` as answered, with `Wow-Error-Code: Ok`.
fn paged_answer(total: u64, list: Vec<Value>) -> Response {
    ok(serde_json::to_value(PagedList { total, list }).unwrap_or(Value::Null))
}

/// The rows as answered (projected, shaped), on the read's shaping pool; stopped at the
/// read's deadline.
async fn documents(
    read: &ReadPlace,
    rows: Vec<ViewRow>,
    projection: Projection,
    shape: Shape,
) -> Result<Vec<Value>, ApiError> {
    read.shaped(move |budget| {
        rows.into_iter()
            .map(|row| {
                budget.check()?;
                Ok(answer::document(row.state, &projection, shape))
            })
            .collect()
    })
    .await
}

/// `total`, then `rows`, run one after the other: a page's count and its items.
async fn counted<T>(
    total: impl Future<Output = Result<u64, ApiError>>,
    rows: impl Future<Output = Result<T, ApiError>>,
) -> Result<(u64, T), ApiError> {
    let total = total.await?;
    Ok((total, rows.await?))
}

/// Where a snapshot query reads: the store of the materialized snapshots and the view of the
/// query's aggregate.
struct Snapshots {
    views: Arc<dyn ViewStore>,
    view: String,
}

impl Snapshots {
    /// The snapshots of `query`'s aggregate; 404 when this service keeps none.
    fn of<T>(state: &HttpState, query: &DslQuery<T>) -> Result<Self, ApiError> {
        let views = state.views().cloned().ok_or_else(|| {
            ApiError::not_found(
                "this service keeps no materialized snapshots: start it with snapshot queries on (WOW_SNAPSHOT_QUERIES=true, or snapshot_queries = true in its file)",
            )
        })?;
        let view = snapshot_view(&query.runtime.named_aggregate().aggregate_name);
        Ok(Self { views, view })
    }

    /// Waits until the snapshot of the aggregate `Wow-Fresh-Aggregate` names includes what
    /// the query's freshness headers name (SPEC DS-6), when they name anything: `Err` with
    /// the answer to give instead (400 without the aggregate, 408 `ViewNotFresh`, 503).
    async fn fresh<T>(&self, state: &HttpState, query: &DslQuery<T>) -> Result<(), Response> {
        let Some(freshness) = &query.freshness else {
            return Ok(());
        };
        let named = query.runtime.named_aggregate();
        let id = match freshness.aggregate.as_deref() {
            Some(id) => id
                .strip_prefix(&format!("{}/", named.aggregate_name))
                .unwrap_or(id),
            None => {
                return Err(fresh::error_answer(
                    axum::http::StatusCode::BAD_REQUEST,
                    "BadRequest",
                    format!(
                    "a fresh query names the aggregate whose append it must include: {}: {{id}}",
                    fresh::FRESH_AGGREGATE
                ),
                ))
            }
        };
        let aggregate = named.aggregate_id(id, query.tenant.as_str());
        let key = ViewKey::new(self.view.as_str(), query.tenant.as_str(), id);
        let read = || {
            let (views, key) = (self.views.clone(), key.clone());
            async move {
                match views.load(&key).await {
                    Ok(row) => Ok(row.map(|row| ((), row.version))),
                    Err(failure) => Err(fresh::error_answer(
                        axum::http::StatusCode::SERVICE_UNAVAILABLE,
                        "ServiceUnavailable",
                        format!("the snapshots cannot be read: {failure}"),
                    )),
                }
            }
        };
        match fresh::read_fresh(
            state.store(),
            &aggregate,
            freshness,
            fresh::error_answer,
            read,
        )
        .await
        {
            Ok(_) => Ok(()),
            Err(Ok(behind)) => Err(fresh::not_fresh(&self.view, id, &behind)),
            Err(Err(failure)) => Err(failure),
        }
    }

    /// The documents in `tenant` that `query` selects.
    async fn rows(&self, tenant: &str, query: &DocumentQuery) -> Result<Vec<ViewRow>, ApiError> {
        self.views
            .query(&self.view, tenant, query)
            .await
            .map_err(view_failed)
    }

    /// How many documents in `tenant` match `filter`.
    async fn count(&self, tenant: &str, filter: &Filter) -> Result<u64, ApiError> {
        self.views
            .count(&self.view, tenant, filter)
            .await
            .map_err(view_failed)
    }
}

/// Where an event stream query reads: the event store's streams of the query's aggregate.
struct Streams<'a> {
    state: &'a HttpState,
    named: NamedAggregate,
}

impl<'a> Streams<'a> {
    /// The streams of `query`'s aggregate.
    fn of<T>(state: &'a HttpState, query: &DslQuery<T>) -> Self {
        let named = query.runtime.named_aggregate().clone();
        Self { state, named }
    }

    /// The streams in `tenant` that `query` selects.
    async fn rows(
        &self,
        tenant: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<DomainEventStream>, ApiError> {
        self.state
            .store()
            .query_streams(
                wow_core::eventsourcing::TenantStreams::new(&self.named, tenant),
                query,
            )
            .await
            .map_err(events_failed)
    }

    /// How many streams in `tenant` match `filter`.
    async fn count(&self, tenant: &str, filter: &Filter) -> Result<u64, ApiError> {
        self.state
            .store()
            .count_streams(
                wow_core::eventsourcing::TenantStreams::new(&self.named, tenant),
                filter,
            )
            .await
            .map_err(events_failed)
    }
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
    // Imposed: the guard counts against none of the caller's query limits.
    let active = Condition::of(Operator::Deleted, "", "ACTIVE").imposed();
    if condition.operator == Operator::All {
        return active;
    }
    Condition::logical(Operator::And, vec![active, condition]).imposed()
}

/// The most field paths one projection may name in `include`, and again in `exclude`.
pub(crate) const MAX_PROJECTION_PATHS: usize = 64;

/// Checks each path of `projection`; an answer's shape must never change silently. Each list
/// holds at most [`MAX_PROJECTION_PATHS`]: shaping an answer costs paths × documents.
fn checked_projection(projection: &Projection) -> Result<(), ApiError> {
    for (list, paths) in [
        ("include", &projection.include),
        ("exclude", &projection.exclude),
    ] {
        if paths.len() > MAX_PROJECTION_PATHS {
            return Err(illegal(format!(
                "a projection's `{list}` names at most {MAX_PROJECTION_PATHS} field paths, not {}",
                paths.len()
            )));
        }
    }
    for path in projection.include.iter().chain(&projection.exclude) {
        if path.is_empty() {
            return Err(illegal("a projection's field path is empty"));
        }
        wow_core::query::FieldPath::parse(path).map_err(illegal)?;
    }
    Ok(())
}

/// How a snapshot query is lowered: over the snapshots' documents, at this moment.
fn lowering() -> Lowering {
    Lowering::new(Target::Snapshot, SystemClock.now_millis())
}

/// How an event stream query is lowered: over the streams' documents, at this moment.
fn event_lowering() -> Lowering {
    Lowering::new(Target::EventStream, SystemClock.now_millis())
}

/// A snapshot query, checked, guarded by [`active_only`] and lowered to what the store runs.
fn snapshot_lowered<Q: QueryBody>(query: &mut Q) -> Result<DocumentQuery, ApiError> {
    checked_projection(query.projection())?;
    let condition = std::mem::take(query.condition_mut());
    *query.condition_mut() = active_only(condition);
    query.lower(&lowering()).map_err(illegal)
}

/// An event stream query, checked and lowered to what the store runs.
fn event_lowered<Q: QueryBody>(query: &mut Q) -> Result<DocumentQuery, ApiError> {
    checked_projection(query.projection())?;
    query.lower(&event_lowering()).map_err(illegal)
}

/// The streams as answered: today's shapes (as the history route shows them), projected, on
/// the read's shaping pool; stopped at the read's deadline.
async fn streams_answer(
    read: &ReadPlace,
    runtime: Arc<dyn AggregateRuntime>,
    streams: Vec<DomainEventStream>,
    projection: Projection,
) -> Result<Vec<Value>, ApiError> {
    read.shaped(move |budget| {
        streams
            .iter()
            .map(|stream| {
                budget.check()?;
                crate::queries::today(runtime.as_ref(), stream)
                    .map(|json| project(&projection, json))
                    .map_err(|e| {
                        ApiError::new(
                            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                            e.error_code(),
                            e.to_string(),
                        )
                    })
            })
            .collect()
    })
    .await
}
