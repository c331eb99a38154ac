//! `GET /{aggregate}/{id}/state` and Wow's time travel, `…/state/{version}` and
//! `…/state/time/{time}`.

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use wow_core::aggregate::AggregateState;
use wow_core::{DomainEventStream, ErrorCode};
use wow_runtime::eventsourcing::load_aggregate;

use super::{read_failed, whole};
use crate::error::ApiError;
use crate::extract::ReadTarget;
use crate::reads::ReadPlace;
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

/// `GET /{aggregate}/{id}/state`: the bare state, its version in `ETag`.
pub(crate) async fn state(
    State(state): State<HttpState>,
    target: ReadTarget,
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
    state_answer(&loaded)
}

/// `GET /{aggregate}/{id}/state/{version}` ([`AtVersion`]) and
/// `GET /{aggregate}/{id}/state/time/{time}` ([`AtTime`]): the state at a point of its
/// history (Wow's time travel), answered as [`state`] answers. A heavy read: history is read
/// and folded a page at a time within the read budget.
pub(crate) async fn state_at<P: Point>(
    State(state): State<HttpState>,
    target: ReadTarget,
    read: ReadPlace,
    Path(point): Path<P>,
) -> Result<Response, ApiError> {
    let until = point.until(target.id())?;
    let loaded = folded(&state, &target, &read, until).await?;
    if let Until::Version(version) = until {
        if loaded.version() != version {
            return Err(ApiError::read_not_found(format!(
                "aggregate `{}` has no version {version} (its last is {})",
                target.id(),
                loaded.version()
            )));
        }
    }
    state_answer(&loaded)
}

/// A point of an aggregate's history, as a time travel route's path names it.
pub(crate) trait Point: DeserializeOwned + Send + 'static {
    /// Where the fold stops, or the answer to a point that is not one.
    fn until(self, id: &str) -> Result<Until, ApiError>;
}

impl Point for AtVersion {
    /// After `version`: 404 before the aggregate existed (version 0), and (after the fold)
    /// past its last version.
    fn until(self, id: &str) -> Result<Until, ApiError> {
        let version: u64 = whole(&self.version, "the version is a whole number")?;
        if version == 0 {
            return Err(ApiError::read_not_found(format!(
                "no aggregate `{id}` at version 0"
            )));
        }
        Ok(Until::Version(version))
    }
}

impl Point for AtTime {
    /// As of `time` (milliseconds since the Unix epoch): the history up to the first stream
    /// made after it.
    fn until(self, _: &str) -> Result<Until, ApiError> {
        let time: i64 = whole(
            &self.time,
            "the time is a whole number of milliseconds since the Unix epoch",
        )?;
        Ok(Until::Time(time))
    }
}

/// A state as answered (docs/http-api.md): the bare state, as Wow's clients read it, under
/// every prefix and none; its version as a strong entity tag, `ETag: "3"`.
fn state_answer(loaded: &AggregateState) -> Result<Response, ApiError> {
    let internal = |message: String| {
        ApiError::read(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::InternalServerError,
            message,
        )
    };
    let body = loaded
        .to_json()
        .map_err(|error| internal(error.to_string()))?;
    let tag = HeaderValue::from_str(&format!("\"{}\"", loaded.version()))
        .map_err(|error| internal(error.to_string()))?;
    let mut response = Json(body).into_response();
    response.headers_mut().insert(header::ETAG, tag);
    Ok(response)
}

/// A state the aggregate's history could not give, as a read's error with `code`'s status.
fn load_failed(code: &ErrorCode, message: String) -> ApiError {
    ApiError::read(crate::status::status_for(code), code, message)
}

/// How many versions time travel reads from the store at once.
const FOLD_PAGE: u64 = 1000;

/// Where time travel stops.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Until {
    /// After this version.
    Version(u64),
    /// Before the first stream made after this time (milliseconds since the Unix epoch).
    Time(i64),
}

impl Until {
    /// Whether `stream` is past the point.
    fn passed_by(self, stream: &DomainEventStream) -> bool {
        match self {
            Until::Version(version) => stream.version > version,
            Until::Time(time) => stream.create_time > time,
        }
    }
}

/// The aggregate's state at `until`, its history read [`FOLD_PAGE`] versions at a time and
/// folded on the blocking pool, within the read's budget: memory does not grow with the
/// history, and a long one is stopped at the budget.
async fn folded(
    state: &HttpState,
    target: &ReadTarget,
    read: &ReadPlace,
    until: Until,
) -> Result<AggregateState, ApiError> {
    let id = target.id();
    let mut folded = target.runtime.initial_state();
    let mut from = 1u64;
    loop {
        let to = from.saturating_add(FOLD_PAGE - 1);
        let page = read
            .within(async {
                state
                    .store()
                    .load(&target.aggregate_id, from, to)
                    .await
                    .map_err(|error| read_failed(&error))
            })
            .await?;
        let whole_page = page.len() as u64 == FOLD_PAGE;
        let runtime = target.runtime.clone();
        let (state_now, passed) = read
            .shaped(move |budget| {
                let mut state_now = folded;
                for stream in &page {
                    budget.check()?;
                    if until.passed_by(stream) {
                        return Ok((state_now, true));
                    }
                    runtime
                        .apply(&mut state_now, stream)
                        .map_err(|error| load_failed(&error.error_code(), error.to_string()))?;
                }
                Ok((state_now, false))
            })
            .await?;
        folded = state_now;
        if passed || !whole_page {
            break;
        }
        from = to + 1;
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
