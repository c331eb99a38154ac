//! `wow compensation` against a running service with a consumer that fails: the list's filters
//! (aggregate id, recoverable) and the total beside a page, an operator's `recoverable` and
//! `retry-spec` edits recorded with the operator's fingerprint, and a tenant's token (which
//! lists its tenant's records) refused them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use support::wow;
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::{DomainEventStream, ErrorCode, Stores};
use wow_example_bank::account::Account;
use wow_service::{Service, Settings};

/// A projection that fails on every stream of an account whose id starts with `bad`.
#[derive(Debug)]
struct FailsOnBad;

#[async_trait]
impl EventConsumer for FailsOnBad {
    fn name(&self) -> &str {
        "fails_on_bad"
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        if stream.aggregate_id.id.starts_with("bad") {
            return Err(ConsumerError::new(ErrorCode::IllegalState, "bad account"));
        }
        Ok(())
    }
}

fn ids_in(listing: &str) -> Vec<String> {
    listing
        .lines()
        .skip(1)
        .filter(|line| line.contains("fails_on_bad"))
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_filters_failures_and_makes_the_operators_edits() {
    let settings = Settings {
        auth_tokens: HashMap::from([("ta".to_owned(), wow_http::TokenBinding::tenant("(0)"))]),
        operator_tokens: HashSet::from(["op".to_owned()]),
        retry_every: None,
        wait_timeout: Duration::from_secs(10),
        ..Settings::default()
    };
    let service = Service::builder()
        .aggregate::<Account>()
        .projection(|_: &Stores| Arc::new(FailsOnBad) as Arc<dyn EventConsumer>)
        .stores(Stores::in_memory())
        .settings(settings)
        .build()
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(service.serve_on(listener, async {
        let _ = stopped.await;
    }));

    let cli = |args: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--server", server.as_str()]);
        let owned: Vec<String> = all.iter().map(|a| (*a).to_owned()).collect();
        async move {
            tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = owned.iter().map(String::as_str).collect();
                wow(&args)
            })
            .await
            .unwrap()
        }
    };
    for id in ["bad-1", "bad-2", "good-1"] {
        let body = format!(r#"{{"name":"{id}","balance":1}}"#);
        let (code, out) = cli(&["send", "account", id, "open", &body, "--token", "ta"]).await;
        assert_eq!(code, 0, "{out}");
    }
    // The failures are recorded once the consumer ran: wait for both, by a deadline.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let listing = loop {
        let (code, out) = cli(&["compensation", "list", "--token", "ta"]).await;
        assert_eq!(code, 0, "{out}");
        if ids_in(&out).len() == 2 {
            break out;
        }
        assert!(tokio::time::Instant::now() < deadline, "{out}");
        tokio::task::yield_now().await;
    };
    assert!(listing.contains("2 record(s)"), "{listing}");

    // `wow compensation list FILTER…` as tenant (0)'s token sees it.
    let list = |filter: &[&str]| {
        let mut args = vec!["compensation", "list"];
        args.extend_from_slice(filter);
        args.extend(["--token", "ta"]);
        cli(&args)
    };
    // `wow compensation recoverable ID VALUE` with `token`.
    let judge = |id: &str, value: &str, token: &str| {
        cli(&["compensation", "recoverable", id, value, "--token", token])
    };
    // `wow compensation retry-spec ID` allowing `attempts`, with the operator's token.
    let retry_spec = |id: &str, attempts: &str| {
        cli(&[
            "compensation",
            "retry-spec",
            id,
            "--max-attempts",
            attempts,
            "--initial-backoff-ms",
            "100",
            "--max-backoff-ms",
            "1000",
            "--token",
            "op",
        ])
    };

    // One aggregate's.
    let (code, bad_1) = list(&["--aggregate-id", "bad-1"]).await;
    assert_eq!(code, 0, "{bad_1}");
    let ids = ids_in(&bad_1);
    assert_eq!(ids.len(), 1, "{bad_1}");
    assert!(bad_1.contains("account/bad-1"), "{bad_1}");
    let id = ids[0].clone();

    // A tenant's token may not judge a record; the operator's may, and is recorded.
    let (code, refused) = judge(&id, "UNRECOVERABLE", "ta").await;
    assert_eq!(code, 1, "{refused}");
    let (code, marked) = judge(&id, "UNRECOVERABLE", "op").await;
    assert_eq!(code, 0, "{marked}");
    assert!(marked.contains("UNRECOVERABLE"), "{marked}");
    assert!(marked.contains("operator:"), "{marked}");
    let (code, out) = judge(&id, "MAYBE", "op").await;
    assert_eq!(code, 1, "a bad value is refused: {out}");
    let (_, unrecoverable) = list(&["--recoverable", "UNRECOVERABLE"]).await;
    assert_eq!(ids_in(&unrecoverable), vec![id.clone()], "{unrecoverable}");

    // Its own retry spec: one attempt in all leaves it EXHAUSTED at once.
    let (code, edited) = retry_spec(&id, "1").await;
    assert_eq!(code, 0, "{edited}");
    assert!(edited.contains("EXHAUSTED"), "{edited}");
    assert!(edited.contains("\"maxAttempts\":1"), "{edited}");
    let (code, out) = retry_spec(&id, "0").await;
    assert_eq!(code, 1, "no attempt at all is refused: {out}");
    let (_, exhausted) = list(&["--status", "EXHAUSTED"]).await;
    assert_eq!(ids_in(&exhausted), vec![id], "{exhausted}");

    let _ = stop.send(());
    let _ = served.await;
}
