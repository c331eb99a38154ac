//! The deployment under chaos: a PostgreSQL database of its own, a NATS server of its own, one
//! gateway on a fixed port and two processors, each a real `wow serve` process that the kill
//! schedule ends with SIGKILL (by its process id) and starts again.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::nats::OwnNats;
use crate::{now_ms, Rng};

/// How long a start or a recovery may take before the harness gives up on it.
const PATIENCE: Duration = Duration::from_secs(60);
/// The deployment's partitions (few, so that two processors share them visibly).
pub(crate) const PARTITIONS: usize = 8;

/// A `wow serve` process: killed when dropped.
pub(crate) struct Node {
    child: tokio::process::Child,
    /// Where it listens (`host:port`).
    pub(crate) address: String,
}

impl Node {
    /// Starts `wow serve --role ROLE` listening on `listen`, its standard error appended to
    /// `log`, and waits for its `listening on` line.
    async fn start(
        role: &str,
        listen: &str,
        store: &str,
        env: &[(String, String)],
        log: &Path,
    ) -> Result<Self, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("log {}: {e}", log.display()))?;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wow"))
            .args([
                "serve", "--listen", listen, "--store", store, "--role", role,
            ])
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn {role}: {e}"))?;
        let stdout = child.stdout.take().ok_or("no standard output")?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(PATIENCE, lines.next_line()).await;
        let Ok(Ok(Some(first))) = first else {
            return Err(format!("{role} on {listen} did not say where it listens"));
        };
        let address = first
            .strip_prefix("listening on ")
            .ok_or_else(|| format!("{role}: unexpected first line {first}"))?
            .to_owned();
        // The rest of its output is read and dropped, so that a write never blocks or fails.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self { child, address })
    }

    /// Kills the process at once (SIGKILL to its process id) and reaps it.
    async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

/// What the schedule killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Victim {
    /// Processor 0 or 1.
    Processor(usize),
    /// The gateway (restarted on the same port).
    Gateway,
    /// The NATS server (restarted on the same port and folder).
    Nats,
}

/// One kill and its recovery, in milliseconds since the epoch.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    /// What was killed.
    pub(crate) victim: Victim,
    /// When the SIGKILL was sent.
    pub(crate) killed_ms: u64,
    /// When the restarted process was started.
    pub(crate) restarted_ms: u64,
    /// When the deployment was whole again (see [`Cluster::until_healthy`]); `None` if never.
    pub(crate) healthy_ms: Option<u64>,
}

/// The running deployment.
pub(crate) struct Cluster {
    /// The database's URL (`postgres://…/wow_chaos_<pid>`).
    pub(crate) store: String,
    /// The server's URL the database was created from, to drop it at the end.
    admin: String,
    database: String,
    /// Whether [`Cluster::clean`] dropped the database already.
    dropped: bool,
    nats: OwnNats,
    env: Vec<(String, String)>,
    logs: PathBuf,
    gateway_listen: String,
    gateway: Option<Node>,
    processors: Vec<Option<Node>>,
    http: reqwest::Client,
    /// The largest resident set seen of each role's processes, in kB.
    pub(crate) peak_rss_kb: std::collections::BTreeMap<&'static str, u64>,
}

