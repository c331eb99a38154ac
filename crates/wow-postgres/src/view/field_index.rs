//! A field index (`ViewStore::declare_field_index`, SPEC DM-4): an expression index on
//! (view, tenant, one top-level field of the state, row key), which a list filtering that
//! field by equality reads in its order instead of every row of the tenant.
//!
//! One per field name, whatever the view: the list's filter writes the same expression
//! ([`super::filter`]), with the view and tenant bound.

use wow_core::view::{check_field, ViewStoreError};

use crate::error::{pool_view_error, view_error};
use crate::PostgresStore;

/// The index named `$1`'s name when it exists, NULL when it does not.
const FIND_INDEX: &str = "SELECT to_regclass($1)::text";

/// The name of `field`'s index: stable across builds, a valid identifier of at most 63
/// bytes whatever the field (its SHA-256, shortened).
pub(crate) fn field_index_name(field: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(field.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("view_row_field_{hex}")
}

/// Makes `field`'s index unless it exists; two processes making it at once both succeed.
pub(super) async fn declare(store: &PostgresStore, field: &str) -> Result<(), ViewStoreError> {
    check_field(field)?;
    let name = field_index_name(field);
    let client = store.pool().get().await.map_err(pool_view_error)?;
    let made = client
        .batch_execute(&format!(
            "CREATE INDEX IF NOT EXISTS {name} ON view_row (view, tenant_id, (state -> '{field}'), aggregate_id)"
        ))
        .await;
    if let Err(error) = made {
        let found: Option<String> = client
            .query_one(FIND_INDEX, &[&name])
            .await
            .map_err(view_error)?
            .get(0);
        if found.is_none() {
            return Err(view_error(error));
        }
    }
    Ok(())
}
