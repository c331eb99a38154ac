//! A path segment that is not UTF-8 once percent-decoded is answered as every other bad input
//! is: 400 with the API's JSON error body (`errorCode`, `errorMsg`) and `Wow-Error-Code`, on
//! every route that takes a path parameter, under every prefix, and nothing is recorded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use reqwest::{Client, Method, StatusCode};
use serde_json::Value;
use wow_http::{router, HttpConfig, HttpState};

use support::{error_code, in_memory_bank, listen};

/// The body of an account's `open`.
const OPEN: &str = r#"{"name":"Ann","balance":5}"#;

/// Every route that takes a path parameter, under every prefix, with a segment that is not
/// UTF-8 once decoded: method, path and body.
fn routes_with_a_segment_not_utf8() -> Vec<(Method, &'static str, &'static str)> {
    vec![
        (Method::GET, "/account/%FF/state", ""),
        (Method::GET, "/account/abc%C3/state", ""),
        (Method::GET, "/account/%FF/state/1", ""),
        (Method::GET, "/account/a/state/time/%FF", ""),
        (Method::GET, "/account/%FF/event/1/2", ""),
        (Method::GET, "/account/a/requests/%C3%28", ""),
        (Method::POST, "/account/%FF/open", OPEN),
        (Method::POST, "/account/%E2%82/open", OPEN),
        (Method::POST, "/account/%FF", OPEN),
        (Method::DELETE, "/account/%FF", ""),
        (Method::PUT, "/account/%FF/recover", ""),
        (Method::POST, "/%FF/snapshot/count", "{}"),
        (Method::GET, "/compensation/failures/%FF", ""),
        (Method::POST, "/compensation/failures/%FF/retry", ""),
        (Method::GET, "/tenant/%FF/account/a/state", ""),
        (Method::GET, "/tenant/(0)/account/%FF/state", ""),
        (Method::GET, "/owner/%FF/account/a/state", ""),
        (Method::POST, "/owner/u1/account/%FF/open", OPEN),
        (Method::GET, "/bank/account/%FF/state", ""),
        (
            Method::GET,
            "/bank/tenant/(0)/owner/u1/account/%FF/state",
            "",
        ),
    ]
}

/// `method` on `path` with `body` is a 400 with the API's JSON error body and
/// `Wow-Error-Code`, saying UTF-8.
async fn assert_a_json_400_that_says_utf8(
    client: &Client,
    base: &str,
    method: Method,
    path: &str,
    body: &'static str,
) {
    let response = client
        .request(method.clone(), format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let code = error_code(&response);
    let media = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {path}: {text}");
    assert!(
        media.starts_with("application/json"),
        "{method} {path}: {media} {text}"
    );
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["errorCode"], "IllegalArgument", "{method} {path}");
    assert_eq!(code, "IllegalArgument", "{method} {path}");
    assert!(
        answer["errorMsg"].as_str().unwrap().contains("UTF-8"),
        "{method} {path}: {answer}"
    );
}

#[tokio::test]
async fn a_path_that_is_not_utf8_once_decoded_is_a_json_400_on_every_route() {
    let (bank, store) = in_memory_bank().await;
    let base = listen(router(HttpState::new(&bank, None, HttpConfig::default()))).await;
    let client = Client::new();
    for (method, path, body) in routes_with_a_segment_not_utf8() {
        assert_a_json_400_that_says_utf8(&client, &base, method, path, body).await;
    }
    // Nothing was recorded by the refused opens; a path that is UTF-8 still opens.
    let aggregate = wow_core::AggregateId::new("bank", "account", "a", "(0)");
    assert!(store
        .load(&aggregate, 1, u64::MAX)
        .await
        .unwrap()
        .is_empty());
    let response = client
        .post(format!("{base}/account/%C3%A9t%C3%A9/open"))
        .header("content-type", "application/json")
        .body(OPEN)
        .send()
        .await
        .unwrap();
    // `été` breaks the id rules (A-Z a-z 0-9 . _ : -): answered as such, not as bad UTF-8.
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let answer: Value = response.json().await.unwrap();
    assert!(
        !answer["errorMsg"]
            .as_str()
            .unwrap_or_default()
            .contains("UTF-8"),
        "{answer}"
    );
}
