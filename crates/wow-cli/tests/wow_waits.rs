//! Waiting for one consumer, as Wow's clients ask (`Command-Wait-Processor`, `-Function`,
//! `-Context`), over real HTTP against `wow serve`: the answer is that consumer's signal with
//! Wow's `function`, a consumer no stage has is a 400 that names it (and nothing is sent),
//! SSE streams the awaited consumer's signal, `/metrics` counts each consumer's signals; and
//! Wow's chained waits (`Command-Wait-Tail-*`): the answer comes once every command the saga
//! sent reached the tail.
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
    a_wait_for_a_consumer_answers_its_signal_with_wows_function(&client, &at).await;
    a_consumer_no_stage_has_is_a_400_that_names_it_and_sends_nothing(&client, &at).await;
    a_consumer_of_another_context_or_stage_is_refused(&client, &at).await;
    sse_streams_the_awaited_consumers_signal_last(&client, &at).await;
    metrics_count_each_consumers_signals(&client, &at).await;
    assert!(served.stop().success());
}

/// The answer to a wait for one consumer is that consumer's signal with Wow's `function`;
/// context and function as Wow sends them, at another stage, too.
async fn a_wait_for_a_consumer_answers_its_signal_with_wows_function(client: &Client, at: &str) {
    let (status, opened) = send(
        client,
        at,
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
        client,
        at,
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
}

/// A consumer no stage has: refused before sending, naming it and the stage's consumers; the
/// request id is still free afterwards.
async fn a_consumer_no_stage_has_is_a_400_that_names_it_and_sends_nothing(
    client: &Client,
    at: &str,
) {
    let (status, refused) = send(
        client,
        at,
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
        client,
        at,
        "account/w1/deposit",
        &[("Command-Request-Id", "dep-1")],
        json!({"amount": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{later}");
    assert_eq!(later["aggregateVersion"], 3);
}

/// A consumer of another bounded context, or of another stage, is refused; at a stage without
/// per-consumer signals the names are ignored, as Wow does.
async fn a_consumer_of_another_context_or_stage_is_refused(client: &Client, at: &str) {
    // A consumer of another bounded context is none of this command's.
    let (status, _) = send(
        client,
        at,
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
        client,
        at,
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
        client,
        at,
        "account/w1/deposit",
        &[
            ("Command-Wait-Stage", "PROCESSED"),
            ("Command-Wait-Processor", "NoSuchProjector"),
        ],
        json!({"amount": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{processed}");
}

/// SSE: every stage, and the awaited consumer's own signal last.
async fn sse_streams_the_awaited_consumers_signal_last(client: &Client, at: &str) {
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
}

/// `/metrics` counts each consumer's signals.
async fn metrics_count_each_consumers_signals(client: &Client, at: &str) {
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
}

/// GET `path` as JSON.
async fn get(client: &Client, address: &str, path: &str) -> Value {
    let response = client
        .get(format!("http://{address}/{path}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    response.json().await.unwrap()
}

const CHAIN: [(&str, &str); 4] = [
    ("Command-Wait-Stage", "SAGA_HANDLED"),
    ("Command-Wait-Processor", "transfer"),
    ("Command-Wait-Tail-Stage", "PROJECTED"),
    ("Command-Wait-Tail-Processor", "account_balance"),
];

#[tokio::test]
async fn a_chained_wait_answers_once_every_command_the_saga_sent_reached_the_tail() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("chain.db").display());
    let served = Served::start(&["--store", &store, "--listen", "127.0.0.1:0"], &[]);
    let (client, at) = (Client::new(), served.address.clone());
    for (id, balance) in [("ca", 100), ("cb", 0)] {
        let (status, body) = send(
            &client,
            &at,
            &format!("account/{id}/open"),
            &[("Command-Wait-Stage", "PROJECTED")],
            json!({"name": id, "balance": balance}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    a_chained_transfer_is_answered_with_both_views_settled(&client, &at).await;
    without_a_stage_header_the_chain_starts_at_saga_handled(&client, &at).await;
    sse_streams_each_sent_commands_signals_up_to_the_tail(&client, &at).await;
    a_chain_to_a_failing_command_answers_the_failed_link(&client, &at).await;
    assert!(served.stop().success());
}

/// The saga sends receive_transfer to cb and confirm_transfer to ca: the answer is the last of
/// their PROJECTED signals by account_balance, so both views are read as settled.
async fn a_chained_transfer_is_answered_with_both_views_settled(client: &Client, at: &str) {
    for round in 1..=3 {
        let (status, answer) = send(
            client,
            at,
            "account/ca/transfer",
            &[
                CHAIN[0],
                CHAIN[1],
                CHAIN[2],
                CHAIN[3],
                ("Command-Request-Id", &format!("t-{round}")),
            ],
            json!({"to": "cb", "amount": 10}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(answer["stage"], "PROJECTED", "{answer}");
        assert_eq!(answer["function"]["processorName"], "account_balance");
        assert_ne!(answer["commandId"], answer["waitCommandId"], "{answer}");
        let target = get(client, at, "account/cb/view").await;
        assert_eq!(target["balance"], 10 * round, "{target}");
        let source = get(client, at, "account/ca/view").await;
        assert_eq!(source["balance"], 100 - 10 * round, "{source}");
        assert_eq!(source["held"], 0, "{source}");
    }
}

/// Without a stage header the chain starts at SAGA_HANDLED, as the tail needs.
async fn without_a_stage_header_the_chain_starts_at_saga_handled(client: &Client, at: &str) {
    let (status, answer) = send(
        client,
        at,
        "account/ca/transfer",
        &[("Command-Wait-Tail-Stage", "PROCESSED")],
        json!({"to": "cb", "amount": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["stage"], "PROCESSED", "{answer}");
    assert_ne!(answer["commandId"], answer["waitCommandId"], "{answer}");
}

/// SSE: the command's stages, then each sent command's signals, up to the tail.
async fn sse_streams_each_sent_commands_signals_up_to_the_tail(client: &Client, at: &str) {
    let streamed = client
        .post(format!("http://{at}/account/ca/transfer"))
        .header("Accept", "text/event-stream")
        .header(CHAIN[0].0, CHAIN[0].1)
        .header(CHAIN[2].0, CHAIN[2].1)
        .json(&json!({"to": "cb", "amount": 1}))
        .send()
        .await
        .unwrap();
    let text = streamed.text().await.unwrap();
    let results: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let main = results[0]["commandId"].clone();
    let saga_at = results
        .iter()
        .position(|r| r["commandId"] == main && r["stage"] == "SAGA_HANDLED")
        .unwrap_or_else(|| panic!("no SAGA_HANDLED of the command: {text}"));
    let links: std::collections::BTreeSet<String> = results[saga_at..]
        .iter()
        .filter(|r| r["commandId"] != main)
        .map(|r| r["commandId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(links.len(), 2, "both commands the saga sent: {text}");
    for link in &links {
        let stages: Vec<&str> = results
            .iter()
            .filter(|r| r["commandId"] == link.as_str())
            .map(|r| r["stage"].as_str().unwrap())
            .collect();
        assert_eq!(stages.first(), Some(&"PROCESSED"), "{text}");
        assert!(stages.contains(&"PROJECTED"), "{text}");
    }
    assert_eq!(results.last().unwrap()["stage"], "PROJECTED", "{text}");
    assert_eq!(get(client, at, "account/cb/view").await["balance"], 32);
}

/// A tail of a failing command: the transfer to an account that does not exist is cancelled
/// by the saga, and the chain answers the failed link, as Wow does.
async fn a_chain_to_a_failing_command_answers_the_failed_link(client: &Client, at: &str) {
    let (status, failed) = send(
        client,
        at,
        "account/ca/transfer",
        &[CHAIN[0], CHAIN[1], CHAIN[2], CHAIN[3]],
        json!({"to": "nobody", "amount": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{failed}");
    assert_eq!(failed["aggregateId"], "nobody", "{failed}");
    assert_eq!(failed["stage"], "PROCESSED", "{failed}");
    assert_ne!(failed["commandId"], failed["waitCommandId"], "{failed}");
}

#[tokio::test]
async fn a_chained_wait_that_cannot_be_kept_is_refused_before_sending() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("refused.db").display());
    let served = Served::start(&["--store", &store, "--listen", "127.0.0.1:0"], &[]);
    let (client, at) = (Client::new(), served.address.clone());
    let (status, _) = send(
        &client,
        &at,
        "account/ra/open",
        &[],
        json!({"name": "R", "balance": 10}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let refusals: [(&[(&str, &str)], &str); 4] = [
        (
            &[
                ("Command-Wait-Stage", "SAGA_HANDLED"),
                ("Command-Wait-Tail-Stage", "PROJECTED"),
                ("Command-Wait-Tail-Processor", "NoSuchProjector"),
            ],
            "NoSuchProjector",
        ),
        (
            &[
                ("Command-Wait-Stage", "PROJECTED"),
                ("Command-Wait-Tail-Stage", "PROJECTED"),
            ],
            "SAGA_HANDLED",
        ),
        (
            &[("Command-Wait-Tail-Processor", "account_balance")],
            "Command-Wait-Tail-Stage",
        ),
        (
            &[("Command-Wait-Tail-Stage", "LATER")],
            "Command-Wait-Tail-Stage",
        ),
    ];
    for (headers, named) in refusals {
        let mut with_id = headers.to_vec();
        with_id.push(("Command-Request-Id", "chain-refused"));
        let (status, refused) = send(
            &client,
            &at,
            "account/ra/transfer",
            &with_id,
            json!({"to": "ra", "amount": 1}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{headers:?}: {refused}");
        assert_eq!(refused["errorCode"], "IllegalArgument");
        assert!(
            refused.to_string().contains(named),
            "{headers:?} should name {named}: {refused}"
        );
    }
    // Nothing was sent: the request id is still free, and nothing was held.
    let (status, later) = send(
        &client,
        &at,
        "account/ra/deposit",
        &[("Command-Request-Id", "chain-refused")],
        json!({"amount": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{later}");
    assert_eq!(later["aggregateVersion"], 2);
    assert!(served.stop().success());
}
