//! A NATS server of a test's own: the system's `nats-server` with JetStream, on a free port,
//! its data in a temporary folder, killed and started again without disturbing anything else.

use std::time::{Duration, Instant};

/// How long a start may take before the test fails.
const NATS_PATIENCE: Duration = Duration::from_secs(60);

const NATS_SERVER: &str = "/usr/sbin/nats-server";

/// A NATS server of the test's own (the system's `nats-server`, JetStream on, its data in
/// a temporary folder), to be killed and started again without disturbing other tests.
pub(crate) struct OwnNats {
    /// The port it listens on, the same after each restart.
    pub(crate) port: u16,
    folder: tempfile::TempDir,
    child: Option<std::process::Child>,
}

impl OwnNats {
    /// Starts a server on a free port; `None` (with a `SKIPPED` line on stderr) when
    /// `nats-server` is missing and no backend is required.
    pub(crate) fn start() -> Option<Self> {
        if !std::path::Path::new(NATS_SERVER).exists() {
            wow_tck::skip::unavailable(
                wow_tck::skip::Requirement::Backends,
                &format!("no {NATS_SERVER} to start a NATS server of the test's own"),
            );
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut nats = Self {
            port,
            folder: tempfile::tempdir().unwrap(),
            child: None,
        };
        nats.restart();
        Some(nats)
    }

    /// Its client URL.
    pub(crate) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on the same port and folder, and waits until it listens.
    pub(crate) fn restart(&mut self) {
        let child = std::process::Command::new(NATS_SERVER)
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.folder.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                started.elapsed() < NATS_PATIENCE,
                "nats-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The running server's process id, if it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(std::process::Child::id)
    }

    /// Kills the server at once (SIGKILL).
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

impl Drop for OwnNats {
    fn drop(&mut self) {
        self.kill();
    }
}
