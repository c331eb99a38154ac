//! `GET /{aggregate}/{id}/event/{head}/{tail}`: history, each event in today's shape.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{read_failed, whole};
use crate::error::ApiError;
use crate::extract::ReadTarget;
use crate::state::HttpState;

/// The versions `{head}` and `{tail}` of a history route, as written.
#[derive(Debug, Deserialize)]
pub(crate) struct Versions {
    head: String,
    tail: String,
}

/// `GET /{aggregate}/{id}/event/{head}/{tail}`: the streams with versions in `head..=tail`.
/// The tenant leads the store's key: the load sees only the caller's tenant (SPEC TN-1), and
/// an aggregate it does not hold is an empty history, as in any tenant.
pub(crate) async fn events(
    State(state): State<HttpState>,
    target: ReadTarget,
    Path(Versions { head, tail }): Path<Versions>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let rule = "head and tail are whole numbers";
    let (head, tail) = (whole(&head, rule)?, whole(&tail, rule)?);
    let streams = state
        .store()
        .load(&target.aggregate_id, head, tail)
        .await
        .map_err(|error| read_failed(&error))?;
    let streams = streams
        .iter()
        .map(|stream| today(target.runtime.as_ref(), stream))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| {
            ApiError::read(
                StatusCode::INTERNAL_SERVER_ERROR,
                error.error_code(),
                error.to_string(),
            )
        })?;
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
