//! Real process, real kill: a writer appends with 32 concurrent writers and records every
//! acknowledged append; the test kills it with SIGKILL at a random moment, reopens the file
//! and checks that nothing acknowledged was lost and nothing was half-written. 20 kills.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wow_core::eventsourcing::RequestLog;

use wow_core::AggregateId;
use wow_sqlite::{SqliteOptions, SqliteStore};

const KILLS: usize = 20;

fn acknowledged(ack: &Path) -> Vec<(String, u64, String)> {
    let text = std::fs::read_to_string(ack).unwrap_or_default();
    text.split_inclusive('\n')
        .filter(|line| line.ends_with('\n'))
        .map(|line| {
            let mut parts = line.trim_end().split(' ');
            let id = parts.next().unwrap().to_owned();
            let version = parts.next().unwrap().parse().unwrap();
            let request = parts.next().unwrap().to_owned();
            (id, version, request)
        })
        .collect()
}

/// Kills the writer once it has acknowledged something, after a pseudo-random extra delay.
fn run_and_kill(db: &Path, ack: &Path, run: usize, delay_ms: u64) {
    let before = acknowledged(ack).len();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wow-sqlite-crash-writer"))
        .arg(db)
        .arg(ack)
        .arg(format!("run{run}"))
        .stdout(Stdio::null())
        .spawn()
        .expect("writer starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while acknowledged(ack).len() == before {
        assert!(
            Instant::now() < deadline,
            "the writer acknowledged nothing in 30 s"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the writer exited early: {status}");
        }
        std::thread::yield_now();
    }
    // The random moment of the kill (not a synchronisation: any moment must be safe).
    std::thread::sleep(Duration::from_millis(delay_ms));
    child.kill().expect("SIGKILL");
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_acknowledged_is_lost_across_kills() {
    let folder = tempfile::tempdir().unwrap();
    let (db, ack) = (folder.path().join("wow.db"), folder.path().join("acks.txt"));
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for run in 0..KILLS {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        run_and_kill(&db, &ack, run, seed % 150);
    }

    let store = SqliteStore::open(SqliteOptions::new(&db)).await.unwrap();
    let acks = acknowledged(&ack);
    assert!(
        acks.len() > KILLS,
        "too few appends to prove anything: {}",
        acks.len()
    );
    for (id, version, request) in &acks {
        let aggregate = AggregateId::new("crash", "ledger", id.clone(), "t");
        let record = store.find_request(&aggregate, request).await.unwrap();
        let record =
            record.unwrap_or_else(|| panic!("acknowledged append {id} v{version} is lost"));
        assert_eq!(record.version, *version);
    }

    let connection = rusqlite::Connection::open(&db).unwrap();
    let integrity: String = connection
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let mut versions: HashMap<String, Vec<i64>> = HashMap::new();
    let mut statement = connection
        .prepare(
            "SELECT aggregate_id, version, body FROM event_stream ORDER BY aggregate_id, version",
        )
        .unwrap();
    let rows = statement
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (id, version, body) = row.unwrap();
        let events: serde_json::Value = serde_json::from_str(&body).expect("a whole stream body");
        assert_eq!(
            events.as_array().map(Vec::len),
            Some(2),
            "stream {id} v{version} is partly written"
        );
        versions.entry(id).or_default().push(version);
    }
    for (id, versions) in &versions {
        let expected: Vec<i64> = (1..=versions.len() as i64).collect();
        assert_eq!(versions, &expected, "versions of {id} are not contiguous");
    }
    let (all, distinct): (i64, i64) = connection
        .query_row(
            "SELECT COUNT(*), COUNT(DISTINCT aggregate_id || ' ' || request_id) FROM event_stream",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(all, distinct, "a request id is held twice in one aggregate");
}
