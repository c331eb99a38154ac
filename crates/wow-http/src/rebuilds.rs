//! `/rebuilds`: an operator rebuilds a view beside the live one and follows its progress
//! (SPEC DS-6). Readers go on reading the view's active generation throughout.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::state::HttpState;
use wow_core::ErrorCode;
use wow_runtime::view::{RebuildError, ViewRebuilds};

fn rebuilds(state: &HttpState) -> Result<&ViewRebuilds, ApiError> {
    state.rebuilds().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            "this service rebuilds no views",
        )
    })
}

/// `GET /rebuilds`: the views that can be rebuilt, and each rebuild this process ran or runs
/// with its progress.
pub(crate) async fn list(State(state): State<HttpState>) -> Result<Json<Value>, ApiError> {
    let rebuilds = rebuilds(&state)?;
    Ok(Json(json!({
        "views": rebuilds.views(),
        "rebuilds": rebuilds.all(),
    })))
}

/// `POST /rebuilds/{view}`: starts a rebuild of `view` beside the live one, answers `202`
/// with its progress at once; recorded in the audit log (who, when, which view).
pub(crate) async fn start(
    State(state): State<HttpState>,
    headers: HeaderMap,
    Path(view): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let started = rebuilds(&state)?.start(&view).map_err(refused)?;
    let by = crate::operator::token_fingerprint(&headers);
    tracing::info!(
        target: "wow::audit",
        action = "view.rebuild",
        operator = by.as_deref().unwrap_or("none"),
        view = %view,
        generation = started.generation,
        at = wow_core::id::now_millis(),
        "an operator started a view's rebuild"
    );
    let progress = serde_json::to_value(&started).map_err(|error| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::InternalServerError,
            error.to_string(),
        )
    })?;
    Ok((StatusCode::ACCEPTED, Json(progress)))
}

fn refused(error: RebuildError) -> ApiError {
    match error {
        RebuildError::UnknownView { .. } => ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            error.to_string(),
        ),
        other => ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::IllegalState,
            other.to_string(),
        ),
    }
}
