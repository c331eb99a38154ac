//! `GET /unique-key/{space}/{value}` (SPEC DM-1): whether a unique key is taken in the
//! caller's tenant, and by whom when the caller may see it (SPEC TN-2); and the operator's
//! `DELETE /unique-key/{space}/{value}`, which frees it whoever holds it.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;
use serde::{Deserialize, Serialize};
use wow_core::eventsourcing::EventStoreError;
use wow_core::unique_key::{check_unique_key, KeyHolder, UniqueKey};
use wow_core::AggregateId;

use super::read_failed;
use crate::auth::{self, Caller};
use crate::error::ApiError;
use crate::state::HttpState;
use crate::{access, operator};

/// The key a look-up names.
#[derive(Debug, Deserialize)]
pub(crate) struct Named {
    space: String,
    value: String,
}

/// A taken key as a caller sees it: always the key and `taken: true`; the aggregate that
/// holds it and the version of the stream that claimed it only when the caller may see that
/// aggregate (SPEC TN-2).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Taken {
    /// The key.
    #[serde(flatten)]
    key: UniqueKey,
    /// Always `true`: a free key is answered 404.
    taken: bool,
    /// The holder, when the caller may see it.
    #[serde(skip_serializing_if = "Option::is_none")]
    aggregate_id: Option<AggregateId>,
    /// The version of the holder's stream that claimed the key, when the caller may see it.
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
}

impl Taken {
    /// The whole answer: the key and its holder.
    fn holder(holder: KeyHolder) -> Self {
        Self {
            key: holder.key,
            taken: true,
            aggregate_id: Some(holder.aggregate_id),
            version: Some(holder.version),
        }
    }

    /// That the key is taken, and nothing of who took it.
    fn only(key: UniqueKey) -> Self {
        Self {
            key,
            taken: true,
            aggregate_id: None,
            version: None,
        }
    }
}

/// `GET /unique-key/{space}/{value}`: 200 when an aggregate of the caller's tenant holds the
/// key: the key and `taken: true`, with the holder and the version of the stream that claimed
/// it when the caller is bound to no owner and no space, or the holder is of its own owner and
/// space; else nothing of the holder (SPEC TN-2). 404 `NotFound` when no aggregate of the
/// tenant holds it (another tenant's holder is not seen); 400 `IllegalArgument` for a key no
/// aggregate can hold.
pub(crate) async fn holder(
    State(state): State<HttpState>,
    caller: Caller,
    Path(Named { space, value }): Path<Named>,
) -> Result<Json<Taken>, ApiError> {
    let key = UniqueKey::new(space, value);
    check_unique_key(&key).map_err(ApiError::illegal_argument)?;
    let holder = match state.store().find_key(&caller.tenant, &key).await {
        Ok(Some(holder)) => holder,
        Ok(None) => {
            return Err(ApiError::read_not_found(format!(
                "no aggregate holds {key}"
            )))
        }
        Err(error) => return Err(read_failed(&error)),
    };
    match access::sees(&state, &caller, &holder.aggregate_id).await {
        Ok(true) => Ok(Json(Taken::holder(holder))),
        Ok(false) => Ok(Json(Taken::only(holder.key))),
        Err(error) => Err(read_failed(&error)),
    }
}

/// `DELETE /unique-key/{space}/{value}`, the operator's release (SPEC DM-1): with an operator
/// token as the bearer token (any caller when no token is configured), frees the key in the
/// tenant `Command-Tenant-Id` names (default `(0)`) whoever holds it, and answers 200 with the
/// holder it had; 404 `NotFound` when the key was free. Refused before anything is read: 401
/// without an operator token, 403 with a tenant's, 400 for a key no aggregate can hold or a
/// tenant id that breaks the rules. The release is recorded in the log, target `wow::audit`:
/// the SHA-256 fingerprint of the token (never the token), the tenant, the key, the holder
/// and the time.
pub(crate) async fn release(
    State(state): State<HttpState>,
    headers: HeaderMap,
    Path(Named { space, value }): Path<Named>,
) -> Result<Json<KeyHolder>, ApiError> {
    operator::permits_command(state.config(), &headers)?;
    let tenant = auth::named_tenant(&headers)?.0;
    let key = UniqueKey::new(space, value);
    check_unique_key(&key).map_err(ApiError::illegal_argument)?;
    let released = state
        .store()
        .release_key(&tenant, &key)
        .await
        .map_err(|error| release_failed(&error))?;
    let by = operator::token_fingerprint(&headers);
    let at = wow_core::id::now_millis();
    let holder = released
        .as_ref()
        .map(|holder| holder.aggregate_id.to_string());
    tracing::info!(
        target: "wow::audit",
        action = "unique_key.release",
        operator = by.as_deref().unwrap_or("none"),
        tenant = %tenant,
        space = %key.space,
        value = %key.value,
        holder = holder.as_deref().unwrap_or("none"),
        at,
        "an operator released a unique key"
    );
    released
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no aggregate holds {key}: nothing released")))
}

/// A release the store failed: what it said is logged, not answered (as for a read).
fn release_failed(error: &EventStoreError) -> ApiError {
    let code = error.error_code();
    let message = match error {
        EventStoreError::Unavailable(_) => {
            tracing::warn!(%error, "a key release found the store unavailable");
            "the event store is unavailable; whether the key was released is unknown until it answers: look the key up, then try again".to_owned()
        }
        EventStoreError::Internal(_) => {
            tracing::error!(%error, "a key release failed in the store");
            "the event store failed; the server's log has the details".to_owned()
        }
        other => other.to_string(),
    };
    ApiError::new(crate::status::status_for(&code), code, message)
}
