//! `GET /{aggregate}/{id}/event/{head}/{tail}`: history, each event in today's shape.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use wow_core::ErrorCode;

use super::{read_failed, whole};
use crate::error::ApiError;
use crate::extract::ReadTarget;
use crate::reads::ReadPlace;
use crate::state::HttpState;

/// The most versions one history answer holds; a longer history is read a page at a time.
pub(crate) const MAX_HISTORY_VERSIONS: u64 = 1000;

/// The versions `{head}` and `{tail}` of a history route, as written.
#[derive(Debug, Deserialize)]
pub(crate) struct Versions {
    head: String,
    tail: String,
}

/// `GET /{aggregate}/{id}/event/{head}/{tail}`: the streams with versions in `head..=tail`.
/// The tenant leads the store's key: the load sees only the caller's tenant (SPEC TN-1), and
/// an aggregate it does not hold is an empty history, as in any tenant.
///
/// A heavy read (its tenant's and its peer's share, the read budget); an answer holds at most
/// [`MAX_HISTORY_VERSIONS`] versions: a range that holds more is refused 400, naming the page
/// to ask for instead, so a client that asks for "everything" of a short history still gets it.
pub(crate) async fn events(
    State(state): State<HttpState>,
    target: ReadTarget,
    read: ReadPlace,
    Path(Versions { head, tail }): Path<Versions>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let rule = "head and tail are whole numbers";
    let (head, tail): (u64, u64) = (whole(&head, rule)?, whole(&tail, rule)?);
    // One version past the most an answer holds tells whether the range holds more.
    let first = head.max(1);
    let last = tail.min(first.saturating_add(MAX_HISTORY_VERSIONS));
    let streams = read
        .within(async {
            state
                .store()
                .load(&target.aggregate_id, head, last)
                .await
                .map_err(|error| read_failed(&error))
        })
        .await?;
    if streams.len() as u64 > MAX_HISTORY_VERSIONS {
        let page_end = first + MAX_HISTORY_VERSIONS - 1;
        return Err(ApiError::read(
            StatusCode::BAD_REQUEST,
            ErrorCode::IllegalArgument,
            format!(
                "a history answer holds at most {MAX_HISTORY_VERSIONS} versions and versions {head} to {tail} hold more: ask for /event/{first}/{page_end}, then from {}",
                page_end + 1
            ),
        ));
    }
    let runtime = target.runtime;
    let streams = read
        .shaped(move |budget| {
            streams
                .iter()
                .map(|stream| {
                    budget.check()?;
                    today(runtime.as_ref(), stream).map_err(|error| {
                        ApiError::read(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            error.error_code(),
                            error.to_string(),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .await?;
    Ok(Json(streams))
}

/// `stream` as JSON with its events in today's shape (the aggregate's upcasters applied).
/// An event that was upcast says what it was stored as: `storedName` and `storedRevision`;
/// the parts of a split event after the first get the id `{id}.{n}`.
pub(crate) fn today(
    runtime: &dyn wow_core::aggregate::AggregateRuntime,
    stream: &wow_core::DomainEventStream,
) -> Result<Value, wow_core::aggregate::AggregateError> {
    let shapes = runtime.upcast(stream)?;
    let mut json = serde_json::to_value(stream).unwrap_or_default();
    let mut parts = std::collections::HashMap::<usize, usize>::new();
    let events: Vec<Value> = shapes
        .into_iter()
        .map(|(index, shape)| {
            let stored = &stream.body[index];
            let part = parts.entry(index).or_default();
            let id = if *part == 0 {
                stored.id.clone()
            } else {
                format!("{}.{part}", stored.id)
            };
            *part += 1;
            // Wow names each event's body type; here it is the event qualified by its aggregate.
            let body_type = format!(
                "{}.{}.{}",
                stream.aggregate_id.context_name, stream.aggregate_id.aggregate_name, shape.name
            );
            let mut event = json!({"id": id, "name": shape.name, "revision": shape.revision, "bodyType": body_type, "body": shape.body});
            if shape.name != stored.name || shape.revision != stored.revision {
                event["storedName"] = json!(stored.name);
                event["storedRevision"] = json!(stored.revision);
            }
            event
        })
        .collect();
    json["body"] = json!(events);
    let document = wow_core::eventsourcing::stream_document(stream);
    for field in ["ownerId", "spaceId"] {
        json[field] = document[field].clone();
    }
    Ok(json)
}
