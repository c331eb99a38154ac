//! The read routes: state and time travel (`state`), history (`history`), the outcome
//! look-up (`outcome`), the holder of a unique key and its release (`unique_key`), pending deadlines
//! (`deadlines`) and health (`health`).

mod deadlines;
mod health;
mod history;
mod outcome;
mod snapshot;
mod state;
mod unique_key;

use axum::http::StatusCode;
use wow_core::eventsourcing::EventStoreError;
use wow_core::ErrorCode;

use crate::error::ApiError;

pub(crate) use deadlines::{of_aggregate as aggregate_deadlines, pending as pending_deadlines};
pub(crate) use health::health;
pub(crate) use history::{events, today};
pub(crate) use outcome::outcome;
pub(crate) use snapshot::{
    load as snapshot, regenerate as regenerate_snapshot, regenerate_batch as regenerate_snapshots,
};
pub(crate) use state::{state, state_at, AtTime, AtVersion};
pub(crate) use unique_key::{holder as unique_key_holder, release as release_unique_key};

/// A read the store failed, as a read's error; what an unreachable or failing store said is
/// logged, never answered (it may hold SQL or addresses).
fn read_failed(error: &EventStoreError) -> ApiError {
    let code = error.error_code();
    let message = match error {
        EventStoreError::Unavailable(_) => {
            tracing::warn!(%error, "a read found the store unavailable");
            "the event store is unavailable; try again shortly".to_owned()
        }
        EventStoreError::Internal(_) => {
            tracing::error!(%error, "a read failed in the store");
            "the event store failed; the server's log has the details".to_owned()
        }
        other => other.to_string(),
    };
    ApiError::read(crate::status::status_for(&code), code, message)
}

/// `text`, a path parameter, as a whole number; else a read's 400 `IllegalArgument` saying
/// `rule`.
fn whole<T: std::str::FromStr>(text: &str, rule: &'static str) -> Result<T, ApiError> {
    text.parse()
        .map_err(|_| ApiError::read(StatusCode::BAD_REQUEST, ErrorCode::IllegalArgument, rule))
}
