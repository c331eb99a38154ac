//! The operator's routes (`/metrics`, `/metrics.json`, the operations page `/ui` and its
//! files) over real HTTP: with any token configured they answer only an operator token, as a
//! bearer token or in the cookie `/ui?token=` sets; a tenant's token is 403; `/health` and
//! `/openapi.json` stay open; with no token at all everything is open as before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{HashMap, HashSet};

use reqwest::{Client, StatusCode};
use serde_json::Value;
use wow_http::{router, HttpConfig, HttpState, TokenBinding};

use support::{error_code, in_memory_bank, listen};

/// The operator's routes, and the same under the prefixes a path may carry.
const OPERATORS: [&str; 9] = [
    "/metrics",
    "/metrics.json",
    "/ui",
    "/ui/app.js",
    "/ui/app.css",
    "/bank/metrics",
    "/bank/ui",
    "/owner/u1/metrics.json",
    "/tenant/tenant-a/metrics",
];

struct Server {
    base: String,
    client: Client,
    _bank: wow_runtime::pipeline::LocalPipeline,
}

async fn server_with(config: HttpConfig) -> Server {
    let (bank, _) = in_memory_bank().await;
    let base = listen(router(HttpState::new(&bank, None, config))).await;
    Server {
        base,
        // Redirects are looked at, not followed.
        client: Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        _bank: bank,
    }
}

/// Tenant-a's token `ta` and the operator's `op`.
fn with_auth() -> HttpConfig {
    HttpConfig {
        auth_tokens: HashMap::from([("ta".to_owned(), TokenBinding::tenant("tenant-a"))]),
        operator_tokens: HashSet::from(["op".to_owned()]),
        ..HttpConfig::default()
    }
}

impl Server {
    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
        let mut request = self.client.get(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.unwrap()
    }
}

/// Asserts an error answer: `status`, a JSON body with `code`, and `Wow-Error-Code`.
async fn assert_refused(response: reqwest::Response, status: StatusCode, code: &str, what: &str) {
    assert_eq!(response.status(), status, "{what}");
    assert_eq!(error_code(&response), code, "{what}");
    let media = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(media.starts_with("application/json"), "{what}: {media}");
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    if status == StatusCode::UNAUTHORIZED {
        assert_eq!(challenge.as_deref(), Some("Bearer"), "{what}");
    }
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["errorCode"], code, "{what}: {body}");
    assert!(body["errorMsg"].as_str().is_some_and(|m| !m.is_empty()));
}

