//! The HTTP settings.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::binding::TokenBinding;

/// Settings of the HTTP API. Plain values; `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// The largest request body accepted. Default 1 MiB.
    pub body_limit: usize,
    /// How long a command waits when `Command-Wait-Timeout` is absent. Default 30 s.
    pub default_wait_timeout: Duration,
    /// The longest wait a caller may ask for. Default 10 min.
    pub max_wait_timeout: Duration,
    /// Bearer token → what it acts for. Empty: auth is off and the tenant comes from
    /// `Command-Tenant-Id` (default `(0)`). Not empty: every command and query needs a known
    /// token, and its tenant is the only one it can reach; a token bound to an owner (and a
    /// space) reaches only that owner's (and space's) aggregates (SPEC TN-2).
    pub auth_tokens: HashMap<String, TokenBinding>,
    /// The operator's bearer tokens: they alone reach `/metrics`, `/metrics.json` and the
    /// operations page (`/ui` and its files) once either this or `auth_tokens` is not empty
    /// ([`HttpConfig::operator_gated`]). An operator token reaches no tenant's routes but the
    /// delete and recover of an aggregate whose lifecycle is
    /// [`Operator`](wow_core::aggregate::Lifecycle::Operator) (as its bearer token, in the
    /// tenant `Command-Tenant-Id` names), and a tenant's token is not an operator token
    /// (403). A browser carries one in the cookie that `GET /ui?token=…` sets, so each should hold only the characters of a cookie
    /// value: `A-Z a-z 0-9 - . _ ~ + / =` (the settings refuse any other).
    pub operator_tokens: HashSet<String>,
    /// The bounds of the heavy reads: Wow's queries, history ranges and time travel.
    pub reads: ReadLimits,
}

/// How much of the server's read work one tenant and one peer may hold, and how long each
/// heavy read (Wow's queries, history ranges, time travel) may take (SPEC TN-1). A read past
/// its tenant's or its peer's share waits for a place at most `wait`, then is answered 429
/// `TooManyRequests` with `Retry-After`; a read past `budget` is stopped and answered 503
/// `QueryTimeout`. Either way nothing was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Heavy reads of one tenant at once. Default: half the machine's cores, at least 1.
    pub per_tenant: usize,
    /// Heavy reads from one peer (one client IP address, whatever tenants it names) at once.
    /// Default: half the machine's cores, at least 1, so one client's heavy reads leave the
    /// other half to everyone else. Behind a reverse proxy every client is the proxy's
    /// address: raise it there and let the proxy limit each client.
    pub per_peer: usize,
    /// How long a read waits for a place in its shares. Default 1 s.
    pub wait: Duration,
    /// How long one heavy read may take, its store calls and the shaping of its answer
    /// together. Default 5 s.
    pub budget: Duration,
}

impl Default for ReadLimits {
    fn default() -> Self {
        let half_the_cores = std::thread::available_parallelism()
            .map_or(1, |cores| cores.get() / 2)
            .max(1);
        Self {
            per_tenant: half_the_cores,
            per_peer: half_the_cores,
            wait: Duration::from_secs(1),
            budget: Duration::from_secs(5),
        }
    }
}

impl HttpConfig {
    /// Whether the operator's routes need an operator token: when any token is configured
    /// (tenants' or the operator's). With neither, auth is off and they answer anyone.
    pub fn operator_gated(&self) -> bool {
        !self.auth_tokens.is_empty() || !self.operator_tokens.is_empty()
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            body_limit: 1024 * 1024,
            default_wait_timeout: Duration::from_secs(30),
            max_wait_timeout: Duration::from_secs(600),
            auth_tokens: HashMap::new(),
            operator_tokens: HashSet::new(),
            reads: ReadLimits::default(),
        }
    }
}
