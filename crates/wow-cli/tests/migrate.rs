//! `wow migrate`: a dry run says what would be applied and changes nothing; two processes
//! migrating one database at once both succeed, and the schema ends at this build's version.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Stdio};

use support::wow;

/// Runs `wow migrate --store URL` twice at the same moment, as two processes.
fn migrate_twice_at_once(url: &str) {
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_wow"))
            .args(["migrate", "--store", url])
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (spawn(), spawn());
    for child in [first, second] {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{output:?}");
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(said.contains("migrated: schema version"), "{said}");
    }
}

/// Asserts that the store at `url` is at this build's schema version, nothing pending.
fn assert_at_latest(url: &str) {
    let (code, said) = wow(&["migrate", "--store", url, "--dry-run"]);
    assert_eq!(code, 0);
    assert!(
        said.contains(&format!("schema version {}", latest(&said))),
        "{said}"
    );
    assert!(!said.contains("pending"), "{said}");
}

fn latest(said: &str) -> String {
    said.lines()
        .next()
        .and_then(|line| line.split("this build: ").nth(1))
        .map(|tail| tail.trim_end_matches(')').to_owned())
        .unwrap()
}

#[test]
fn a_dry_run_lists_every_pending_migration_and_makes_nothing() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("new.db");
    let url = format!("sqlite://{}", path.display());
    let (code, said) = wow(&["migrate", "--store", &url, "--dry-run"]);
    assert_eq!(code, 0, "{said}");
    let latest: u32 = latest(&said).parse().unwrap();
    assert!(said.contains("schema version 0"), "{said}");
    assert_eq!(said.matches("pending ").count(), latest as usize, "{said}");
    assert!(said.contains("dry run: nothing applied"), "{said}");
    assert!(!path.exists(), "a dry run makes no file");
}

#[test]
fn two_processes_migrating_one_sqlite_file_at_once_both_succeed() {
    // A new file is where two openers collide most (one turns it to WAL while the other reads
    // its header), and the collision is a matter of timing: race on several new files.
    let folder = tempfile::tempdir().unwrap();
    for round in 0..12 {
        let url = format!(
            "sqlite://{}",
            folder.path().join(format!("shared-{round}.db")).display()
        );
        migrate_twice_at_once(&url);
        assert_at_latest(&url);
    }
}

#[test]
fn two_processes_migrating_one_postgres_schema_at_once_both_succeed() {
    let Some((base, schema)) = support::postgres_schema("mig") else {
        return;
    };
    let url = format!("{base}?schema={schema}");
    migrate_twice_at_once(&url);
    assert_at_latest(&url);
    support::drop_schema(&base, &schema);
}