#[tokio::test]
async fn with_auth_on_the_operator_routes_answer_only_an_operator_token() {
    let s = server_with(with_auth()).await;
    for path in OPERATORS {
        let none = s.get(path, &[]).await;
        assert_refused(none, StatusCode::UNAUTHORIZED, "Unauthorized", path).await;
        let unknown = s.get(path, &[("Authorization", "Bearer nope")]).await;
        assert_refused(unknown, StatusCode::UNAUTHORIZED, "Unauthorized", path).await;
        let tenant = s.get(path, &[("Authorization", "Bearer ta")]).await;
        assert_refused(tenant, StatusCode::FORBIDDEN, "Forbidden", path).await;
        let tenant_cookie = s.get(path, &[("Cookie", "wow-operator=ta")]).await;
        assert_refused(
            tenant_cookie,
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            path,
        )
        .await;
        let two = s
            .get(
                path,
                &[
                    ("Authorization", "Bearer op"),
                    ("Authorization", "Bearer op"),
                ],
            )
            .await;
        assert_refused(two, StatusCode::BAD_REQUEST, "BadRequest", path).await;
    }
    // The operator's token, as a bearer token or in the page's cookie (beside a tenant's
    // bearer token, as the page sends it).
    for path in [
        "/metrics",
        "/metrics.json",
        "/ui",
        "/ui/app.js",
        "/ui/app.css",
    ] {
        for headers in [
            vec![("Authorization", "Bearer op")],
            vec![("Authorization", "bearer op")],
            vec![("Cookie", "theme=dark; wow-operator=op")],
            vec![
                ("Authorization", "Bearer ta"),
                ("Cookie", "wow-operator=op"),
            ],
        ] {
            let response = s.get(path, &headers).await;
            assert_eq!(response.status(), StatusCode::OK, "{path} {headers:?}");
        }
    }
    let metrics = s.get("/metrics", &[("Authorization", "Bearer op")]).await;
    assert!(metrics.text().await.unwrap().contains("wow_commands_total"));
    let prefixed = s
        .get("/bank/metrics", &[("Authorization", "Bearer op")])
        .await;
    assert_eq!(prefixed.status(), StatusCode::OK);
    // An operator token is no tenant's: the tenant's routes refuse it.
    let state = s
        .get("/account/a1/state", &[("Authorization", "Bearer op")])
        .await;
    assert_refused(state, StatusCode::UNAUTHORIZED, "Unauthorized", "state").await;
    // Open to anyone: the health probe and the document.
    for path in ["/health", "/openapi.json"] {
        assert_eq!(s.get(path, &[]).await.status(), StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn a_browser_signs_in_once_by_the_token_in_the_query_and_gets_a_cookie() {
    let s = server_with(with_auth()).await;
    let signed = s.get("/ui?token=op", &[]).await;
    assert_eq!(signed.status(), StatusCode::SEE_OTHER);
    assert_eq!(signed.headers()["location"], "ui");
    assert_eq!(signed.headers()["cache-control"], "no-store");
    let cookie = signed.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert_eq!(cookie, "wow-operator=op; Path=/; HttpOnly; SameSite=Strict");
    let (pair, _) = cookie.split_once(';').unwrap();
    for path in ["/ui", "/ui/app.js", "/ui/app.css", "/metrics.json"] {
        let response = s.get(path, &[("Cookie", pair)]).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
    // Under the context prefix the page signs in alike (`ui` is relative to it).
    let prefixed = s.get("/bank/ui?token=op", &[]).await;
    assert_eq!(prefixed.status(), StatusCode::SEE_OTHER);
    // A token that is not an operator's sets nothing.
    for (query, status, code) in [
        ("token=nope", StatusCode::UNAUTHORIZED, "Unauthorized"),
        ("token=", StatusCode::UNAUTHORIZED, "Unauthorized"),
        ("token=ta", StatusCode::FORBIDDEN, "Forbidden"),
    ] {
        let response = s.get(&format!("/ui?{query}"), &[]).await;
        assert!(response.headers().get("set-cookie").is_none(), "{query}");
        assert_refused(response, status, code, query).await;
    }
    // Only the page signs in: `?token=` is no credential of /metrics.
    let metrics = s.get("/metrics?token=op", &[]).await;
    assert_refused(metrics, StatusCode::UNAUTHORIZED, "Unauthorized", "metrics").await;
}

#[tokio::test]
async fn with_no_token_configured_the_operator_routes_stay_open() {
    let s = server_with(HttpConfig::default()).await;
    for path in OPERATORS
        .iter()
        .copied()
        .filter(|path| !path.starts_with("/tenant/"))
        .chain(["/ui?token=anything", "/health", "/openapi.json"])
    {
        let response = s.get(path, &[]).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert!(response.headers().get("set-cookie").is_none(), "{path}");
    }
}

#[tokio::test]
async fn operator_tokens_alone_gate_the_operator_routes_only() {
    let s = server_with(HttpConfig {
        operator_tokens: HashSet::from(["op".to_owned()]),
        ..HttpConfig::default()
    })
    .await;
    let metrics = s.get("/metrics", &[]).await;
    assert_refused(metrics, StatusCode::UNAUTHORIZED, "Unauthorized", "metrics").await;
    let metrics = s.get("/metrics", &[("Authorization", "Bearer op")]).await;
    assert_eq!(metrics.status(), StatusCode::OK);
    // The tenants' routes keep no auth: the tenant comes from Command-Tenant-Id.
    let state = s.get("/account/a1/state", &[]).await;
    assert_eq!(state.status(), StatusCode::NOT_FOUND);
    assert_eq!(error_code(&state), "NotFound");
    // The document shows the operator's schemes, and no tenant's bearer scheme.
    let document: Value = s.get("/openapi.json", &[]).await.json().await.unwrap();
    let schemes = &document["components"]["securitySchemes"];
    assert!(schemes["bearer"].is_null(), "{schemes}");
    assert_eq!(schemes["operator"]["scheme"], "bearer");
    assert_eq!(schemes["operatorCookie"]["in"], "cookie");
    let metrics = &document["paths"]["/metrics"]["get"];
    assert!(metrics["responses"]["401"].is_object(), "{metrics}");
    assert!(metrics["responses"]["403"].is_object(), "{metrics}");
    assert!(document["paths"]["/ui"]["get"]["responses"]["303"].is_object());
    assert!(document["paths"]["/account/{id}/state"]["get"]["security"].is_null());
}
