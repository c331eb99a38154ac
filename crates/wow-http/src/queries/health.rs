//! `GET /health`.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde_json::json;

use wow_core::eventsourcing::StoreCheck;

use crate::auth;
use crate::state::HttpState;

/// How long `/health` waits for the store's own check.
pub(crate) const STORE_CHECK_TIME: std::time::Duration = std::time::Duration::from_secs(1);

/// `GET /health`: `{"status": "UP", "details": {"quarantinedCount": n, "quarantined": [...]}}`,
/// and `details.node` (role, partitions, NATS connection) on a node of a distributed
/// deployment.
///
/// Always 200 and `UP`: a node with quarantined aggregates (SPEC PX-1) serves every other
/// aggregate, so a probe must not take it out of rotation (nor restart it in a loop, which
/// lifts the quarantine only until the aggregate's next command). The quarantine is reported
/// in `details` for monitors and operators instead: how many aggregates are quarantined, and
/// which (aggregate, version, message, since). The list holds only the caller's tenant's when
/// it names one (auth on: its token's, none without a valid token; else `Command-Tenant-Id`),
/// every tenant's otherwise, as `/compensation/failures` does; none for a token bound to an
/// owner or a space (SPEC TN-2); the count is of the listed ones (the gauge
/// `wow_quarantined_aggregates` in `/metrics` counts every tenant's).
///
/// `details.store` is what the store says of itself when it can (PostgreSQL): `status`
/// (`UP`, `READ_ONLY`, `DOWN`, `SATURATED`), `reachable`, `writable`, the command path's
/// `connections` (open, max, idle, waiting), `lostForMs` while calls fail, and the `error`
/// with its SQLSTATE; asked within [`STORE_CHECK_TIME`], so the probe never hangs on a hung
/// store. The status stays `UP` whatever it says: a lost store comes back by itself (the
/// node reconnects), and every node of a deployment shares it, so restarting or removing
/// the node would not help; commands meanwhile answer 503 (unavailable, retry).
///
/// `details.consumerLag` is each consumer's lag (SPEC DS-6), as `/metrics.json` has it, when
/// the caller names no tenant (auth off, no `Command-Tenant-Id`) and the stores answer within
/// [`STORE_CHECK_TIME`].
///
/// `details.warnings` lists what the service warned of at start ([`QuerySide::warnings`](crate::QuerySide::warnings)):
/// a crate built so that an arithmetic overflow wraps, started anyway by the setting
/// `WOW_OVERFLOW_CHECKS=warn` (SPEC PX-1). Absent when there is none.
pub(crate) async fn health(
    State(state): State<HttpState>,
    headers: HeaderMap,
) -> Json<serde_json::Value> {
    let quarantined = state.quarantine().list();
    let named = !state.config().auth_tokens.is_empty()
        || headers.contains_key(wow_core::command::headers::TENANT_ID);
    let visible: Vec<_> = match (named, auth::caller(state.config(), &headers)) {
        (false, _) => quarantined,
        // SPEC TN-2: which aggregates are quarantined is for tokens of the whole tenant.
        (true, Ok(caller)) if caller.is_bound() => Vec::new(),
        (true, Ok(caller)) => quarantined
            .into_iter()
            .filter(|q| q.aggregate_id.tenant_id == caller.tenant)
            .collect(),
        (true, Err(_)) => Vec::new(),
    };
    // The count is of what the caller may see: another tenant's quarantine is not its
    // business (SPEC TN-1); operators read the whole in `/metrics`.
    let count = visible.len();
    let mut details = json!({"quarantinedCount": count, "quarantined": visible});
    if !state.warnings().is_empty() {
        details["warnings"] = json!(state.warnings());
    }
    if let Some(health) = state.store_health() {
        // The store bounds its own check; this bound holds for a store that does not.
        let bound = STORE_CHECK_TIME + std::time::Duration::from_millis(250);
        let check = tokio::time::timeout(bound, health.check(STORE_CHECK_TIME))
            .await
            .unwrap_or_else(|_| {
                StoreCheck::unreachable(format!(
                    "the store's check did not end within {} ms",
                    bound.as_millis()
                ))
            });
        details["store"] = json!(check);
    }
    if let Some(node) = state.node_status() {
        details["node"] = node;
    }
    if !named {
        // Each consumer's lag (SPEC DS-6), bounded as the store's check is; with auth on,
        // operators read it in `/metrics`.
        let backlog = state.gateway().metrics().snapshot().event_backlog;
        let now = wow_core::id::now_millis();
        let read = crate::lag::read(state.compensation(), backlog, now);
        if let Ok(Ok(lag)) = tokio::time::timeout(STORE_CHECK_TIME, read).await {
            details["consumerLag"] = json!(lag);
        }
    }
    Json(json!({"status": "UP", "details": details}))
}
