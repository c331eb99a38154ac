//! Databases written by an earlier release of wow-rs (store schema 6) holding the bank's first
//! event shapes open through today's `wow serve`: the schema is migrated, the states fold the
//! upcast history, the view is rebuilt by catch-up, and the history route shows today's
//! shapes with what each event was stored as. The fixtures and how they were made are in
//! `tests/fixtures/` (`make_fixtures.py`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;

use serde_json::Value;
use support::Served;

async fn get(address: &str, path: &str) -> Value {
    let body = reqwest::get(format!("http://{address}/{path}"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    serde_json::from_str(&body).unwrap_or(Value::Null)
}

/// A state: the bare state and its version (its `ETag`).
async fn get_state(address: &str, path: &str) -> (Value, Option<u64>) {
    let response = reqwest::get(format!("http://{address}/{path}"))
        .await
        .unwrap();
    let version = support::tagged_version(response.headers());
    let body = response.text().await.unwrap();
    (serde_json::from_str(&body).unwrap_or(Value::Null), version)
}

/// What a bank opened from the fixture must show.
async fn check(served: &Served) {
    let address = served.address.as_str();
    let (alice, version) = get_state(address, "account/alice/state").await;
    assert_eq!(version, Some(3), "{alice}");
    // Opened with 100 (revision 0.0.0's `initial`), 20 in as `MoneyDeposited`, 5 out.
    assert_eq!(alice["balance"], 115, "{alice}");
    assert_eq!(alice["name"], "Alice", "{alice}");
    let (bob, _) = get_state(address, "account/bob/state").await;
    assert_eq!(bob["balance"], 7, "{bob}");

    let history = get(address, "account/alice/event/1/3").await;
    let opened = &history[0]["body"][0];
    assert_eq!(opened["name"], "AccountOpened");
    assert_eq!(opened["revision"], "0.0.1");
    assert_eq!(opened["storedRevision"], "0.0.0");
    assert_eq!(opened["body"]["name"], "Alice");
    let deposited = &history[1]["body"][0];
    assert_eq!(deposited["name"], "Deposited");
    assert_eq!(deposited["storedName"], "MoneyDeposited");
    assert!(
        history[2]["body"][0].get("storedName").is_none(),
        "{history}"
    );

    // The view did not exist in that release's tables: the start's catch-up built it.
    let view = get(address, "account/alice/view").await;
    assert_eq!(view["balance"], 115, "{view}");
}

#[tokio::test]
async fn a_sqlite_file_of_an_earlier_release_opens_migrates_and_reads_in_todays_shapes() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("bank.db");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bank-v6.db"),
        &path,
    )
    .unwrap();
    let url = format!("sqlite://{}", path.display());
    let served = Served::start(&["--listen", "127.0.0.1:0", "--store", &url], &[]);
    check(&served).await;
    assert!(served.stop().success());
    // Migrated in place, nothing lost: the file is at this build's version.
    let (code, said) = support::wow(&["migrate", "--store", &url, "--dry-run"]);
    assert_eq!(code, 0);
    assert!(!said.contains("pending"), "{said}");
}

#[tokio::test]
async fn a_postgres_dump_of_an_earlier_release_opens_migrates_and_reads_in_todays_shapes() {
    let Some((base, schema)) = support::postgres_schema("earlier") else {
        return;
    };
    let dump = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bank-v6.pg.sql"
    ))
    .unwrap()
    .replace("fixture_v6", &schema);
    // The dump makes its schema itself.
    let mut psql = Command::new("psql")
        .args([&base, "-q", "-v", "ON_ERROR_STOP=1"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(psql.stdin.as_mut().unwrap(), dump.as_bytes()).unwrap();
    drop(psql.stdin.take());
    assert!(psql.wait().unwrap().success(), "the dump restores");

    let url = format!("{base}?schema={schema}");
    let served = Served::start(&["--listen", "127.0.0.1:0", "--store", &url], &[]);
    check(&served).await;
    assert!(served.stop().success());
    let (code, said) = support::wow(&["migrate", "--store", &url, "--dry-run"]);
    assert_eq!(code, 0);
    assert!(!said.contains("pending"), "{said}");
    support::drop_schema(&base, &schema);
}
