//! A pg_auto_failover formation of the test's own: a monitor and two PostgreSQL nodes (a
//! primary and its synchronous standby) on free ports under a temporary directory, run by
//! Debian's `pg_autoctl` (packages `pg-auto-failover-cli` and `postgresql-15-auto-failover`).
//! The monitor is tuned to notice a lost primary within seconds rather than its defaults'
//! tens of seconds, so that a test of a failover stays short.
//!
//! [`Formation::start`] skips loudly without the binaries (fails under
//! `WOW_REQUIRE_BACKENDS=1`). Dropping the formation thaws and stops every process it
//! started (by their ids) and removes its directory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::server::{as_owner, bin_dir, free_port, own_dir};

/// The monitor's settings that make a failover take seconds: a health check every
/// 500 ms with a 1 s timeout, a node unhealthy after 2 s without answers, and a primary
/// that does not answer taken as demoted after 3 s (its defaults: 5 s, 5 s, 20 s, 30 s).
const FAST_MONITOR: [&str; 5] = [
    "ALTER SYSTEM SET pgautofailover.health_check_period = 500",
    "ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000",
    "ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 200",
    "ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 2000",
    "ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 3000",
];

/// One `pg_autoctl` service the formation started, with its data directory and port.
#[derive(Debug)]
struct Service {
    child: Child,
    pgdata: PathBuf,
    port: u16,
}

/// How `pg_autoctl` is run: the formation's directory (its XDG directories and log), the
/// `PATH` with PostgreSQL's binaries, and the program.
#[derive(Debug)]
struct Tools {
    dir: PathBuf,
    pg_autoctl: PathBuf,
    path: String,
}

impl Tools {
    /// `pg_autoctl` with `args`, as the server's user, in the formation's own XDG
    /// directories, its output in the directory's log.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = as_owner(Path::new("/usr/bin/env"), &[]);
        command
            .arg(format!("PATH={}", self.path))
            .arg(format!(
                "XDG_CONFIG_HOME={}",
                self.dir.join("config").display()
            ))
            .arg(format!(
                "XDG_DATA_HOME={}",
                self.dir.join("share").display()
            ))
            .arg(format!(
                "XDG_RUNTIME_DIR={}",
                self.dir.join("run").display()
            ))
            .arg(&self.pg_autoctl)
            .args(args);
        command
    }

    /// Starts `pg_autoctl` with `args` in the background.
    fn spawn(&self, args: &[&str]) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("pg_autoctl.log"))
            .expect("the log");
        self.command(args)
            .stdout(log.try_clone().expect("the log"))
            .stderr(log)
            .spawn()
            .expect("pg_autoctl starts")
    }
}

/// A running formation: the monitor and nodes 1 and 2.
#[derive(Debug)]
pub struct Formation {
    tools: Tools,
    monitor: Service,
    nodes: Vec<Service>,
}

/// Where `pg_autoctl` is, if it is.
fn pg_autoctl() -> Option<PathBuf> {
    let path = PathBuf::from("/usr/bin/pg_autoctl");
    path.exists().then_some(path)
}

impl Formation {
    /// A monitor and two nodes, node 1 primary and node 2 its synchronous standby, or
    /// `None` after a `SKIPPED` line when the binaries are missing and not required.
    pub async fn start() -> Option<Self> {
        let (Some(bin), Some(pg_autoctl)) = (bin_dir(), pg_autoctl()) else {
            wow_tck::skip::unavailable(
                wow_tck::skip::Requirement::Backends,
                "no pg_auto_failover (apt-get install pg-auto-failover-cli postgresql-15-auto-failover)",
            );
            return None;
        };
        let dir = own_dir("wow-paf");
        let tools = Tools {
            path: format!("{}:/usr/bin:/bin", bin.display()),
            dir,
            pg_autoctl,
        };
        let pgdata = tools.dir.join("monitor");
        let port = free_port();
        let child = tools.spawn(&[
            "create",
            "monitor",
            "--pgdata",
            &pgdata.to_string_lossy(),
            "--pgport",
            &port.to_string(),
            "--auth",
            "trust",
            "--no-ssl",
            "--hostname",
            "127.0.0.1",
            "--run",
        ]);
        let mut formation = Self {
            tools,
            monitor: Service {
                child,
                pgdata,
                port,
            },
            nodes: Vec::new(),
        };
        let monitor_url = formation.monitor_url();
        // The monitor's `initdb` and start share two cores with the rest of the suite: three
        // minutes (it once took longer than 30 s, and once longer than 60 s, under the whole
        // suite).
        let client = connect_within(&monitor_url, Duration::from_secs(180)).await;
        for setting in FAST_MONITOR {
            client
                .batch_execute(setting)
                .await
                .expect("the monitor is tuned");
        }
        client
            .batch_execute("SELECT pg_reload_conf()")
            .await
            .expect("the monitor reloads");
        for number in 1..=2 {
            formation.add_node(number);
            // Node 1 first, alone: it becomes the primary.
            let expected: &[(&str, &str)] = if number == 1 {
                &[("node_1", "single")]
            } else {
                &[("node_1", "primary"), ("node_2", "secondary")]
            };
            formation
                .wait_for_states(expected, Duration::from_secs(40))
                .await;
        }
        Some(formation)
    }

