//! `wow bench --embedded memory://` runs the real binary end to end: it serves the bank in
//! its own process, opens the accounts, sends a counted load over HTTP and reports it as
//! JSON.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

#[test]
fn an_embedded_counted_run_reports_every_request() {
    let output = Command::new(env!("CARGO_BIN_EXE_wow"))
        .args(["bench", "--embedded", "memory://", "--count", "200"])
        .args(["--connections", "4", "--aggregates", "10", "--json"])
        .env("RUST_LOG", "warn")
        .output()
        .expect("wow bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "wow bench failed: {stderr}");
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON object on stdout");

    assert_eq!(report["operation"], "deposit");
    assert_eq!(report["wait_stage"], "PROCESSED");
    assert_eq!(report["connections"], 4);
    assert_eq!(report["aggregates"], 10);
    assert_eq!(report["requests"], 200);
    assert_eq!(report["succeeded"], 200);
    assert_eq!(report["errors"], serde_json::json!({}), "{report}");

    let ms = |field: &str| report[field].as_f64().unwrap_or(-1.0);
    assert!(ms("p50_ms") > 0.0, "{report}");
    assert!(ms("p50_ms") <= ms("p90_ms"), "{report}");
    assert!(ms("p90_ms") <= ms("p99_ms"), "{report}");
    assert!(ms("p99_ms") <= ms("max_ms"), "{report}");
    assert!(ms("max_ms") < 10_000.0, "{report}");
    assert!(ms("average_tps") > 0.0 && ms("peak_tps") > 0.0, "{report}");
    assert!(
        ms("setup_ms") >= 0.0,
        "the deposit run opened its accounts first: {report}"
    );
    assert!(
        report["rss_end_kib"].as_u64().is_some_and(|kib| kib > 0),
        "{report}"
    );
    // The backlog gauge may not be served yet; when it is, the consumers caught up.
    if let Some(backlog) = report["backlog_at_end"].as_u64() {
        assert!(backlog == 0 || report["drain_ms"].is_u64(), "{report}");
    }
}
