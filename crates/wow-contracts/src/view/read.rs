//! A view's row read back typed.

use super::{ViewStore, ViewStoreError};
use wow_model::view::{View, ViewKey};

/// The state of `V` for `aggregate_id` of `tenant_id` and the last version folded into it,
/// if the view holds a row for it. Another tenant's aggregate of the same id is not it.
///
/// Fails as [`ViewStore::load`] does, and with [`ViewStoreError::Internal`] when the stored
/// state does not decode as `V::State`.
pub async fn view<V: View>(
    store: &dyn ViewStore,
    tenant_id: &str,
    aggregate_id: &str,
) -> Result<Option<(V::State, u64)>, ViewStoreError> {
    let key = ViewKey::new(V::NAME, tenant_id, aggregate_id);
    let Some(row) = store.load(&key).await? else {
        return Ok(None);
    };
    let state = serde_json::from_value::<V::State>(row.state)
        .map_err(|error| ViewStoreError::Internal(Box::new(error)))?;
    Ok(Some((state, row.version)))
}