impl Cluster {
    /// Creates the database, starts NATS, two processors and the gateway, and waits until the
    /// processors own every partition.
    /// `lease_ttl_ms` is the processors' lease TTL: a dead one's partitions move after about
    /// this long.
    pub(crate) async fn start(logs: PathBuf, lease_ttl_ms: u64) -> Result<Self, String> {
        let admin = std::env::var("WOW_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let database = format!("wow_chaos_{}", std::process::id());
        let (server, _) = admin
            .split('?')
            .next()
            .and_then(|url| url.rsplit_once('/'))
            .ok_or_else(|| format!("not a database URL: {admin}"))?;
        let store = format!("{server}/{database}");
        let nats = OwnNats::start().ok_or("no nats-server")?;
        std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
        sql(
            &admin,
            &format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
        )
        .await?;
        // From here on the cluster exists, and dropping it drops the database.
        sql(&admin, &format!("CREATE DATABASE {database}")).await?;
        let env = vec![
            ("WOW_NATS_URL".to_owned(), nats.url()),
            ("WOW_NATS_NAMESPACE".to_owned(), "chaos".to_owned()),
            ("WOW_NATS_PARTITIONS".to_owned(), PARTITIONS.to_string()),
            ("WOW_NATS_STORAGE".to_owned(), "file".to_owned()),
            ("WOW_NATS_LEASE_TTL_MS".to_owned(), lease_ttl_ms.to_string()),
        ];
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let mut cluster = Self {
            store,
            admin,
            database,
            dropped: false,
            nats,
            env,
            logs,
            gateway_listen: format!("127.0.0.1:{port}"),
            gateway: None,
            processors: vec![None, None],
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .map_err(|e| e.to_string())?,
            peak_rss_kb: Default::default(),
        };
        for n in 0..cluster.processors.len() {
            cluster.restart(Victim::Processor(n)).await?;
        }
        cluster.restart(Victim::Gateway).await?;
        if cluster.until_healthy(Victim::Nats).await.is_none() {
            return Err("the processors never owned every partition".into());
        }
        Ok(cluster)
    }

    /// The gateway's address, the same across its restarts.
    pub(crate) fn gateway(&self) -> &str {
        &self.gateway_listen
    }

    /// Starts what `victim` names (again).
    async fn restart(&mut self, victim: Victim) -> Result<(), String> {
        let log = |name: &str| self.logs.join(format!("{name}.log"));
        match victim {
            Victim::Processor(n) => {
                let node = Node::start(
                    "processor",
                    "127.0.0.1:0",
                    &self.store,
                    &self.env,
                    &log(&format!("processor-{n}")),
                )
                .await?;
                self.processors[n] = Some(node);
            }
            Victim::Gateway => {
                // The port may be taken for a moment after the kill: try again until it binds.
                let started = Instant::now();
                let node = loop {
                    match Node::start(
                        "gateway",
                        &self.gateway_listen,
                        &self.store,
                        &self.env,
                        &log("gateway"),
                    )
                    .await
                    {
                        Ok(node) => break node,
                        Err(error) if started.elapsed() > PATIENCE => return Err(error),
                        Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                };
                self.gateway = Some(node);
            }
            Victim::Nats => tokio::task::block_in_place(|| self.nats.restart()),
        }
        Ok(())
    }

    /// Kills `victim` with SIGKILL.
    async fn kill(&mut self, victim: Victim) {
        match victim {
            Victim::Processor(n) => {
                if let Some(node) = self.processors[n].take() {
                    node.kill().await;
                }
            }
            Victim::Gateway => {
                if let Some(node) = self.gateway.take() {
                    node.kill().await;
                }
            }
            Victim::Nats => tokio::task::block_in_place(|| self.nats.kill()),
        }
    }

    /// Waits until the deployment is whole after `victim` restarted: a processor owns a share
    /// of the partitions and the two own every one between them (after a processor or NATS),
    /// the gateway answers `/health` with NATS connected (after the gateway or NATS). Returns
    /// when, or `None` after [`PATIENCE`].
    async fn until_healthy(&self, victim: Victim) -> Option<u64> {
        let started = Instant::now();
        while started.elapsed() < PATIENCE {
            // Each processor slot's partitions (none while it is down).
            let mut owned: Vec<Vec<u64>> = Vec::new();
            for node in &self.processors {
                let partitions = match node {
                    Some(node) => self.health(&node.address).await.and_then(|health| {
                        health["details"]["node"]["partitions"]
                            .as_array()
                            .map(|list| list.iter().filter_map(Value::as_u64).collect())
                    }),
                    None => None,
                };
                owned.push(partitions.unwrap_or_default());
            }
            let mut all: Vec<u64> = owned.iter().flatten().copied().collect();
            all.sort_unstable();
            let processors_whole = all == (0..PARTITIONS as u64).collect::<Vec<_>>()
                && match victim {
                    Victim::Processor(n) => owned.get(n).is_some_and(|list| !list.is_empty()),
                    _ => true,
                };
            let gateway_whole = match &self.gateway {
                Some(node) => self
                    .health(&node.address)
                    .await
                    .is_some_and(|health| health["details"]["node"]["nats"] == "CONNECTED"),
                None => false,
            };
            if processors_whole && gateway_whole {
                return Some(now_ms());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    async fn health(&self, address: &str) -> Option<Value> {
        let response = self
            .http
            .get(format!("http://{address}/health"))
            .send()
            .await
            .ok()?;
        response.json().await.ok()
    }

    /// Runs the kill schedule until `until`: waits a drawn interval, kills a drawn victim
    /// (a processor 3 times in 4, else the gateway or NATS), leaves it down a drawn moment,
    /// starts it again and waits until the deployment is whole, one fault at a time.
    pub(crate) async fn chaos(&mut self, rng: &mut Rng, until: Instant) -> Vec<Fault> {
        let mut faults = Vec::new();
        loop {
            let pause = Duration::from_millis(rng.between(1_000, 5_000));
            let down = Duration::from_millis(rng.between(0, 1_500));
            let victim = match rng.between(0, 8) {
                0..=2 => Victim::Processor(0),
                3..=5 => Victim::Processor(1),
                6 => Victim::Gateway,
                _ => Victim::Nats,
            };
            if Instant::now() + pause >= until {
                break;
            }
            tokio::time::sleep(pause).await;
            self.sample_memory();
            let killed_ms = now_ms();
            self.kill(victim).await;
            tokio::time::sleep(down).await;
            let restarted_ms = now_ms();
            let healthy_ms = match self.restart(victim).await {
                Ok(()) => self.until_healthy(victim).await,
                Err(error) => {
                    eprintln!("chaos: {victim:?} did not start again: {error}");
                    None
                }
            };
            eprintln!(
                "chaos: killed {victim:?}, down {} ms, whole again after {}",
                restarted_ms - killed_ms,
                healthy_ms.map_or("never".to_owned(), |at| format!("{} ms", at - restarted_ms))
            );
            faults.push(Fault {
                victim,
                killed_ms,
                restarted_ms,
                healthy_ms,
            });
            if healthy_ms.is_none() {
                break;
            }
        }
        faults
    }

    /// Starts whatever is down and waits until the deployment is whole.
    pub(crate) async fn heal(&mut self) -> bool {
        if self.nats.pid().is_none() {
            let _ = self.restart(Victim::Nats).await;
        }
        for n in 0..self.processors.len() {
            if self.processors[n].is_none() {
                let _ = self.restart(Victim::Processor(n)).await;
            }
        }
        if self.gateway.is_none() {
            let _ = self.restart(Victim::Gateway).await;
        }
        self.until_healthy(Victim::Nats).await.is_some()
    }

    fn sample_memory(&mut self) {
        let pids = [
            ("gateway", self.gateway.as_ref().and_then(Node::pid)),
            ("processor", self.processors[0].as_ref().and_then(Node::pid)),
            ("processor", self.processors[1].as_ref().and_then(Node::pid)),
            ("nats", self.nats.pid()),
        ];
        for (role, pid) in pids {
            if let Some(kb) = pid.and_then(rss_kb) {
                let peak = self.peak_rss_kb.entry(role).or_default();
                *peak = (*peak).max(kb);
            }
        }
    }

    /// Kills every process and drops the database.
    pub(crate) async fn clean(mut self) {
        for victim in [
            Victim::Gateway,
            Victim::Processor(0),
            Victim::Processor(1),
            Victim::Nats,
        ] {
            self.kill(victim).await;
        }
        if let Err(error) = sql(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.database),
        )
        .await
        {
            eprintln!("chaos: could not drop {}: {error}", self.database);
        }
        self.dropped = true;
    }
}

impl Drop for Cluster {
    /// A run that ends early (a panic) still drops its database; the processes die with
    /// their handles.
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        for node in self
            .processors
            .iter_mut()
            .chain([&mut self.gateway])
            .flatten()
        {
            let _ = node.child.start_kill();
        }
        let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.database);
        let _ = std::process::Command::new("psql")
            .args([self.admin.as_str(), "-qc", &drop])
            .output();
    }
}

/// Runs `statements` on the database at `url`.
async fn sql(url: &str, statements: &str) -> Result<(), String> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("PostgreSQL at {url}: {e}"))?;
    tokio::spawn(connection);
    client
        .batch_execute(statements)
        .await
        .map_err(|e| format!("{statements}: {e}"))
}

/// The resident set of process `pid`, in kB.
fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
