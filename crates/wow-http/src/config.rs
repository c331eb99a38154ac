//! The HTTP settings.

use std::collections::HashMap;
use std::time::Duration;

use crate::TokenBinding;

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
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            body_limit: 1024 * 1024,
            default_wait_timeout: Duration::from_secs(30),
            max_wait_timeout: Duration::from_secs(600),
            auth_tokens: HashMap::new(),
        }
    }
}
