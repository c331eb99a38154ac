//! A three-node NATS JetStream cluster of the machine's `nats-server`, on ports of its own
//! and stores in a temporary directory, for tests that lose a server. Every server is killed
//! when the cluster is dropped.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One server of the cluster: its client and route ports, and its process while it runs.
#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) name: String,
    pub(crate) port: u16,
    route: u16,
    store: PathBuf,
    child: Option<Child>,
}

/// Three servers routed to each other, JetStream on each.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) servers: Vec<Server>,
    _dir: tempdir::Dir,
    routes: String,
}

mod tempdir {
    /// A directory removed on drop.
    #[derive(Debug)]
    pub(crate) struct Dir(pub(crate) std::path::PathBuf);

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `nats-server --version` line, or `None` when there is no `nats-server`.
pub(crate) fn version() -> Option<String> {
    let output = Command::new("nats-server").arg("--version").output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

impl Cluster {
    /// Starts three servers; `None` (with a `SKIPPED` line) when `nats-server` is missing
    /// and no backend is required.
    pub(crate) fn start() -> Option<Self> {
        if version().is_none() {
            wow_tck::skip::unavailable(
                wow_tck::skip::Requirement::Backends,
                "no `nats-server` on the PATH to run a three-node cluster",
            );
            return None;
        }
        let dir = std::env::temp_dir().join(format!(
            "wow-nats-cluster-{}",
            uuid::Uuid::now_v7().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let servers: Vec<Server> = (0..3)
            .map(|n| Server {
                name: format!("n{n}"),
                port: free_port(),
                route: free_port(),
                store: dir.join(format!("n{n}")),
                child: None,
            })
            .collect();
        let routes = servers
            .iter()
            .map(|s| format!("nats://127.0.0.1:{}", s.route))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Self {
            servers,
            _dir: tempdir::Dir(dir),
            routes,
        };
        for n in 0..3 {
            cluster.run(n);
        }
        Some(cluster)
    }

    /// The client URL list: `nats://127.0.0.1:a,nats://127.0.0.1:b,...`.
    pub(crate) fn url(&self) -> String {
        self.servers
            .iter()
            .map(|s| format!("nats://127.0.0.1:{}", s.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts server `n` (again), on its ports and store.
    pub(crate) fn run(&mut self, n: usize) {
        let routes = self.routes.clone();
        let server = &mut self.servers[n];
        let child = Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &server.port.to_string()])
            .args(["-n", &server.name, "--cluster_name", "wowtest"])
            .args(["--cluster", &format!("nats://127.0.0.1:{}", server.route)])
            .args(["--routes", &routes])
            .args(["-js", "-sd", &server.store.to_string_lossy()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        server.child = Some(child);
    }

    /// Kills server `n` (SIGKILL): a crash.
    pub(crate) fn kill(&mut self, n: usize) {
        if let Some(mut child) = self.servers[n].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to server `n`: a hung server, and its resumption.
    pub(crate) fn signal(&self, n: usize, signal: &str) {
        if let Some(child) = &self.servers[n].child {
            let status = Command::new("kill")
                .args([format!("-{signal}"), child.id().to_string()])
                .status()
                .unwrap();
            assert!(status.success(), "kill -{signal}");
        }
    }

    /// Which server (index) has the name `name`.
    pub(crate) fn index_of(&self, name: &str) -> Option<usize> {
        self.servers.iter().position(|s| s.name == name)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in 0..self.servers.len() {
            self.signal(n, "CONT");
            self.kill(n);
        }
    }
}

/// Polls `probe` every 50 ms until it is `Some`, for at most `within`.
pub(crate) async fn eventually<T, F, Fut>(what: &str, within: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
