//! A `wow serve` process for the tests, started on a free port and stopped with SIGTERM;
//! and one-shot `wow` runs.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Output, Stdio};

pub(crate) mod nats;

/// Runs `wow ARGS` to its end; returns its exit code and its standard output.
pub(crate) fn wow(args: &[&str]) -> (i32, String) {
    let output = run_wow(args);
    (exit_code(&output), text(&output.stdout))
}

/// Runs `wow ARGS` to its end; returns its exit code and its standard error.
pub(crate) fn wow_stderr(args: &[&str]) -> (i32, String) {
    let output = run_wow(args);
    (exit_code(&output), text(&output.stderr))
}

fn run_wow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wow"))
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .unwrap()
}

fn exit_code(output: &Output) -> i32 {
    output.status.code().unwrap_or(-1)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `wow serve` process, killed if the test ends before it stopped it (a failed assertion).
pub(crate) struct Served {
    child: Option<Child>,
    /// Where it listens, as its first line said.
    pub(crate) address: String,
    /// The rest of its standard output, kept open so that the server can still write.
    pub(crate) stdout: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Served {
    /// Starts `wow serve ARGS` with `env`, and waits for its `listening on` line.
    pub(crate) fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_wow"))
            .arg("serve")
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        // Owned by the guard from here on, so a failed start still kills the process.
        let mut served = Self {
            child: Some(child),
            address: String::new(),
            stdout,
        };
        let first = served.stdout.next().expect("a line").unwrap();
        served.address = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {first}"))
            .to_owned();
        served
    }

    /// Kills the process at once (SIGKILL): a crash, nothing finished or released.
    pub(crate) fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Sends SIGTERM and waits for the exit.
    pub(crate) fn stop(mut self) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let killed = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        child.wait().unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A PostgreSQL schema of the test's own on the test server: the server's URL and a fresh
/// schema name starting with `prefix`. `None` (with a `SKIPPED` line on stderr) when the
/// server is down and no backend is required; under `WOW_REQUIRE_BACKENDS=1` a server that is
/// down fails the test.
pub(crate) fn postgres_schema(prefix: &str) -> Option<(String, String)> {
    let base = std::env::var("WOW_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    if let Err(error) = std::net::TcpStream::connect("127.0.0.1:5432") {
        wow_tck::skip::unavailable(
            wow_tck::skip::Requirement::Backends,
            &format!("no PostgreSQL at 127.0.0.1:5432 ({error})"),
        );
        return None;
    }
    let unique = wow_core::id::new_id().replace('-', "");
    Some((base, format!("{prefix}_{}", &unique[unique.len() - 12..])))
}

/// Drops `schema` on the server at `base` (a test's cleanup; a failure is ignored).
pub(crate) fn drop_schema(base: &str, schema: &str) {
    let _ = Command::new("psql")
        .args([
            base,
            "-qc",
            &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
        ])
        .output();
}

/// The version a state answer's `ETag` names (`"3"`: 3), as `GET /{aggregate}/{id}/state`
/// and its time travel give it; `None` without one, or one not a quoted whole number.
pub(crate) fn tagged_version(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let tag = headers.get(reqwest::header::ETAG)?.to_str().ok()?;
    tag.strip_prefix('"')?.strip_suffix('"')?.parse().ok()
}
