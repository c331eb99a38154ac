//! What a store says of itself to a readiness probe (`/health`): whether it can be reached,
//! whether it takes writes, how busy its connections are, and since when it is lost.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

/// A store that can say how it is, for operators and readiness probes. Optional: a store
/// in memory has nothing to say.
#[async_trait]
pub trait StoreHealth: Send + Sync + std::fmt::Debug {
    /// The store now, asked within `within` and never longer: an unanswered check is
    /// unreachable. A check that finds the store lost or back counts as a call for the
    /// store's own "lost" and "back" log lines.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a check writes nothing.
    async fn check(&self, within: Duration) -> StoreCheck;
}

/// What [`StoreHealth::check`] found, as `/health` reports it under `details.store`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct StoreCheck {
    /// `UP` (reachable and writable), `READ_ONLY` (reachable, refuses writes: a standby or a
    /// demoted primary), `DOWN` (not reachable within the check's time), `SATURATED` (every
    /// connection in use for the whole check: the server's state unknown).
    pub status: &'static str,
    /// Whether the store answered within the check's time.
    pub reachable: bool,
    /// Whether the store takes writes (a primary that is not read-only).
    pub writable: bool,
    /// The connections of the command path: open, at most, idle, callers waiting for one.
    pub connections: Option<ConnectionUse>,
    /// How long calls have been failing, when they are.
    pub lost_for_ms: Option<u64>,
    /// Why the check found it not `UP`, a sentence for operators (with a SQLSTATE when the
    /// server gave one).
    pub error: Option<String>,
}

impl StoreCheck {
    /// A store that answered: `UP` when `writable`, else `READ_ONLY`.
    pub fn reachable(writable: bool) -> Self {
        Self {
            status: if writable { "UP" } else { "READ_ONLY" },
            reachable: true,
            writable,
            connections: None,
            lost_for_ms: None,
            error: None,
        }
    }

    /// A store that did not answer, for `error`.
    pub fn unreachable(error: impl Into<String>) -> Self {
        Self {
            status: "DOWN",
            reachable: false,
            writable: false,
            connections: None,
            lost_for_ms: None,
            error: Some(error.into()),
        }
    }

    /// A store whose every connection stayed in use for the whole check, for `error`.
    pub fn saturated(error: impl Into<String>) -> Self {
        Self {
            status: "SATURATED",
            ..Self::unreachable(error)
        }
    }

    /// This check with `error` said.
    pub fn with_error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }

    /// This check with the connections' use.
    pub fn with_connections(mut self, connections: ConnectionUse) -> Self {
        self.connections = Some(connections);
        self
    }

    /// This check with how long calls have been failing.
    pub fn lost_for(mut self, lost: Option<Duration>) -> Self {
        self.lost_for_ms = lost.map(|lost| u64::try_from(lost.as_millis()).unwrap_or(u64::MAX));
        self
    }
}

/// How busy a pool of connections is; `waiting > 0` means it is saturated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionUse {
    /// Connections open now.
    pub open: usize,
    /// Connections the pool may open.
    pub max: usize,
    /// Open connections nobody holds.
    pub idle: usize,
    /// Callers waiting for a connection.
    pub waiting: usize,
}
