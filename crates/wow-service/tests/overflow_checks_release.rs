//! SPEC PX-1 from a team's own crate: a domain crate outside this workspace (its own
//! `[workspace]`, so wow-rs's `[profile.release] overflow-checks = true` does not apply),
//! built by `cargo build --release` with Cargo's default profiles, wraps its overflows; its
//! service must refuse to start, and with `WOW_OVERFLOW_CHECKS=warn` start, say so in
//! `/health`, and indeed wrap.
//!
//! Ignored by default: the release build of the service and its dependencies in a profile
//! of their own takes minutes (measured: see docs/spec-coverage.md, PX-1). `.ci/run` runs it
//! under `CI=true`; by hand: `cargo test -p wow-service --test overflow_checks_release --
//! --ignored`. The build goes to `target/tmp/overflow-checks-release`, which a second run
//! reuses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The team's crate: a loyalty account whose `apply` adds points with a plain `+`.
const MAIN_RS: &str = r#"
use serde::{Deserialize, Serialize};
use wow_core::aggregate::{Aggregate, CommandContext};
use wow_core::{schemars, Command, Event};

#[derive(Debug)]
pub struct Member;

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Points {
    pub points: u16,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Earn {
    pub points: u16,
}

#[derive(Debug, Clone, Command)]
pub enum MemberCommand {
    #[command(create)]
    Join,
    Earn(Earn),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Earned {
    pub points: u16,
}

#[derive(Debug, Clone, Event)]
pub enum MemberEvent {
    Joined,
    Earned(Earned),
}

impl Aggregate for Member {
    const CONTEXT_NAME: &'static str = "loyalty";
    const AGGREGATE_NAME: &'static str = "member";
    type State = Points;
    type Command = MemberCommand;
    type Event = MemberEvent;
    type Error = std::convert::Infallible;

    fn handle(
        _: &Points,
        command: MemberCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<MemberEvent>, std::convert::Infallible> {
        Ok(match command {
            MemberCommand::Join => vec![MemberEvent::Joined],
            MemberCommand::Earn(earn) => vec![MemberEvent::Earned(Earned { points: earn.points })],
        })
    }

    fn apply(state: &mut Points, event: &MemberEvent) {
        if let MemberEvent::Earned(earned) = event {
            state.points += earned.points;
        }
    }
}

fn main() -> std::process::ExitCode {
    wow_service::Service::builder()
        .aggregate::<Member>()
        .store("memory://")
        .run()
}
"#;

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Writes the team's crate under `dir` (its own workspace, no profile) and builds it in
/// release into `dir/target`: the path of its binary.
fn build_team_crate(dir: &Path) -> PathBuf {
    let repo = repo();
    let project = dir.join("project");
    std::fs::create_dir_all(project.join("src")).unwrap();
    let manifest = format!(
        r#"[package]
name = "loyalty-domain"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
serde = {{ version = "1", features = ["derive"] }}
wow-core = {{ path = "{core}" }}
wow-service = {{ path = "{service}" }}

# Its own workspace: Cargo's default profiles, as in a team's repository.
[workspace]
"#,
        core = repo.join("crates/wow-core").display(),
        service = repo.join("crates/wow-service").display(),
    );
    write_if_changed(&project.join("Cargo.toml"), &manifest);
    write_if_changed(&project.join("src/main.rs"), MAIN_RS);
    // The versions this workspace is tested with, and no registry look-up.
    if !project.join("Cargo.lock").exists() {
        std::fs::copy(repo.join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let started = Instant::now();
    let status = Command::new(cargo)
        .args(["build", "--release", "--offline", "--quiet"])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .unwrap();
    assert!(status.success(), "the team's crate does not build");
    eprintln!(
        "built the team's crate in release in {:.0?}",
        started.elapsed()
    );
    dir.join("target/release/loyalty-domain")
}

/// Writes `text` to `path` unless it holds it already (so a second run rebuilds nothing).
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).unwrap();
    }
}

/// The service started with `--listen 127.0.0.1:0`, with `env`.
fn start(binary: &Path, env: &[(&str, &str)]) -> Child {
    let mut command = Command::new(binary);
    command
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("WOW_OVERFLOW_CHECKS")
        .env_remove("WOW_STORE")
        .env_remove("WOW_CONFIG")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    command.spawn().unwrap()
}

/// One HTTP/1.1 request to `address`: the status and the JSON body.
fn http(address: &str, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let (_, body) = response.split_once("\r\n\r\n").unwrap();
    (status, serde_json::from_str(body).unwrap_or_default())
}

/// The default: the start is refused, naming the crate, its aggregate and the fix.
fn by_default_the_start_is_refused_naming_the_crate_and_the_fix(binary: &Path) {
    let refused = start(binary, &[]).wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        String::from_utf8_lossy(&refused.stdout).is_empty(),
        "it must not listen"
    );
    assert!(
        stderr
            .contains("`loyalty-domain` (aggregate `member`) was compiled without overflow checks"),
        "{stderr}"
    );
    assert!(
        stderr.contains("`wow-core` (the framework's, and with it the views, sagas and consumers) was compiled without overflow checks"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Add `[profile.release] overflow-checks = true` to the Cargo.toml"),
        "{stderr}"
    );
}

/// The service started with `WOW_OVERFLOW_CHECKS=warn`: the child, a thread reading all it
/// logs, and the address it listens on.
fn start_with_warn(binary: &Path) -> (Child, std::thread::JoinHandle<String>, String) {
    let mut child = start(binary, &[("WOW_OVERFLOW_CHECKS", "warn")]);
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let logged = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("no `listening on` line within 60 s");
    let address = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (child, logged, address)
}

/// Started with the setting, the service lists the crate in /health and indeed wraps: in this
/// crate, 60000 + 60000 points wrap to 54464.
fn with_warn_health_lists_the_crate_and_its_points_wrap(address: &str) {
    let (status, health) = http(address, "GET", "/health", "");
    assert_eq!(status, 200);
    assert_eq!(health["status"], "UP");
    let warnings = health["details"]["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w.as_str().unwrap().starts_with(
            "`loyalty-domain` (aggregate `member`) was compiled without overflow checks"
        )),
        "{health}"
    );
    // What the check is about: in this crate, 60000 + 60000 points wrap to 54464.
    let (status, body) = http(address, "POST", "/member/m1/join", "{}");
    assert_eq!(status, 200, "{body}");
    for _ in 0..2 {
        let (status, body) = http(address, "POST", "/member/m1/earn", r#"{"points":60000}"#);
        assert_eq!(status, 200, "{body}");
    }
    let (status, state) = http(address, "GET", "/member/m1/state", "");
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["points"], 54464, "{state}");
}

#[test]
#[ignore = "builds a crate outside the workspace in release (minutes): .ci/run runs it under CI=true"]
fn a_team_crate_built_by_cargos_default_release_profile_is_refused_and_with_warn_starts_and_wraps()
{
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("overflow-checks-release");
    let binary = build_team_crate(&dir);
    by_default_the_start_is_refused_naming_the_crate_and_the_fix(&binary);

    // With the setting: it starts, logs the error, lists the crates in /health, and wraps.
    let (mut child, logged, address) = start_with_warn(&binary);
    let checks =
        std::panic::catch_unwind(|| with_warn_health_lists_the_crate_and_its_points_wrap(&address));
    child.kill().unwrap();
    child.wait().unwrap();
    if let Err(failed) = checks {
        std::panic::resume_unwind(failed);
    }
    let stderr = logged.join().unwrap();
    assert!(
        stderr.contains("starting anyway, as WOW_OVERFLOW_CHECKS=warn says"),
        "{stderr}"
    );
}
