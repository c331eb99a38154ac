//! How a query is answered: its documents as Wow shows them (with `Wow-Error-Code: Ok`, a
//! list as server-sent events when asked), and what a store's failure becomes.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;
use wow_core::eventsourcing::EventStoreError;
use wow_core::query::{project, Projection, QueryRefusal};
use wow_core::view::ViewStoreError;
use wow_core::ErrorCode;

use crate::error::ApiError;

/// Which answer a query route gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Whole documents.
    Snapshot,
    /// Only each document's `state`.
    State,
}

/// The answer a query route gives, chosen where the route is declared
/// (`single::<Documents>`, `single::<States>`).
pub(crate) trait Answer: Send + Sync + 'static {
    /// The shape of each document answered.
    const SHAPE: Shape;
}

/// Whole documents (`/snapshot/single`, `/list`, `/paged`).
pub(crate) struct Documents;

impl Answer for Documents {
    const SHAPE: Shape = Shape::Snapshot;
}

/// Only each document's `state` (the `/state` routes).
pub(crate) struct States;

impl Answer for States {
    const SHAPE: Shape = Shape::State;
}

/// Whether the caller accepts `text/event-stream` (Wow's clients' `listStream`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Streamed(pub(crate) bool);

impl<S: Send + Sync> FromRequestParts<S> for Streamed {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(Self(
            parts
                .headers
                .get(header::ACCEPT)
                .and_then(|accept| accept.to_str().ok())
                .is_some_and(|accept| accept.contains("text/event-stream")),
        ))
    }
}

/// `body` as JSON with `Wow-Error-Code: Ok`.
pub(crate) fn ok(body: Value) -> Response {
    let mut response = Json(body).into_response();
    response.headers_mut().insert(
        crate::status::ERROR_CODE_HEADER,
        HeaderValue::from_static("Ok"),
    );
    response
}

/// A list answered as JSON, or, when the caller accepts `text/event-stream`, as server-sent
/// events: one `data:` event per item, in order, with `Wow-Error-Code: Ok`, as Wow streams a
/// list.
pub(crate) fn list(Streamed(streamed): Streamed, items: Vec<Value>) -> Response {
    if !streamed {
        return ok(Value::Array(items));
    }
    let events = futures::stream::iter(
        items
            .into_iter()
            .map(|item| Ok::<_, Infallible>(Event::default().data(item.to_string()))),
    );
    let mut response = Sse::new(events).into_response();
    response.headers_mut().insert(
        crate::status::ERROR_CODE_HEADER,
        HeaderValue::from_static("Ok"),
    );
    response
}

/// A stored document as answered: the projection applied, and only `state` for `/state`.
pub(crate) fn document(mut document: Value, projection: &Projection, shape: Shape) -> Value {
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

/// 400 `IllegalArgument`: a query the store cannot run as written.
pub(crate) fn illegal(message: impl std::fmt::Display) -> ApiError {
    ApiError::illegal_argument(message.to_string())
}

/// What a failure of the materialized snapshots' store is answered with.
pub(crate) fn view_failed(failure: ViewStoreError) -> ApiError {
    match failure {
        ViewStoreError::IllegalArgument(message) => illegal(message),
        ViewStoreError::QueryRefused(refusal) => refused(&refusal),
        ViewStoreError::Unavailable(e) => unavailable(&e),
        other => internal(&other),
    }
}

/// What a failure of the event store's query is answered with.
pub(crate) fn events_failed(failure: EventStoreError) -> ApiError {
    match failure {
        EventStoreError::IllegalArgument(message) => illegal(message),
        EventStoreError::QueryRefused(refusal) => refused(&refusal),
        EventStoreError::Unavailable(e) => unavailable(&e),
        other => internal(&other),
    }
}

/// A query the store would not run within its bounds: 503 `QueryTimeout` or 429
/// `TooManyRequests` (with `Retry-After`).
fn refused(refusal: &QueryRefusal) -> ApiError {
    let code = refusal.error_code();
    let error = ApiError::new(crate::status::status_for(&code), &code, refusal.to_string());
    if matches!(refusal, QueryRefusal::Busy(_)) {
        return error.with_header(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    error
}

/// 503 `ServiceUnavailable`; what the store said is logged, never answered (it may hold SQL
/// or addresses).
fn unavailable(failure: &dyn std::fmt::Display) -> ApiError {
    tracing::warn!(error = %failure, "a query found its store unavailable");
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::ServiceUnavailable,
        "the store is unavailable; try again shortly",
    )
}

/// 500 `InternalServerError`; what the store said is logged, never answered.
fn internal(failure: &dyn std::fmt::Display) -> ApiError {
    tracing::error!(error = %failure, "a query failed in its store");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        ErrorCode::InternalServerError,
        "the query failed in the store; the server's log has the details",
    )
}
