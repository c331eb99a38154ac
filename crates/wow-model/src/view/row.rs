//! What a view store keeps: one row per (view, tenant, aggregate id).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The key of one view row. The tenant comes before the aggregate id (SPEC TN-1): two
/// tenants' aggregates with one id are two rows.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewKey {
    /// The view's name ([`View::NAME`](crate::view::View::NAME)).
    pub view: String,
    /// The tenant the aggregate belongs to.
    pub tenant_id: String,
    /// The aggregate's id within its tenant.
    pub aggregate_id: String,
}

impl ViewKey {
    /// The key of `aggregate_id` of `tenant_id` in `view`.
    pub fn new(
        view: impl Into<String>,
        tenant_id: impl Into<String>,
        aggregate_id: impl Into<String>,
    ) -> Self {
        Self {
            view: view.into(),
            tenant_id: tenant_id.into(),
            aggregate_id: aggregate_id.into(),
        }
    }
}

/// One view row: a state as JSON, as of the aggregate's `version`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewRow {
    /// Whose row it is.
    pub key: ViewKey,
    /// The last aggregate version folded into `state`.
    pub version: u64,
    /// The view's state, as JSON.
    pub state: Value,
    /// When the row was last written, in milliseconds since the Unix epoch.
    pub updated_at: i64,
}
