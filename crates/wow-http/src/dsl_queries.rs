//! Wow's query routes, in Wow's query DSL and answer shapes (a document, `[documents]`,
//! `{total, list}`, a bare count), over the caller's tenant:
//! `POST /{aggregate}/snapshot/{single,list,paged,count}` and their `/state` variants over the
//! materialized snapshots, and `POST /{aggregate}/event/{list,paged,count}` over history.
//!
//! Each route takes a [`DslQuery`] (the `read` module) and answers as the `answer` module
//! writes it.

mod answer;
mod read;

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
use wow_core::view::ViewStore;
use wow_core::{DomainEventStream, NamedAggregate};
use wow_runtime::view::snapshot_view;

use crate::error::ApiError;
use crate::reads::{Budget, ReadPlace};
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
    let (views, view) = snapshots(&state, &query)?;
    let filter = lowering()
        .lower(&active_only(query.query))
        .map_err(illegal)?;
    let total = read
        .within(snapshot_count(
            views.as_ref(),
            &view,
            &query.tenant,
            &filter,
        ))
        .await?;
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
    let (views, view) = snapshots(&state, &query)?;
    let lowered = snapshot_lowered(&mut query.query)?;
    let rows = read
        .within(snapshot_rows(
            views.as_ref(),
            &view,
            &query.tenant,
            &lowered,
        ))
        .await?;
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
    let shape = A::SHAPE;
    let (views, view) = snapshots(&state, &query)?;
    let lowered = snapshot_lowered(&mut query.query)?;
    let rows = read
        .within(snapshot_rows(
            views.as_ref(),
            &view,
            &query.tenant,
            &lowered,
        ))
        .await?;
    let projection = query.query.projection;
    let documents = read
        .shaped(move |budget| documents(rows, &projection, shape, budget))
        .await?;
    Ok(answer::list(streamed, documents))
}

/// The rows as answered, projected; stopped at the read's deadline.
fn documents(
    rows: Vec<wow_core::view::ViewRow>,
    projection: &Projection,
    shape: Shape,
    budget: &Budget,
) -> Result<Vec<Value>, ApiError> {
    rows.into_iter()
        .map(|row| {
            budget.check()?;
            Ok(answer::document(row.state, projection, shape))
        })
        .collect()
}

/// `POST /{aggregate}/snapshot/paged` (and `/state`): `{total, list}` of documents (or of
/// their states).
pub(crate) async fn paged<A: Answer>(
    State(state): State<HttpState>,
    read: ReadPlace,
    mut query: DslQuery<PagedQuery>,
) -> Result<Response, ApiError> {
    let shape = A::SHAPE;
    let (views, view) = snapshots(&state, &query)?;
    let lowered = snapshot_lowered(&mut query.query)?;
    let (total, rows) = read
        .within(async {
            let total =
                snapshot_count(views.as_ref(), &view, &query.tenant, &lowered.filter).await?;
            Ok((
                total,
                snapshot_rows(views.as_ref(), &view, &query.tenant, &lowered).await?,
            ))
        })
        .await?;
    let projection = query.query.projection;
    let list = read
        .shaped(move |budget| documents(rows, &projection, shape, budget))
        .await?;
    let page = PagedList { total, list };
    Ok(ok(serde_json::to_value(page).unwrap_or(Value::Null)))
}

/// `POST /{aggregate}/event/list`: up to `limit` streams.
pub(crate) async fn list_events(
    State(state): State<HttpState>,
    streamed: Streamed,
    read: ReadPlace,
    mut query: DslQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let lowered = event_lowered(&mut query.query)?;
    let named = query.runtime.named_aggregate().clone();
    let streams = read
        .within(event_streams(&state, &named, &query.tenant, &lowered))
        .await?;
    let (runtime, projection) = (query.runtime, query.query.projection);
    let list = read
        .shaped(move |budget| streams_answer(runtime.as_ref(), streams, &projection, budget))
        .await?;
    Ok(answer::list(streamed, list))
}

