//! Waiting for one consumer, as Wow's clients ask (`Command-Wait-Processor`, `-Function`,
//! `-Context`), over real HTTP against `wow serve`: the answer is that consumer's signal with
//! Wow's `function`, a consumer no stage has is a 400 that names it (and nothing is sent),
//! SSE streams the awaited consumer's signal, `/metrics` counts each consumer's signals, and
//! Wow's chained (tail) waits are refused by name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use support::Served;

async fn send(
    client: &Client,
    address: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (StatusCode, Value) {
    let mut request = client.post(format!("http://{address}/{path}")).json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn a_wait_names_one_consumer_as_wow_clients_do() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("waits.db").display());
    let served = Served::start(
        &["--store", &store, "--listen", "127.0.0.1:0"],
        &[("WOW_SNAPSHOT_QUERIES", "true")],
    );
    let (client, at) = (Client::new(), served.address.clone());

    let (status, opened) = send(
        &client,
        &at,
        "account/w1/open",
        &[
            ("Command-Wait-Stage", "PROJECTED"),
            ("Command-Wait-Processor", "account_balance"),
        ],
        json!({"name": "W", "balance": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{opened}");
    assert_eq!(opened["stage"], "PROJECTED");
    assert_eq!(
        opened["function"],
        json!({"functionKind": "EVENT", "contextName": "bank", "processorName": "account_balance", "name": "onEvent"})
    );

    // Context and function as Wow sends them, at another stage.
    let (status, handled) = send(
        &client,
        &at,
        "account/w1/withdraw",
        &[
            ("Command-Wait-Stage", "EVENT_HANDLED"),
            ("Command-Wait-Context", "bank"),
            ("Command-Wait-Processor", "notifications"),
            ("Command-Wait-Function", "onEvent"),
        ],
        json!({"amount": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{handled}");
    assert_eq!(handled["function"]["processorName"], "notifications");
    assert_eq!(handled["aggregateVersion"], 2);

    // A consumer no stage has: refused before sending, naming it and the stage's consumers.
    let (status, refused) = send(
        &client,
        &at,
        "account/w1/deposit",
        &[
            ("Command-Wait-Stage", "PROJECTED"),
            ("Command-Wait-Processor", "NoSuchProjector"),
            ("Command-Request-Id", "dep-1"),
        ],
        json!({"amount": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["errorCode"], "IllegalArgument");
    let message = refused["errorMsg"].as_str().unwrap();
    assert!(
        message.contains("NoSuchProjector") && message.contains("account_balance"),
        "{message}"
    );
    assert_eq!(refused["result"]["sent"], false);
    // Nothing was sent: the request id is still free.
    let (status, later) = send(
        &client,
        &at,
        "account/w1/deposit",
        &[("Command-Request-Id", "dep-1")],
        json!({"amount": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{later}");
    assert_eq!(later["aggregateVersion"], 3);
    // A consumer of another bounded context is none of this command's.
    let (status, _) = send(
        &client,
        &at,
        "account/w1/deposit",
        &[
            ("Command-Wait-Stage", "PROJECTED"),
            ("Command-Wait-Context", "shop"),
            ("Command-Wait-Processor", "account_balance"),
        ],
        json!({"amount": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // A consumer of another stage is not one of this stage's.
    let (status, _) = send(
        &client,
        &at,
        "account/w1/deposit",
        &[
            ("Command-Wait-Stage", "PROJECTED"),
            ("Command-Wait-Processor", "notifications"),
        ],
        json!({"amount": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // At a stage without per-consumer signals the names are ignored, as Wow does.
    let (status, processed) = send(
        &client,
        &at,
        "account/w1/deposit",
        &[
            ("Command-Wait-Stage", "PROCESSED"),
            ("Command-Wait-Processor", "NoSuchProjector"),
        ],
        json!({"amount": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{processed}");

    // Tail waits are refused by name, before sending.
    let (status, tail) = send(
        &client,
        &at,
        "account/w1/deposit",
        &[
            ("Command-Wait-Stage", "SAGA_HANDLED"),
            ("Command-Wait-Tail-Stage", "PROCESSED"),
        ],
        json!({"amount": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{tail}");
    assert!(
        tail["errorMsg"]
            .as_str()
            .unwrap()
            .contains("Command-Wait-Tail-Stage"),
        "{tail}"
    );

    // SSE: every stage, and the awaited consumer's own signal last.
    let streamed = client
        .post(format!("http://{at}/account/w1/deposit"))
        .header("Accept", "text/event-stream")
        .header("Command-Wait-Stage", "PROJECTED")
        .header("Command-Wait-Processor", "snapshot")
        .json(&json!({"amount": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.headers()["Wow-Error-Code"], "Ok");
    let text = streamed.text().await.unwrap();
    let events: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        events,
        ["SENT", "PROCESSED", "SNAPSHOT", "PROJECTED"],
        "{text}"
    );
    let last: Value = serde_json::from_str(
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .next_back()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["function"]["processorName"], "snapshot");

    let metrics = client
        .get(format!("http://{at}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("wow_consumer_signals_total{stage=\"PROJECTED\",consumer=\"account_balance\",error_code=\"Ok\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("consumer=\"notifications\""), "{metrics}");
    assert!(served.stop().success());
}
