//! The operations page, `GET /ui`: failed downstream executions and their retry, quarantined
//! aggregates, the outcome look-up and a live view of the command counters, in the browser.
//!
//! Three static files embedded in the binary (no build step, nothing fetched from elsewhere).
//! The page has no behaviour of its own: everything it shows comes from the JSON API
//! (`/compensation/failures`, `/health`, `/{aggregate}/{id}/requests/{requestId}`,
//! `/metrics.json`). With any token configured, the page, its files and `/metrics.json` are
//! the operator's (the `operator` module): a browser opens `/ui?token=OPERATOR_TOKEN` once
//! and loads them with the cookie that sets; with tenants' tokens on, the page asks for one
//! too and calls the tenant's routes with it, so it shows exactly what that tenant may see.

use axum::http::header;
use axum::response::IntoResponse;

const INDEX: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/app.css");

/// Kept from being framed by another site, and from loading anything but its own files.
const HEADERS: [(header::HeaderName, &str); 2] = [
    (
        header::CONTENT_SECURITY_POLICY,
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    ),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
];

/// `GET /ui`.
pub(crate) async fn page() -> impl IntoResponse {
    asset("text/html; charset=utf-8", INDEX)
}

/// `GET /ui/app.js`.
pub(crate) async fn script() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /ui/app.css`.
pub(crate) async fn style() -> impl IntoResponse {
    asset("text/css; charset=utf-8", STYLE)
}

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    let [(csp_name, csp), (sniff_name, sniff)] = HEADERS;
    (
        [
            (header::CONTENT_TYPE, content_type),
            (csp_name, csp),
            (sniff_name, sniff),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}
