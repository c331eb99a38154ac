//! `GET /{aggregate}/{id}/requests/{requestId}` (SPEC TO-1): what became of a request id.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use wow_core::eventsourcing::{EventStore, RejectionRecord, RequestRecord};
use wow_core::{AggregateId, ErrorCode};
use wow_runtime::command::{look_up_request, RequestOutcome};

use crate::error::ApiError;
use crate::extract::ReadTarget;
use crate::ids::RequestId;
use crate::state::HttpState;
use crate::status::look_up_status;

/// The request id of a look-up, as written.
#[derive(Debug, Deserialize)]
pub(crate) struct Looked {
    request_id: String,
}

/// `GET /{aggregate}/{id}/requests/{requestId}` (SPEC TO-1), through
/// [`look_up_request`]: 200 `APPENDED` with its stream, 200 `REJECTED` with the recorded
/// code and message, 202 `IN_FLIGHT` (this node or the bus holds it: look again), 404 `NONE` (no
/// decision recorded: a resend with the same request id is safe), 503 `UNKNOWN`.
///
/// An appended record whose stream cannot be loaded (the load fails or finds nothing) is
/// `UNKNOWN`, never `NONE`: the intent was appended, and `NONE` would invite a resend that
/// history says is not needed. A decision on another tenant's aggregate is `NONE` to this
/// caller, as the aggregate itself is absent to it (SPEC TN-1).
pub(crate) async fn outcome(
    State(state): State<HttpState>,
    target: ReadTarget,
    Path(Looked { request_id }): Path<Looked>,
) -> Result<LookUp, ApiError> {
    let request_id = RequestId::recorded(&request_id).map_err(|rule| {
        ApiError::illegal_argument(format!(
            "requestId {rule}: no command can carry it, so none is recorded"
        ))
    })?;
    let aggregate_id = &target.aggregate_id;
    let request_id = request_id.as_str();
    Ok(
        match look_up_request(state.gateway(), state.store(), aggregate_id, request_id).await {
            RequestOutcome::Appended(record) => {
                appended(state.store(), aggregate_id, request_id, &record).await
            }
            RequestOutcome::Rejected(record) => {
                rejected(state.store(), aggregate_id, &record).await
            }
            RequestOutcome::InFlight => LookUp::InFlight,
            RequestOutcome::None => LookUp::None,
            RequestOutcome::Unknown(error) => {
                LookUp::Unknown(error.error_code(), error.to_string())
            }
            // An answer this version does not know: it cannot say what happened.
            _ => LookUp::Unknown(
                ErrorCode::InternalServerError,
                "the look-up gave an answer this service does not know".to_owned(),
            ),
        },
    )
}

/// One answer of the look-up, with the status code of [`look_up_status`]. `UNKNOWN` is an
/// answer, not an error: the look-up could not tell (503), and says why.
#[derive(Debug)]
pub(crate) enum LookUp {
    /// `APPENDED`, with the version, command, time and stream.
    Appended(Value),
    /// `REJECTED`, with the recorded code and message.
    Rejected(Value),
    /// `IN_FLIGHT`.
    InFlight,
    /// `NONE`.
    None,
    /// `UNKNOWN`, with the code and message of what kept the look-up from telling.
    Unknown(ErrorCode, String),
}

impl IntoResponse for LookUp {
    fn into_response(self) -> Response {
        let (status, mut body) = match self {
            LookUp::Appended(body) => ("APPENDED", body),
            LookUp::Rejected(body) => ("REJECTED", body),
            LookUp::InFlight => ("IN_FLIGHT", json!({})),
            LookUp::None => ("NONE", json!({})),
            LookUp::Unknown(code, message) => {
                ("UNKNOWN", json!({"errorCode": code, "errorMsg": message}))
            }
        };
        body["status"] = json!(status);
        (look_up_status(status), Json(body)).into_response()
    }
}

/// The look-up of an appended request id: its stream, when it is the caller's tenant's.
async fn appended(
    store: &dyn EventStore,
    aggregate_id: &AggregateId,
    request_id: &str,
    record: &RequestRecord,
) -> LookUp {
    let version = record.version;
    match store.load(aggregate_id, version, version).await {
        Ok(streams) => match streams.into_iter().next() {
            Some(stream) if stream.aggregate_id.tenant_id == aggregate_id.tenant_id => {
                LookUp::Appended(json!({
                    "version": version,
                    "commandId": record.command_id,
                    "createTime": record.create_time,
                    "stream": stream,
                }))
            }
            Some(_) => LookUp::None,
            None => LookUp::Unknown(
                ErrorCode::ServiceUnavailable,
                format!(
                    "request id `{request_id}` was appended at version {version}, but its stream cannot be found"
                ),
            ),
        },
        Err(error) => LookUp::Unknown(
            error.error_code(),
            format!(
                "request id `{request_id}` was appended at version {version}, but its stream cannot be read: {error}"
            ),
        ),
    }
}

/// The look-up of a rejected request id: the rejection, when the aggregate it was decided on
/// is the caller's.
async fn rejected(
    store: &dyn EventStore,
    aggregate_id: &AggregateId,
    record: &RejectionRecord,
) -> LookUp {
    match owned(store, aggregate_id, record.version).await {
        Ok(true) => LookUp::Rejected(json!({
            "errorCode": record.error_code,
            "errorMsg": record.error_msg,
            "commandId": record.command_id,
            "createTime": record.create_time,
            "version": record.version,
        })),
        Ok(false) => LookUp::None,
        Err(unknown) => unknown,
    }
}

/// Whether the aggregate a rejection was decided on (at `version`) is the caller's: its
/// first stream is in the caller's tenant. A rejection decided on no aggregate (version 0)
/// names no tenant's data and is shown. `Err` is the `UNKNOWN` answer when history cannot
/// tell.
async fn owned(
    store: &dyn EventStore,
    aggregate_id: &AggregateId,
    version: u64,
) -> Result<bool, LookUp> {
    if version == 0 {
        return Ok(true);
    }
    let streams = store
        .load(aggregate_id, 1, 1)
        .await
        .map_err(|error| LookUp::Unknown(error.error_code(), error.to_string()))?;
    let first = streams.first().ok_or_else(|| {
        LookUp::Unknown(
            ErrorCode::ServiceUnavailable,
            format!("a rejection was decided at version {version}, but the aggregate's history cannot be found"),
        )
    })?;
    Ok(first.aggregate_id.tenant_id == aggregate_id.tenant_id)
}
