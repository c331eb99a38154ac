//! `GET /{aggregate}/{id}/deadlines` (SPEC DM-2): the deadlines an aggregate has pending, and
//! `GET /deadlines`, the operator's view of every tenant's.

use axum::extract::{Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use wow_core::deadline::{DeadlineBacklog, ScheduledCommand};

use super::read_failed;
use crate::error::ApiError;
use crate::extract::ReadTarget;
use crate::state::HttpState;

/// The most rows `GET /deadlines` lists.
const MAX_LISTED: usize = 500;

/// `GET /{aggregate}/{id}/deadlines`: 200 with the aggregate's pending deadlines in the
/// caller's tenant, by name (each with its due time, the command it sends and the request id
/// it is sent with); an empty list when it has none; 404 when this service keeps none.
pub(crate) async fn of_aggregate(
    State(state): State<HttpState>,
    target: ReadTarget,
) -> Result<Json<Vec<ScheduledCommand>>, ApiError> {
    let deadlines = state
        .deadlines()
        .ok_or_else(|| ApiError::read_not_found("this service keeps no deadlines".to_owned()))?;
    deadlines
        .scheduled_for(&target.aggregate_id)
        .await
        .map(Json)
        .map_err(|error| read_failed(&error))
}

/// How many of the earliest rows to list, as written.
#[derive(Debug, Deserialize)]
pub(crate) struct Listed {
    limit: Option<String>,
}

/// The backlog, and the earliest pending rows.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Pending {
    #[serde(flatten)]
    backlog: DeadlineBacklog,
    earliest: Vec<ScheduledCommand>,
}

/// `GET /deadlines?limit=N` (operators): how many deadlines are pending in every tenant, the
/// earliest due time, and the `N` earliest rows (50 unless asked); a `limit` that is not a
/// whole number from 0 to 500 is 400 `IllegalArgument`.
pub(crate) async fn pending(
    State(state): State<HttpState>,
    Query(Listed { limit }): Query<Listed>,
) -> Result<Json<Pending>, ApiError> {
    let deadlines = state
        .deadlines()
        .ok_or_else(|| ApiError::read_not_found("this service keeps no deadlines".to_owned()))?;
    let limit = match limit {
        None => 50,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|limit| *limit <= MAX_LISTED)
            .ok_or_else(|| {
                ApiError::illegal_argument(format!(
                    "`limit` must be a whole number from 0 to {MAX_LISTED}, not `{text}`"
                ))
            })?,
    };
    let backlog = deadlines.backlog().await.map_err(|e| read_failed(&e))?;
    let earliest = deadlines
        .due(i64::MAX, limit)
        .await
        .map_err(|e| read_failed(&e))?;
    Ok(Json(Pending { backlog, earliest }))
}
