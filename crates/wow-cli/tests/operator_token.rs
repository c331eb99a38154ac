//! The operator token of `wow serve` over real HTTP: with `WOW_AUTH_TOKENS` and
//! `WOW_OPERATOR_TOKENS`, `/metrics`, `/metrics.json` and the operations page answer only the
//! operator's token (a tenant's is 403, none is 401), a browser signs in by `/ui?token=`, and
//! `/health` and `/openapi.json` stay open; an operator token that is a tenant's too, or that
//! a cookie cannot carry, stops the service at startup.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use reqwest::{Client, StatusCode};
use serde_json::Value;
use support::Served;

/// A client of the served process that follows no redirect.
struct Caller {
    client: Client,
    base: String,
}

impl Caller {
    /// `GET {path}`, with `token` as bearer when there is one.
    async fn get(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        let mut request = self.client.get(format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wow_serve_gives_metrics_and_the_operations_page_to_the_operator_token_only() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("wow.db").display());
    let served = Served::start(
        &["--listen", "127.0.0.1:0"],
        &[
            ("WOW_STORE", &store),
            ("WOW_AUTH_TOKENS", "ta=tenant-a"),
            ("WOW_OPERATOR_TOKENS", "op-1,op-2"),
        ],
    );
    let caller = Caller {
        client: Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        base: format!("http://{}", served.address),
    };
    the_operators_routes_answer_every_operator_token_only(&caller).await;
    a_browser_signs_in_once_by_the_query_then_by_the_cookie(&caller).await;
    // Open to anyone, and the tenant's routes keep their tenant's token.
    for path in ["/health", "/openapi.json"] {
        assert_eq!(
            caller.get(path, None).await.status(),
            StatusCode::OK,
            "{path}"
        );
    }
    let state = caller.get("/account/a1/state", Some("op-1")).await;
    assert_eq!(
        state.status(),
        StatusCode::UNAUTHORIZED,
        "an operator token is no tenant's"
    );
    let state = caller.get("/account/a1/state", Some("ta")).await;
    assert_eq!(state.status(), StatusCode::NOT_FOUND);
    assert!(served.stop().success());
}

/// The metrics and the operations page: 401 without a token, 403 with a tenant's, 200 with
/// either operator token.
async fn the_operators_routes_answer_every_operator_token_only(caller: &Caller) {
    for path in [
        "/metrics",
        "/metrics.json",
        "/ui",
        "/ui/app.js",
        "/ui/app.css",
    ] {
        let response = caller.get(path, None).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer", "{path}");
        assert_eq!(
            response.headers()["wow-error-code"],
            "Unauthorized",
            "{path}"
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["errorCode"], "Unauthorized", "{path}");
        let response = caller.get(path, Some("ta")).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["errorCode"], "Forbidden", "{path}");
        for operator in ["op-1", "op-2"] {
            let response = caller.get(path, Some(operator)).await;
            assert_eq!(response.status(), StatusCode::OK, "{path} {operator}");
        }
    }
    let page = caller.get("/metrics", Some("op-1")).await;
    assert!(page.text().await.unwrap().contains("wow_event_backlog"));
}

/// The browser's sign-in: once by the query, which sets a strict cookie, then by the cookie.
async fn a_browser_signs_in_once_by_the_query_then_by_the_cookie(caller: &Caller) {
    let signed = caller.get("/ui?token=op-2", None).await;
    assert_eq!(signed.status(), StatusCode::SEE_OTHER);
    let cookie = signed.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let (pair, _) = cookie.split_once(';').unwrap();
    let page = caller
        .client
        .get(format!("{}/ui", caller.base))
        .header("Cookie", pair)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("<html"));
}

#[test]
fn an_operator_token_a_tenant_holds_or_a_cookie_cannot_carry_stops_the_service_at_startup() {
    for (tenants, operators, said) in [
        ("shared=tenant-a", "shared", "tenant's token"),
        ("ta=tenant-a", "with space", "may hold only"),
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_wow"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--store",
                "sqlite::memory:",
            ])
            .env("WOW_AUTH_TOKENS", tenants)
            .env("WOW_OPERATOR_TOKENS", operators)
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        assert!(!output.status.success(), "{operators}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("WOW_OPERATOR_TOKENS") && stderr.contains(said),
            "{operators}: {stderr}"
        );
        assert!(
            !stderr.contains(operators),
            "the token is not shown: {stderr}"
        );
    }
}
