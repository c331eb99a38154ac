//! Input edges a store would answer differently are refused at the edge, with one answer on
//! every store (SPEC TN-1): a NUL (`\u0000`) in a string of a command's body or in a path
//! segment is 400 on SQLite and on PostgreSQL (which cannot hold NUL in text), and a command
//! body that is not a JSON object (an array would bind fields by position) is 400, and one not
//! sent as JSON is 415. Nothing is recorded: the same request id sent again, well formed, takes
//! effect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use reqwest::{Client, StatusCode};
use serde_json::Value;
use support::Served;

async fn send(client: &Client, url: String, request_id: &str, body: &str) -> (StatusCode, Value) {
    let response = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Command-Request-Id", request_id)
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn hostile_input(store: &str) {
    let served = Served::start(
        &[
            "--store",
            store,
            "--listen",
            "127.0.0.1:0",
            "--example",
            "shop",
        ],
        &[],
    );
    let client = Client::new();
    let base = format!("http://{}", served.address);

    for (path, body) in [
        (
            "product/p-1/create",
            r#"{"sku":"MUG-1","name":"Mu\u0000g","stock":3}"#,
        ),
        (
            "product/p-1/create",
            r#"{"sku":"MUG\u00001","name":"Mug","stock":3}"#,
        ),
        (
            "product/p-1/create",
            r#"{"sku":"MUG-1","name":"Mug","stock":3,"x\u0000":1}"#,
        ),
        ("product/p-1/create", r#"["MUG-1","Mug",3]"#),
        ("product/p-1/create", r#""MUG-1""#),
    ] {
        let (status, answer) = send(&client, format!("{base}/{path}"), "create-p-1", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["errorCode"], "BadRequest", "{body}: {answer}");
    }
    // A body a web page could make a browser send: a form, text, no type at all.
    for content_type in ["application/x-www-form-urlencoded", "text/plain", ""] {
        let mut request = client
            .post(format!("{base}/product/p-1/create"))
            .header("Command-Request-Id", "create-p-1")
            .body(r#"{"sku":"MUG-1","name":"Mug","stock":3}"#);
        if !content_type.is_empty() {
            request = request.header("Content-Type", content_type);
        }
        let response = request.send().await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}"
        );
    }
    // Nothing was recorded under the request id: well formed, it takes effect.
    let (status, answer) = send(
        &client,
        format!("{base}/product/p-1/create"),
        "create-p-1",
        r#"{"sku":"MUG-1","name":"Mug","stock":3}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    for path in [
        "unique-key/sku/%00",
        "unique-key/sku/MUG%001",
        "product/p%001/state",
    ] {
        let response = client.get(format!("{base}/{path}")).send().await.unwrap();
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {answer}");
        assert_eq!(answer["errorCode"], "IllegalArgument", "{path}: {answer}");
    }
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_and_bodies_that_are_not_objects_are_400_on_sqlite() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("hostile.db").display());
    hostile_input(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_and_bodies_that_are_not_objects_are_400_on_postgres() {
    let Some((base, schema)) = support::postgres_schema("hostile_input") else {
        return;
    };
    hostile_input(&format!("{base}?schema={schema}")).await;
    support::drop_schema(&base, &schema);
}
