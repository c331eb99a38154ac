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
    monitor: u16,
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
                monitor: free_port(),
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
            .args(["-m", &server.monitor.to_string()])
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

    /// The name of the JetStream meta leader, as the first server that answers its
    /// monitoring endpoint within a second says; `None` when none does or there is none.
    pub(crate) fn meta_leader(&self) -> Option<String> {
        self.servers
            .iter()
            .filter(|server| server.child.is_some())
            .find_map(|server| {
                let jsz = http_get(server.monitor, "/jsz")?;
                let jsz: serde_json::Value = serde_json::from_str(&jsz).ok()?;
                jsz["meta_cluster"]["leader"].as_str().map(str::to_owned)
            })
    }

    /// Each server's name and monitoring port.
    pub(crate) fn monitors(&self) -> Vec<(String, u16)> {
        self.servers
            .iter()
            .filter(|server| server.child.is_some())
            .map(|server| (server.name.clone(), server.monitor))
            .collect()
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

/// One server's view of `stream` and its consumer `consumer`, as its `/jsz` says.
pub(crate) fn local_view(port: u16, stream: &str, consumer: &str) -> String {
    let Some(jsz) = http_get(port, "/jsz?accounts=true&streams=true&consumers=true") else {
        return "no answer".into();
    };
    let Ok(jsz) = serde_json::from_str::<serde_json::Value>(&jsz) else {
        return "no JSON".into();
    };
    let streams = jsz["account_details"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|account| account["stream_detail"].as_array().into_iter().flatten());
    for detail in streams {
        if detail["name"] != stream {
            continue;
        }
        let state = &detail["state"];
        let mut line = format!(
            "stream messages {} seq {}..{} leader {}",
            state["messages"], state["first_seq"], state["last_seq"], detail["cluster"]["leader"]
        );
        for c in detail["consumer_detail"].as_array().into_iter().flatten() {
            if c["name"] == consumer {
                line.push_str(&format!(
                    "; consumer delivered {} ack floor {} pending {} ack pending {} \
                     redelivered {} waiting {} leader {}",
                    c["delivered"]["stream_seq"],
                    c["ack_floor"]["stream_seq"],
                    c["num_pending"],
                    c["num_ack_pending"],
                    c["num_redelivered"],
                    c["num_waiting"],
                    c["cluster"]["leader"],
                ));
            }
        }
        return line;
    }
    "no such stream".into()
}

/// The body of `GET path` on the local port `port`, or `None` when it does not answer
/// within a second (a frozen server).
fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let timeout = Duration::from_secs(1);
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = std::net::TcpStream::connect_timeout(&address, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
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
