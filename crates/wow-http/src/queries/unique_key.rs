//! `GET /unique-key/{space}/{value}` (SPEC DM-1): who holds a unique key in the caller's
//! tenant.

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use wow_core::unique_key::{check_unique_key, KeyHolder, UniqueKey};

use super::read_failed;
use crate::error::ApiError;
use crate::extract::CallerTenant;
use crate::state::HttpState;

/// The key a look-up names.
#[derive(Debug, Deserialize)]
pub(crate) struct Named {
    space: String,
    value: String,
}

/// `GET /unique-key/{space}/{value}`: 200 with the key, the aggregate that holds it in the
/// caller's tenant and the version of the stream that claimed it; 404 `NotFound` when no
/// aggregate of the tenant holds it (another tenant's holder is not seen); 400
/// `IllegalArgument` for a key no aggregate can hold.
pub(crate) async fn holder(
    State(state): State<HttpState>,
    CallerTenant(tenant): CallerTenant,
    Path(Named { space, value }): Path<Named>,
) -> Result<Json<KeyHolder>, ApiError> {
    let key = UniqueKey::new(space, value);
    check_unique_key(&key).map_err(ApiError::illegal_argument)?;
    match state.store().find_key(&tenant, &key).await {
        Ok(Some(holder)) => Ok(Json(holder)),
        Ok(None) => Err(ApiError::read_not_found(format!(
            "no aggregate holds {key}"
        ))),
        Err(error) => Err(read_failed(&error)),
    }
}