/// `POST /{aggregate}/event/paged`: `{total, list}` of streams.
pub(crate) async fn paged_events(
    State(state): State<HttpState>,
    read: ReadPlace,
    mut query: DslQuery<PagedQuery>,
) -> Result<Response, ApiError> {
    let lowered = event_lowered(&mut query.query)?;
    let named = query.runtime.named_aggregate().clone();
    let (total, streams) = read
        .within(async {
            let total = stream_count(&state, &named, &query.tenant, &lowered.filter).await?;
            Ok((
                total,
                event_streams(&state, &named, &query.tenant, &lowered).await?,
            ))
        })
        .await?;
    let (runtime, projection) = (query.runtime, query.query.projection);
    let list = read
        .shaped(move |budget| streams_answer(runtime.as_ref(), streams, &projection, budget))
        .await?;
    Ok(ok(
        serde_json::to_value(PagedList { total, list }).unwrap_or(Value::Null)
    ))
}

/// `POST /{aggregate}/event/count`: the bare condition in, a bare number out.
pub(crate) async fn count_events(
    State(state): State<HttpState>,
    read: ReadPlace,
    query: DslQuery<Condition>,
) -> Result<Response, ApiError> {
    let filter = event_lowering().lower(&query.query).map_err(illegal)?;
    let named = query.runtime.named_aggregate().clone();
    let total = read
        .within(stream_count(&state, &named, &query.tenant, &filter))
        .await?;
    Ok(ok(json!(total)))
}

/// The snapshot documents of `view` in `tenant` that `query` selects.
async fn snapshot_rows(
    views: &dyn ViewStore,
    view: &str,
    tenant: &str,
    query: &DocumentQuery,
) -> Result<Vec<wow_core::view::ViewRow>, ApiError> {
    views.query(view, tenant, query).await.map_err(view_failed)
}

/// How many snapshot documents of `view` in `tenant` match `filter`.
async fn snapshot_count(
    views: &dyn ViewStore,
    view: &str,
    tenant: &str,
    filter: &Filter,
) -> Result<u64, ApiError> {
    views.count(view, tenant, filter).await.map_err(view_failed)
}

/// The event streams of `named` in `tenant` that `query` selects.
async fn event_streams(
    state: &HttpState,
    named: &NamedAggregate,
    tenant: &str,
    query: &DocumentQuery,
) -> Result<Vec<DomainEventStream>, ApiError> {
    state
        .store()
        .query_streams(named, tenant, query)
        .await
        .map_err(events_failed)
}

/// How many event streams of `named` in `tenant` match `filter`.
async fn stream_count(
    state: &HttpState,
    named: &NamedAggregate,
    tenant: &str,
    filter: &Filter,
) -> Result<u64, ApiError> {
    state
        .store()
        .count_streams(named, tenant, filter)
        .await
        .map_err(events_failed)
}

/// The store of the materialized snapshots and the view of `query`'s aggregate; 404 when
/// this service keeps none.
fn snapshots<T>(
    state: &HttpState,
    query: &DslQuery<T>,
) -> Result<(Arc<dyn ViewStore>, String), ApiError> {
    let views = state.views().cloned().ok_or_else(|| {
        ApiError::not_found(
            "this service keeps no materialized snapshots: start it with snapshot queries on (WOW_SNAPSHOT_QUERIES=true, or snapshot_queries = true in its file)",
        )
    })?;
    let view = snapshot_view(&query.runtime.named_aggregate().aggregate_name);
    Ok((views, view))
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

/// The streams as answered: today's shapes (as the history route shows them), projected.
fn streams_answer(
    runtime: &dyn AggregateRuntime,
    streams: Vec<DomainEventStream>,
    projection: &Projection,
    budget: &Budget,
) -> Result<Vec<Value>, ApiError> {
    streams
        .iter()
        .map(|stream| {
            budget.check()?;
            crate::queries::today(runtime, stream)
                .map(|json| project(projection, json))
                .map_err(|e| {
                    ApiError::new(
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        e.error_code(),
                        e.to_string(),
                    )
                })
        })
        .collect()
}