    /// Starts node `number` against the monitor.
    fn add_node(&mut self, number: usize) {
        let pgdata = self.tools.dir.join(format!("node{number}"));
        let port = free_port();
        let monitor = format!(
            "postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=disable",
            self.monitor.port
        );
        let pgdata_arg = pgdata.to_string_lossy().into_owned();
        let port_arg = port.to_string();
        let child = self.tools.spawn(&[
            "create",
            "postgres",
            "--pgdata",
            &pgdata_arg,
            "--pgport",
            &port_arg,
            "--monitor",
            &monitor,
            "--auth",
            "trust",
            "--no-ssl",
            "--hostname",
            "127.0.0.1",
            "--pg-hba-lan",
            "--run",
        ]);
        self.nodes.push(Service {
            child,
            pgdata,
            port,
        });
    }

    /// The monitor's database, as its superuser.
    fn monitor_url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/pg_auto_failover",
            self.monitor.port
        )
    }

    /// The URL `pg_autoctl show uri` gives for the formation, as the superuser: both nodes,
    /// the primary wherever it is.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            self.nodes[0].port, self.nodes[1].port
        )
    }

    /// The URL of node `number` alone.
    pub fn node_url(&self, number: usize) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?connect_timeout=1",
            self.nodes[number - 1].port
        )
    }

    /// The nodes' (name, reported state, assigned state), as the monitor has them.
    pub async fn states(&self) -> Vec<(String, String, String)> {
        let Ok(Ok((client, connection))) = tokio::time::timeout(
            Duration::from_secs(2),
            tokio_postgres::connect(&self.monitor_url(), tokio_postgres::NoTls),
        )
        .await
        else {
            return Vec::new();
        };
        let task = tokio::spawn(connection);
        let rows = client
            .query(
                "SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node ORDER BY nodeid",
                &[],
            )
            .await
            .unwrap_or_default();
        drop(client);
        let _ = task.await;
        rows.iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect()
    }

    /// Waits until each (node, state) of `expected` is both reported and assigned.
    pub async fn wait_for_states(&self, expected: &[(&str, &str)], patience: Duration) {
        let deadline = Instant::now() + patience;
        loop {
            let states = self.states().await;
            let reached = expected.iter().all(|(node, state)| {
                states.iter().any(|(name, reported, goal)| {
                    name == node && reported == state && goal == state
                })
            });
            if reached {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the formation did not reach {expected:?} within {patience:?}: {states:?}\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The end of the formation's log, for a failure's message.
    fn log_tail(&self) -> String {
        let log =
            std::fs::read_to_string(self.tools.dir.join("pg_autoctl.log")).unwrap_or_default();
        let lines: Vec<_> = log.lines().rev().take(30).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// `pg_autoctl perform switchover`: the primary hands over to the standby, and waits for
    /// it.
    pub fn switchover(&self) {
        let pgdata = self.nodes[0].pgdata.to_string_lossy().into_owned();
        let output = self
            .tools
            .command(&["perform", "switchover", "--pgdata", &pgdata])
            .stdin(Stdio::null())
            .output()
            .expect("pg_autoctl perform switchover runs");
        assert!(
            output.status.success(),
            "switchover failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Freezes node `number` whole (its keeper and its PostgreSQL, as a hung machine).
    pub fn freeze(&self, number: usize) {
        signal(&descendants(self.nodes[number - 1].child.id()), "-STOP");
    }

    /// Lets node `number` run again.
    pub fn thaw(&self, number: usize) {
        signal(&descendants(self.nodes[number - 1].child.id()), "-CONT");
    }
}

/// Connects to `url`, retrying until `patience` is over.
async fn connect_within(url: &str, patience: Duration) -> tokio_postgres::Client {
    let deadline = Instant::now() + patience;
    loop {
        match tokio_postgres::connect(url, tokio_postgres::NoTls).await {
            Ok((client, connection)) => {
                tokio::spawn(connection);
                return client;
            }
            Err(error) => {
                assert!(Instant::now() < deadline, "no monitor at {url}: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Process `root` and every process below it, parents first.
fn descendants(root: u32) -> Vec<String> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .map(str::to_owned);
        if let Some(parent) = parent {
            parents.push((entry.file_name().to_string_lossy().into_owned(), parent));
        }
    }
    let mut found = vec![root.to_string()];
    let mut index = 0;
    while index < found.len() {
        let current = found[index].clone();
        found.extend(
            parents
                .iter()
                .filter(|(_, parent)| *parent == current)
                .map(|(pid, _)| pid.clone()),
        );
        index += 1;
    }
    found
}

/// Sends `signal` to `processes`, quietly (some may have ended).
fn signal(processes: &[String], signal: &str) {
    let _ = Command::new("kill")
        .arg(signal)
        .args(processes)
        .stderr(Stdio::null())
        .status();
}

impl Drop for Formation {
    fn drop(&mut self) {
        let services: Vec<_> = self.nodes.iter().chain([&self.monitor]).collect();
        let trees: Vec<_> = services.iter().map(|s| descendants(s.child.id())).collect();
        for tree in &trees {
            signal(tree, "-CONT");
        }
        for service in &services {
            let pgdata = service.pgdata.to_string_lossy().into_owned();
            let _ = self
                .tools
                .command(&["stop", "--pgdata", &pgdata, "--immediate"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        // What is left of the processes started here (their command lines say so).
        for tree in &trees {
            let left: Vec<_> = tree
                .iter()
                .filter(|pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|line| {
                        let line = String::from_utf8_lossy(&line);
                        line.contains("pg_autoctl") || line.contains("postgres")
                    })
                })
                .cloned()
                .collect();
            signal(&left, "-KILL");
        }
        for service in self.nodes.iter_mut().chain([&mut self.monitor]) {
            let _ = service.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.tools.dir);
    }
}
