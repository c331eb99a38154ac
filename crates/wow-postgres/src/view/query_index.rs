//! A view's query index (`ViewStore::declare_query_index`): a GIN index over the states of
//! one view, which answers the containment tests Wow's queries add to their equality tests.
//!
//! Why one partial index per view rather than one over all of `view_row`: a view declares
//! its index when its aggregate asks for one, and the index holds that view's rows only.

use wow_core::view::ViewStoreError;

use crate::error::{pool_view_error, view_error};
use crate::PostgresStore;

/// The index named `$1`'s name when it exists, NULL when it does not.
const FIND_INDEX: &str = "SELECT to_regclass($1)::text";

/// Makes index `name` over the states of the view whose name quoted as an SQL string is
/// `literal`, unless it exists. A literal, not a parameter: an index's predicate is part of
/// its definition.
fn create_index_sql(name: &str, literal: &str) -> String {
    format!(
        "CREATE INDEX IF NOT EXISTS {name} ON view_row USING gin (state jsonb_path_ops) WHERE view = '{literal}'"
    )
}

/// The name of `view`'s query index: stable across builds, a valid identifier whatever the
/// view is named (its SHA-256, shortened).
fn query_index_name(view: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(view.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("view_row_query_{hex}")
}

/// Makes `view`'s query index unless it exists; two processes making it at once both
/// succeed.
pub(super) async fn declare(store: &PostgresStore, view: &str) -> Result<(), ViewStoreError> {
    let name = query_index_name(view);
    let client = store.pool().get().await.map_err(pool_view_error)?;
    // The view's name is quoted as SQL quotes a string (every ' doubled).
    let literal = view.replace('\'', "''");
    let made = client
        .batch_execute(&create_index_sql(&name, &literal))
        .await;
    if let Err(error) = made {
        // Two processes making it at once: one of them finds the other's in the catalog.
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
