//! `wow serve` as a user runs it: a real process, a real port, SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};

mod support;

use support::{wow, Served};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_bank_on_sqlite_and_exits_cleanly_on_sigterm() {
    let folder = tempfile::tempdir().unwrap();
    let config = folder.path().join("wow.toml");
    // The file names a listen address; the flag wins over it.
    std::fs::write(
        &config,
        "listen = \"127.0.0.1:1\"\nwait_timeout_ms = 5000\n",
    )
    .unwrap();
    let store = format!("sqlite://{}", folder.path().join("data/wow.db").display());
    let served = Served::start(
        &[
            "--listen",
            "127.0.0.1:0",
            "--config",
            config.to_str().unwrap(),
        ],
        &[("WOW_STORE", &store)],
    );
    let address = served.address.clone();

    let client = reqwest::Client::new();
    let opened = client
        .post(format!("http://{address}/account/cli-1/open"))
        .header("Command-Request-Id", "open-cli-1")
        .header("Command-Wait-Stage", "PROJECTED")
        .header("content-type", "application/json")
        .body(r#"{"name":"Ann","balance":3}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);
    let view: serde_json::Value = client
        .get(format!("http://{address}/account/cli-1/view"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(view["balance"], 3);

    let status = served.stop();
    assert!(status.success(), "exit status {status}");
    assert!(
        folder.path().join("data/wow.db").exists(),
        "the store's folder was created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remote_commands_send_safely_look_up_and_list() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("wow.db").display());
    let served = Served::start(&["--listen", "127.0.0.1:0", "--store", &store], &[]);
    let server = format!("http://{}", served.address);
    let server = server.as_str();
    wow_send_answers_a_resend_with_the_recorded_decision(server);
    wow_outcome_looks_up_each_kind_of_decision(server);
    wow_events_and_compensation_list_and_retry(server);
    let status = served.stop();
    assert!(status.success(), "exit status {status}");
}

/// `wow send`: an open, its resend already applied; a withdraw refused, its resend answered
/// with the recorded rejection.
fn wow_send_answers_a_resend_with_the_recorded_decision(server: &str) {
    let open = [
        "send",
        "account",
        "r-1",
        "open",
        r#"{"name":"Ann","balance":10}"#,
        "--request-id",
        "open-r-1",
        "--server",
        server,
    ];
    let (code, out) = wow(&open);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("\"COMPLETED\""), "{out}");
    let (code, out) = wow(&open);
    assert_eq!(code, 0, "a resend of the same intent: {out}");
    assert!(out.contains("\"ALREADY_APPLIED\""), "{out}");
    let withdraw = [
        "send",
        "account",
        "r-1",
        "withdraw",
        r#"{"amount":500}"#,
        "--request-id",
        "withdraw-r-1",
        "--server",
        server,
    ];
    let (code, out) = wow(&withdraw);
    assert_eq!(code, 3, "a business rule refuses it: {out}");
    assert!(out.contains("InsufficientBalance"), "{out}");
    let (code, out) = wow(&withdraw);
    assert_eq!(code, 3, "the resend gets the recorded rejection: {out}");
    let replayed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(replayed["result"]["result"]["replayed"], true, "{out}");
}

/// `wow outcome` of `r-1`'s `request_id`, asking `server`.
fn outcome(request_id: &str, server: &str) -> (i32, String) {
    wow(&["outcome", "account", "r-1", request_id, "--server", server])
}

/// `wow outcome`: appended, rejected for good, no decision yet, and unknown when nobody
/// answers, each with its exit code.
fn wow_outcome_looks_up_each_kind_of_decision(server: &str) {
    let (code, out) = outcome("open-r-1", server);
    assert_eq!(code, 0, "{out}");
    let found: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (found["status"].as_str(), found["version"].as_u64()),
        (Some("APPENDED"), Some(1))
    );
    assert_eq!(found["stream"]["body"][0]["name"], "AccountOpened");
    let (code, out) = outcome("withdraw-r-1", server);
    assert_eq!(code, 3, "rejected for good: {out}");
    let found: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (found["status"].as_str(), found["errorCode"].as_str()),
        (Some("REJECTED"), Some("InsufficientBalance"))
    );
    let (code, out) = outcome("never-sent", server);
    assert_eq!(code, 5, "no decision yet: {out}");
    assert!(out.contains("\"NONE\""), "{out}");
    let (code, out) = outcome("open-r-1", "http://127.0.0.1:9");
    assert_eq!(code, 4, "nobody to ask: unknown, {out}");
    assert!(out.contains("UNKNOWN"), "{out}");
}

/// `wow events` lists the history; `wow compensation list` no record, and a retry of a
/// missing record is an error.
fn wow_events_and_compensation_list_and_retry(server: &str) {
    let (code, out) = wow(&["events", "account", "r-1", "--server", server]);
    assert_eq!(code, 0, "{out}");
    let streams: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(streams.as_array().map(Vec::len), Some(1));
    let (code, out) = wow(&["compensation", "list", "--server", server]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("0 record(s)"), "{out}");
    let (code, _) = wow(&[
        "compensation",
        "retry",
        "no-such-record",
        "--server",
        server,
    ]);
    assert_eq!(code, 1, "a missing record is an error");
}

#[test]
fn send_and_outcome_help_say_what_each_exit_code_asks_of_the_caller() {
    for command in ["send", "outcome"] {
        let (code, out) = wow(&[command, "--help"]);
        assert_eq!(code, 0, "{out}");
        for line in [
            "3  rejected, for good",
            "Do not resend",
            "5  no decision yet",
            "resending with the same request id is safe",
            "4  unknown",
            "Escalate",
        ] {
            assert!(
                out.contains(line),
                "`wow {command} --help` lacks {line:?}:\n{out}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_goes_away_ends_the_output_quietly() {
    let served = Served::start(&["--listen", "127.0.0.1:0", "--store", "memory://"], &[]);
    let server = format!("http://{}", served.address);
    let (code, out) = wow(&[
        "send",
        "account",
        "pipe-1",
        "open",
        r#"{"name":"Ann","balance":10}"#,
        "--server",
        &server,
    ]);
    assert_eq!(code, 0, "{out}");

    // `wow events … | head -c 0`: the reader is gone before the first line is written (the
    // command asks the server first).
    let mut child = Command::new(env!("CARGO_BIN_EXE_wow"))
        .args(["events", "account", "pipe-1", "--server", &server])
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

/// SPEC ES-3 over HTTP, across a restart: a command pinned to a version history has passed
/// is 409 `CommandExpectVersionConflict` and records nothing (the look-up says NONE, on
/// this process and the next); the caller reloads, and its retry with the same request id
/// and the fresh version is decided afresh (not a replay, not `RequestIdReused`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_conflict_is_not_a_decision_and_its_retry_is_decided_afresh() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("wow.db").display());
    let env = [("WOW_STORE", store.as_str())];
    let client = reqwest::Client::new();
    let send = |address: String, version: &'static str| {
        client
            .post(format!("http://{address}/account/es3/deposit"))
            .header("Command-Request-Id", "dep-es3")
            .header("Command-Aggregate-Version", version)
            .header("content-type", "application/json")
            .body(r#"{"amount":5}"#)
            .send()
    };
    let look_up = |address: String| async move {
        let response = reqwest::get(format!("http://{address}/account/es3/requests/dep-es3"))
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().await.unwrap();
        (
            status,
            body["status"].as_str().unwrap_or_default().to_owned(),
        )
    };

    let served = Served::start(&["--listen", "127.0.0.1:0"], &env);
    let opened = client
        .post(format!("http://{}/account/es3/open", served.address))
        .header("content-type", "application/json")
        .body(r#"{"name":"Ann","balance":0}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);
    let stale = send(served.address.clone(), "0").await.unwrap();
    assert_eq!(stale.status(), 409);
    assert_eq!(
        stale.headers()["Wow-Error-Code"],
        "CommandExpectVersionConflict"
    );
    assert_eq!(
        look_up(served.address.clone()).await,
        (404, "NONE".to_owned()),
        "a conflict records nothing"
    );
    assert!(served.stop().success());

    let served = Served::start(&["--listen", "127.0.0.1:0"], &env);
    assert_eq!(
        look_up(served.address.clone()).await,
        (404, "NONE".to_owned())
    );
    let retried = send(served.address.clone(), "1").await.unwrap();
    assert_eq!(retried.status(), 200, "decided afresh");
    assert!(retried.headers().get("Wow-Replayed").is_none());
    let body: serde_json::Value = retried.json().await.unwrap();
    assert_eq!(body["aggregateVersion"], 2);
    assert_eq!(
        look_up(served.address.clone()).await,
        (200, "APPENDED".to_owned())
    );
    assert!(served.stop().success());
}
