//! How a SQLite store is opened.

use std::path::PathBuf;
use std::str::FromStr;

use crate::OpenError;

/// When SQLite syncs the file to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Sync at every commit: nothing acknowledged is lost, even on power loss. The default.
    #[default]
    Full,
    /// Sync at checkpoints only: faster; an operating-system crash or power loss can lose the
    /// last acknowledged appends (never corrupt the file). A process crash loses nothing.
    Normal,
}

impl Synchronous {
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

/// Where and how to open a store. Plain values with defaults, as a URL
/// (`sqlite://PATH`, `sqlite::memory:` is not supported: use `memory://` stores instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    /// The database file; its folder is created if missing.
    pub path: PathBuf,
    /// The sync mode. Default [`Synchronous::Full`].
    pub synchronous: Synchronous,
    /// Read connections in the pool. Default 4.
    pub read_connections: usize,
    /// Appends committed together at most. Default 1024.
    pub max_batch: usize,
    /// Connections that run queries (Wow's query DSL over event streams and views), apart
    /// from the read connections, so that queries never hold up the command path; a tenant
    /// has half of them at most (at least one). Default 4.
    pub query_connections: usize,
    /// How long one query may run before it is stopped and answered
    /// [`QueryRefusal::TimedOut`](wow_core::query::QueryRefusal::TimedOut); also how long a
    /// query waits for its tenant's share. Default 5 s.
    pub query_timeout: std::time::Duration,
    /// How long the writer waits, at most, for more appends to join a group commit when
    /// fewer are queued than recent commits held (like PostgreSQL's `commit_delay`): a
    /// fraction of one fsync, so that one fsync serves them all. A lone writer never waits;
    /// zero never waits. Default zero ([`DEFAULT_COMMIT_DELAY`]): measured on this project's
    /// machines, every wait cost throughput at every load (docs/benchmarks.md), since the
    /// appends that arrive during one commit already make the next one's batch.
    pub commit_delay: std::time::Duration,
}

/// The default of [`SqliteOptions::commit_delay`].
pub const DEFAULT_COMMIT_DELAY: std::time::Duration = std::time::Duration::ZERO;

impl SqliteOptions {
    /// Options for the file at `path`, with the defaults.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            synchronous: Synchronous::Full,
            read_connections: 4,
            max_batch: 1024,
            query_connections: 4,
            query_timeout: wow_core::query::DEFAULT_QUERY_TIMEOUT,
            commit_delay: DEFAULT_COMMIT_DELAY,
        }
    }

    /// Sets the sync mode.
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// Sets the number of read connections (at least 1).
    pub fn read_connections(mut self, count: usize) -> Self {
        self.read_connections = count.max(1);
        self
    }

    /// Sets the number of query connections (at least 1).
    pub fn query_connections(mut self, count: usize) -> Self {
        self.query_connections = count.max(1);
        self
    }

    /// Sets the time budget of one query (at least a millisecond).
    pub fn query_timeout(mut self, budget: std::time::Duration) -> Self {
        self.query_timeout = budget.max(std::time::Duration::from_millis(1));
        self
    }

    /// Sets the longest wait for more appends to join a group commit (zero: never wait).
    pub fn commit_delay(mut self, delay: std::time::Duration) -> Self {
        self.commit_delay = delay;
        self
    }

    /// Sets the largest group commit (at least 1).
    pub fn max_batch(mut self, count: usize) -> Self {
        self.max_batch = count.max(1);
        self
    }
}

impl FromStr for SqliteOptions {
    type Err = OpenError;

    /// Reads `sqlite://PATH` (`sqlite:PATH` too), with optional `synchronous=normal`,
    /// `query_timeout_ms=N`, `query_connections=N` and `commit_delay_us=N` (`?…&…`).
    fn from_str(url: &str) -> Result<Self, Self::Err> {
        let rest = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .ok_or_else(|| OpenError::BadUrl(format!("`{url}` is not a sqlite:// URL")))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if path.is_empty() {
            return Err(OpenError::BadUrl(format!("`{url}` names no file")));
        }
        let mut options = SqliteOptions::new(path);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("synchronous", value)) if value.eq_ignore_ascii_case("full") => {
                    options.synchronous = Synchronous::Full
                }
                Some(("synchronous", value)) if value.eq_ignore_ascii_case("normal") => {
                    options.synchronous = Synchronous::Normal
                }
                Some(("query_timeout_ms", value)) => {
                    let millis = positive(url, pair, value)?;
                    options = options.query_timeout(std::time::Duration::from_millis(millis));
                }
                Some(("commit_delay_us", value)) => {
                    let micros = value.parse::<u64>().map_err(|_| {
                        OpenError::BadUrl(format!(
                            "`{pair}` in `{url}`: commit_delay_us takes a whole number of microseconds"
                        ))
                    })?;
                    options = options.commit_delay(std::time::Duration::from_micros(micros));
                }
                Some(("query_connections", value)) => {
                    let count = positive(url, pair, value)?;
                    options = options.query_connections(usize::try_from(count).unwrap_or(1));
                }
                _ => {
                    return Err(OpenError::BadUrl(format!(
                        "unknown option `{pair}` in `{url}`"
                    )))
                }
            }
        }
        Ok(options)
    }
}

/// `value` of the option `pair` of `url`, a whole number above zero.
fn positive(url: &str, pair: &str, value: &str) -> Result<u64, OpenError> {
    match value.parse::<u64>() {
        Ok(number) if number > 0 => Ok(number),
        _ => Err(OpenError::BadUrl(format!(
            "option `{pair}` in `{url}` takes a whole number above zero"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sqlite_urls() {
        let options: SqliteOptions = "sqlite://./data/wow.db".parse().unwrap();
        assert_eq!(options.path, PathBuf::from("./data/wow.db"));
        assert_eq!(options.synchronous, Synchronous::Full);
        let options: SqliteOptions = "sqlite:///tmp/x.db?synchronous=normal".parse().unwrap();
        assert_eq!(options.path, PathBuf::from("/tmp/x.db"));
        assert_eq!(options.synchronous, Synchronous::Normal);
        assert!("postgres://x".parse::<SqliteOptions>().is_err());
        assert!("sqlite://".parse::<SqliteOptions>().is_err());
        assert!("sqlite://x.db?fast=yes".parse::<SqliteOptions>().is_err());
        let options: SqliteOptions = "sqlite://x.db?query_timeout_ms=250&query_connections=3"
            .parse()
            .unwrap();
        assert_eq!(options.query_timeout, std::time::Duration::from_millis(250));
        assert_eq!(options.query_connections, 3);
        assert!("sqlite://x.db?query_timeout_ms=0"
            .parse::<SqliteOptions>()
            .is_err());
        assert!("sqlite://x.db?query_connections=many"
            .parse::<SqliteOptions>()
            .is_err());
    }

    #[test]
    fn reads_the_commit_delay_in_microseconds() {
        let default: SqliteOptions = "sqlite://x.db".parse().unwrap();
        assert_eq!(default.commit_delay, DEFAULT_COMMIT_DELAY);
        let none: SqliteOptions = "sqlite://x.db?commit_delay_us=0".parse().unwrap();
        assert_eq!(none.commit_delay, std::time::Duration::ZERO);
        let long: SqliteOptions = "sqlite://x.db?commit_delay_us=1500".parse().unwrap();
        assert_eq!(long.commit_delay, std::time::Duration::from_micros(1500));
        assert!("sqlite://x.db?commit_delay_us=soon"
            .parse::<SqliteOptions>()
            .is_err());
    }
}
