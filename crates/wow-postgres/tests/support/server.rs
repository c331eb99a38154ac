//! A PostgreSQL server of the test's own, for what must never be done to the shared one:
//! made by `initdb` in a directory of its own, started by `pg_ctl` on a free port, frozen
//! (SIGSTOP to every process of the server, as a hung machine or a partition looks) and
//! thawed at will, stopped and removed when dropped.
//!
//! The binaries are `WOW_PG_BIN`'s, else Debian's `/usr/lib/postgresql/15/bin`; without them
//! [`OwnServer::start`] skips loudly (or fails under `WOW_REQUIRE_BACKENDS=1`). Run as root,
//! the server runs as the user `postgres` (PostgreSQL refuses root).

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where the PostgreSQL binaries are, if they are.
pub fn bin_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("WOW_PG_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"));
    dir.join("initdb").exists().then_some(dir)
}

/// Whether this process runs as root.
fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

/// `program` with `args`, as the user `postgres` when this process is root.
pub fn as_owner(program: &Path, args: &[&str]) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command
            .args(["-u", "postgres", "--"])
            .arg(program)
            .args(args);
        command
    } else {
        let mut command = Command::new(program);
        command.args(args);
        command
    }
}

/// Runs `command`, its output if it succeeded.
fn run(mut command: Command) -> Result<Output, String> {
    let output = command
        .output()
        .map_err(|e| format!("{command:?} did not run: {e}"))?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(format!(
            "{command:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// A free TCP port on 127.0.0.1 (free when asked).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

/// A new directory under the system's temporary one, owned by the server's user.
pub fn own_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    if is_root() {
        let _ = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status();
    }
    dir
}

/// A running server of the test's own.
#[derive(Debug)]
pub struct OwnServer {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl OwnServer {
    /// A new server with `settings` (`name=value`, in `postgresql.conf`), or `None` after a
    /// `SKIPPED` line when the binaries are missing and not required.
    pub fn start(settings: &[&str]) -> Option<Self> {
        let Some(bin) = bin_dir() else {
            wow_tck::skip::unavailable(
                wow_tck::skip::Requirement::Backends,
                "no PostgreSQL binaries (initdb, pg_ctl) in /usr/lib/postgresql/15/bin; \
                 install postgresql-15 or point WOW_PG_BIN at them",
            );
            return None;
        };
        let dir = own_dir("wow-pg");
        let data = dir.join("data");
        let data_arg = data.to_string_lossy().into_owned();
        run(as_owner(
            &bin.join("initdb"),
            &["-D", &data_arg, "-U", "postgres", "-A", "trust", "-N"],
        ))
        .expect("initdb");
        let port = free_port();
        let mut conf = format!(
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             fsync = off\nshared_buffers = 16MB\nmax_connections = 60\n",
            dir.display()
        );
        for setting in settings {
            conf.push_str(setting);
            conf.push('\n');
        }
        let conf_path = data.join("postgresql.conf");
        let mut all = std::fs::read_to_string(&conf_path).expect("postgresql.conf");
        all.push_str(&conf);
        std::fs::write(&conf_path, all).expect("postgresql.conf written");
        let server = Self { bin, dir, port };
        server
            .ctl(&["start", "-w", "-t", "30"])
            .expect("pg_ctl start");
        Some(server)
    }

    /// Restarts the server (a fast shutdown: every session ends), with what
    /// `postgresql.auto.conf` holds now.
    pub fn restart(&self) {
        self.ctl(&["restart", "-m", "fast", "-w", "-t", "30"])
            .expect("pg_ctl restart");
    }

    /// Runs `pg_ctl` on this server with `args`.
    fn ctl(&self, args: &[&str]) -> Result<Output, String> {
        let data = self.dir.join("data").to_string_lossy().into_owned();
        let log = self.dir.join("log").to_string_lossy().into_owned();
        let mut all = vec!["-D", data.as_str(), "-l", log.as_str()];
        all.extend_from_slice(args);
        run(as_owner(&self.bin.join("pg_ctl"), &all))
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL of the server's `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The postmaster's process id.
    fn pid(&self) -> String {
        std::fs::read_to_string(self.dir.join("data").join("postmaster.pid"))
            .expect("postmaster.pid")
            .lines()
            .next()
            .expect("a pid")
            .trim()
            .to_owned()
    }

    /// The postmaster and its children (each child is in a session of its own, so a signal
    /// to the postmaster's process group would miss them), the postmaster first.
    fn processes(&self) -> Vec<String> {
        let postmaster = self.pid();
        let mut all = vec![postmaster.clone()];
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid ...`; the command may hold spaces and parentheses.
            let parent = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1));
            if parent == Some(postmaster.as_str()) {
                all.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        all
    }

    /// Sends `signal` to every process of the server; whether all of them got it.
    fn signal(&self, signal: &str) -> bool {
        Command::new("kill")
            .arg(signal)
            .args(self.processes())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Freezes the server: every process stopped, its sockets still open (the kernel
    /// completes TCP handshakes for it), nothing answered.
    pub fn freeze(&self) {
        assert!(self.signal("-STOP"), "the server froze");
    }

    /// Lets a frozen server run again.
    pub fn thaw(&self) {
        assert!(self.signal("-CONT"), "the server runs again");
    }

    /// Runs each of `statements` on the server, one after the other, in a superuser session
    /// of its own (`ALTER SYSTEM` runs in no transaction block).
    pub async fn execute(&self, statements: &[&str]) {
        let (client, connection) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .expect("a session on the own server");
        let task = tokio::spawn(connection);
        for sql in statements {
            client.batch_execute(sql).await.expect("the statement runs");
        }
        drop(client);
        let _ = task.await;
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        // A frozen server cannot stop; a running one ignores the signal.
        let _ = self.signal("-CONT");
        let _ = self.ctl(&["stop", "-m", "immediate", "-w"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
