//! `wow serve` as a user runs it: a real process, a real port, SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Kills the server if the test ends before it stopped it (a failed assertion).
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", &self.0.to_string()])
            .status();
    }
}

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
    let mut child = Command::new(env!("CARGO_BIN_EXE_wow"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .env("WOW_STORE", &store)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child.id());
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a line").unwrap();
    let address = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first}"));

    let client = reqwest::Client::new();
    let opened = client
        .post(format!("http://{address}/account/cli-1/open"))
        .header("Command-Request-Id", "open-cli-1")
        .header("Command-Wait-Stage", "PROJECTED")
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

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    std::mem::forget(guard);
    assert!(status.success(), "exit status {status}");
    assert!(
        folder.path().join("data/wow.db").exists(),
        "the store's folder was created"
    );
}
