//! A service's settings: flags win over `WOW_*` environment variables, which win over the
//! TOML file, which wins over the defaults. The keys are those of `wow serve`
//! (docs/operations.md, "Configuration"):
//!
//! | flag | variable | TOML key | default |
//! |---|---|---|---|
//! | `--listen` | `WOW_LISTEN` | `listen` | `127.0.0.1:8080` |
//! | `--store` | `WOW_STORE` | `store` | the service's, else `sqlite://./data/wow.db` |
//! | `--config` | `WOW_CONFIG` | | no file |
//! | | `WOW_WAIT_TIMEOUT_MS` | `wait_timeout_ms` | 30000 |
//! | | `WOW_BODY_LIMIT` | `body_limit` | 1 MiB |
//! | | `WOW_HEADER_READ_TIMEOUT_MS`, `WOW_BODY_READ_TIMEOUT_MS`, `WOW_WRITE_TIMEOUT_MS`, `WOW_MAX_HEADER_BYTES`, `WOW_MAX_CONNECTIONS`, `WOW_MAX_CONNECTIONS_PER_PEER`, `WOW_SHUTDOWN_GRACE_MS` | the same in snake case, without `WOW_` | [`ServerLimits`](wow_http::ServerLimits) |
//! | | `WOW_IDEMPOTENCY_TTL_MS`, `WOW_IDEMPOTENCY_EXPECTED_INSERTIONS`, `WOW_IDEMPOTENCY_ENABLED` | `[idempotency]` | [`IdempotencyConfig`] |
//! | | `WOW_COMPENSATION_MAX_ATTEMPTS`, `..._INITIAL_BACKOFF_MS`, `..._MAX_BACKOFF_MS`, `..._INTERVAL_MS` | `[compensation]` | [`RetrySpec`], every second |
//! | | `WOW_AUTH_TOKENS` (`token=tenant[/owner[/space]],...`) | `[auth_tokens]` (`token = "tenant[/owner[/space]]"`) | auth off |
//! | | `WOW_OPERATOR_TOKENS` (`token,token2`) | `operator_tokens` (`["token"]`) | none: with auth on, `/metrics` and `/ui` answer no one |
//! | | `WOW_SNAPSHOT_QUERIES` (`true`/`false`) | `snapshot_queries` | `true`; `false`: Wow's snapshot queries and `GET /{aggregate}/{id}/snapshot` answer 404 |
//! | | `WOW_OVERFLOW_CHECKS` (`require`/`warn`) | `overflow_checks` | `require`: a crate built so that overflows wrap stops the start ([`OverflowChecks`]) |
//! | | `WOW_READS_PER_TENANT`, `WOW_READS_PER_PEER`, `WOW_READ_BUDGET_MS` | `reads_per_tenant`, `reads_per_peer`, `read_budget_ms` | half the cores each, 5000 ([`ReadLimits`]) |
//! | `--role` | `WOW_ROLE` | `role` | `monolith` ([`Role`]) |
//! | | `WOW_NATS_URL`, `WOW_NATS_PARTITIONS`, `WOW_NATS_REPLICAS`, `WOW_NATS_STORAGE`, `WOW_NATS_LEASE_TTL_MS`, `WOW_NATS_ACK_WAIT_MS`, `WOW_NODE_ID` | `[nats]` (`url`, `partitions`, ...) | [`DistributedSettings`] |
//!
//! The flags are read by [`Settings::from_command_line`] (see [`ServeArgs`](crate::ServeArgs)).

mod distributed;
mod role;
mod sources;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use wow_core::compensation::RetrySpec;
use wow_http::{HttpConfig, ReadLimits, ServerLimits, TokenBinding};
use wow_runtime::idempotency::IdempotencyConfig;

use sources::{Env, FileConfig};

use crate::build_check::OverflowChecks;

pub use distributed::{CommandStorage, DistributedSettings};
pub use role::Role;

/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The store opened when neither the settings nor the service name one.
pub const DEFAULT_STORE: &str = "sqlite://./data/wow.db";
/// How long a command waits when its caller does not say.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest command body accepted.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// How often the compensation scheduler looks for due retries.
pub const DEFAULT_RETRY_EVERY: Duration = Duration::from_secs(1);
/// How often the deadline scheduler looks for due deadlines when nothing wakes it sooner.
pub const DEFAULT_DEADLINE_POLL: Duration = Duration::from_secs(1);

/// Why the settings could not be read. Nothing was started; fix the named source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The TOML file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML file is not valid TOML, or holds a key or a value the settings do not take.
    #[error("{path} is not valid: {source}")]
    Parse {
        /// The file.
        path: String,
        /// Where and why.
        source: toml::de::Error,
    },
    /// A `WOW_*` variable holds a value of the wrong form.
    #[error("{name} must be {what}, not `{value}`")]
    Env {
        /// The variable.
        name: &'static str,
        /// The form it must have.
        what: &'static str,
        /// What it holds.
        value: String,
    },
    /// The idempotency settings cannot be served with.
    #[error("idempotency settings: {0}")]
    Idempotency(String),
    /// The distributed settings cannot be served with, or the role needs one missing.
    #[error("distributed settings: {0}")]
    Distributed(String),
    /// The server limits cannot be served with (a zero, say).
    #[error("server limits: {0}")]
    ServerLimits(#[from] wow_http::InvalidLimits),
    /// A token's binding is not `tenant[/owner[/space]]` (the token itself is not shown).
    #[error("an auth token of {from}: {source}")]
    AuthToken {
        /// `WOW_AUTH_TOKENS` or `[auth_tokens]`.
        from: &'static str,
        /// What is wrong with the binding.
        source: wow_http::InvalidBinding,
    },
    /// An operator token breaks its rule, or is a tenant's token too (the token itself is not
    /// shown).
    #[error("an operator token of {from} {why}")]
    OperatorToken {
        /// `WOW_OPERATOR_TOKENS` or `operator_tokens`.
        from: &'static str,
        /// The rule it breaks.
        why: &'static str,
    },
}

/// The resolved settings of a service. `Default` is every default, with no file and no
/// environment read.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Where to listen.
    pub listen: String,
    /// The store URL the settings name (`sqlite://PATH`, `postgres://...`, `memory://`);
    /// `None` leaves it to the service ([`ServiceBuilder::store`](crate::ServiceBuilder::store),
    /// else [`DEFAULT_STORE`]).
    pub store: Option<String>,
    /// How long a command waits when `Command-Wait-Timeout` is absent.
    pub wait_timeout: Duration,
    /// The largest command body accepted, in bytes.
    pub body_limit: usize,
    /// How the server holds its connections.
    pub server_limits: ServerLimits,
    /// How much heavy read work (Wow's queries, history ranges, time travel) one tenant and
    /// one client may hold, and how long each may take.
    pub reads: ReadLimits,
    /// The Bloom filters of the request-id check.
    pub idempotency: IdempotencyConfig,
    /// How failed consumers are retried (SPEC DS-4).
    pub retry: RetrySpec,
    /// How often the compensation scheduler runs due retries; `None` runs none (retries by
    /// hand only).
    pub retry_every: Option<Duration>,
    /// How often the deadline scheduler fires due deadlines (SPEC DM-2); `None` fires none
    /// (fired by hand, or by another process on the same store).
    pub deadline_poll_every: Option<Duration>,
    /// Bearer token → what it acts for (a tenant, and optionally an owner and a space in it,
    /// SPEC TN-2); empty turns auth off.
    pub auth_tokens: HashMap<String, TokenBinding>,
    /// The operator's bearer tokens: with any token configured (these or `auth_tokens`),
    /// `/metrics`, `/metrics.json` and the operations page answer only one of them
    /// ([`HttpConfig::operator_tokens`]). None of them is a tenant's token.
    pub operator_tokens: HashSet<String>,
    /// What this process does in a deployment.
    pub role: Role,
    /// Keep every aggregate's latest state as a queryable document (the projection
    /// `snapshot`), behind Wow's snapshot queries (`POST /{aggregate}/snapshot/...`) and
    /// `GET /{aggregate}/{id}/snapshot`. On by default, as Wow has them; off saves one write
    /// per stream.
    pub snapshot_queries: bool,
    /// How a gateway or processor reaches NATS.
    pub distributed: DistributedSettings,
    /// What the start does when a crate of the service was built so that an arithmetic
    /// overflow wraps (SPEC PX-1): refuse, by default, or warn.
    pub overflow_checks: OverflowChecks,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.to_owned(),
            store: None,
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
            body_limit: DEFAULT_BODY_LIMIT,
            server_limits: ServerLimits::default(),
            reads: ReadLimits::default(),
            idempotency: IdempotencyConfig::default(),
            retry: RetrySpec::default(),
            retry_every: Some(DEFAULT_RETRY_EVERY),
            deadline_poll_every: Some(DEFAULT_DEADLINE_POLL),
            auth_tokens: HashMap::new(),
            operator_tokens: HashSet::new(),
            role: Role::default(),
            snapshot_queries: true,
            distributed: DistributedSettings::default(),
            overflow_checks: OverflowChecks::default(),
        }
    }
}

impl Settings {
    /// Resolves the settings from the flags `listen` and `store` (which already hold their
    /// environment twins `WOW_LISTEN`, `WOW_STORE`), the other `WOW_*` variables of this
    /// process, and the TOML file at `file`.
    ///
    /// # Errors
    ///
    /// [`SettingsError`]: the file cannot be read or parsed, a variable is malformed, or the
    /// limits or idempotency settings cannot be served with.
    pub fn resolve(
        listen: Option<String>,
        store: Option<String>,
        file: Option<&Path>,
    ) -> Result<Self, SettingsError> {
        let process = |name: &str| std::env::var(name).ok();
        Self::resolve_in(listen, store, file, &Env(&process))
    }

    fn resolve_in(
        listen: Option<String>,
        store: Option<String>,
        file: Option<&Path>,
        env: &Env<'_>,
    ) -> Result<Self, SettingsError> {
        let file = FileConfig::read(file)?;
        let defaults = Self::default();
        let (retry, retry_every) = retry(&file, env)?;
        let role = distributed::role(&file, env)?;
        let distributed = distributed::distributed(&file, env)?;
        let settings = Self {
            server_limits: server_limits(&file, env)?,
            reads: reads(&file, env)?,
            idempotency: idempotency(&file, env)?,
            retry,
            retry_every,
            deadline_poll_every: {
                let every = env.millis(
                    "WOW_DEADLINE_POLL_MS",
                    file.deadline_poll_ms,
                    DEFAULT_DEADLINE_POLL,
                )?;
                (!every.is_zero()).then_some(every)
            },
            role: Role::Monolith,
            snapshot_queries: match env.var("WOW_SNAPSHOT_QUERIES") {
                Some(on) => !matches!(on.trim(), "false" | "0" | "off" | ""),
                None => file.snapshot_queries.unwrap_or(defaults.snapshot_queries),
            },
            distributed,
            overflow_checks: match env.var("WOW_OVERFLOW_CHECKS") {
                Some(mode) => mode.parse().map_err(|_| SettingsError::Env {
                    name: "WOW_OVERFLOW_CHECKS",
                    what: "`require` or `warn`",
                    value: mode,
                })?,
                None => file.overflow_checks.unwrap_or(defaults.overflow_checks),
            },
            listen: listen.or(file.listen).unwrap_or(defaults.listen),
            store: store.or(file.store),
            wait_timeout: env.millis(
                "WOW_WAIT_TIMEOUT_MS",
                file.wait_timeout_ms,
                defaults.wait_timeout,
            )?,
            body_limit: env
                .number("WOW_BODY_LIMIT")?
                .or(file.body_limit)
                .unwrap_or(defaults.body_limit),
            auth_tokens: match env.tokens()? {
                Some(tokens) => bindings(tokens, "WOW_AUTH_TOKENS")?,
                None => bindings(file.auth_tokens, "[auth_tokens]")?,
            },
            operator_tokens: HashSet::new(),
        };
        let operator_tokens = match env.var("WOW_OPERATOR_TOKENS") {
            Some(listed) => operator_tokens(
                listed.split(',').map(str::to_owned).collect(),
                "WOW_OPERATOR_TOKENS",
                &settings.auth_tokens,
            )?,
            None => operator_tokens(
                file.operator_tokens.unwrap_or_default(),
                "operator_tokens",
                &settings.auth_tokens,
            )?,
        };
        Self {
            operator_tokens,
            ..settings
        }
        .with_role(role)
    }

    /// These settings for a node of `role` (the `--role` flag wins over `WOW_ROLE` and the
    /// file).
    ///
    /// # Errors
    ///
    /// [`SettingsError::Distributed`] when `role` needs a NATS server and none is named.
    pub fn with_role(mut self, role: Role) -> Result<Self, SettingsError> {
        if role != Role::Monolith && self.distributed.nats_url.is_none() {
            return Err(SettingsError::Distributed(format!(
                "the {role} role needs a NATS server: set WOW_NATS_URL or [nats] url"
            )));
        }
        self.role = role;
        Ok(self)
    }

    /// The store to open: the one these settings name, else `fallback` (the service's own),
    /// else [`DEFAULT_STORE`].
    pub fn store_url<'a>(&'a self, fallback: Option<&'a str>) -> &'a str {
        self.store.as_deref().or(fallback).unwrap_or(DEFAULT_STORE)
    }

    /// How often the pipeline's background work runs: the compensation retries
    /// (`retry_every`) and the deadline firing (`deadline_poll_every`).
    pub fn background(&self) -> wow_runtime::background::BackgroundConfig {
        wow_runtime::background::BackgroundConfig {
            retry_every: self.retry_every,
            deadline_poll_every: self.deadline_poll_every,
        }
    }

    /// The HTTP settings these make: body limit, default wait, auth and operator tokens.
    pub fn http_config(&self) -> HttpConfig {
        HttpConfig {
            body_limit: self.body_limit,
            default_wait_timeout: self.wait_timeout,
            auth_tokens: self.auth_tokens.clone(),
            operator_tokens: self.operator_tokens.clone(),
            reads: self.reads,
            ..HttpConfig::default()
        }
    }
}

/// The heavy reads' limits: `WOW_READS_PER_TENANT`, `WOW_READS_PER_PEER` and
/// `WOW_READ_BUDGET_MS`, else the file's keys, else the defaults; a share of 0 or a budget of
/// 0 ms is an error (it would answer no read).
fn reads(file: &FileConfig, env: &Env<'_>) -> Result<ReadLimits, SettingsError> {
    let defaults = ReadLimits::default();
    let share = |name: &'static str, from_file: Option<usize>, default: usize| {
        let count = env.number::<usize>(name)?.or(from_file).unwrap_or(default);
        if count == 0 {
            return Err(SettingsError::Env {
                name,
                what: "a whole number of at least 1",
                value: count.to_string(),
            });
        }
        Ok(count)
    };
    let budget = env.millis("WOW_READ_BUDGET_MS", file.read_budget_ms, defaults.budget)?;
    if budget.is_zero() {
        return Err(SettingsError::Env {
            name: "WOW_READ_BUDGET_MS",
            what: "a whole number of milliseconds of at least 1",
            value: "0".to_owned(),
        });
    }
    Ok(ReadLimits {
        per_tenant: share(
            "WOW_READS_PER_TENANT",
            file.reads_per_tenant,
            defaults.per_tenant,
        )?,
        per_peer: share("WOW_READS_PER_PEER", file.reads_per_peer, defaults.per_peer)?,
        budget,
        ..defaults
    })
}

/// The operator tokens as listed (`WOW_OPERATOR_TOKENS` split at commas, or the file's
/// array), trimmed, the empty ones of a list dropped; one that breaks the rule of
/// [`wow_http::check_operator_token`] or is also a tenant's token is an error naming `from`.
fn operator_tokens(
    listed: Vec<String>,
    from: &'static str,
    tenants: &HashMap<String, TokenBinding>,
) -> Result<HashSet<String>, SettingsError> {
    listed
        .iter()
        .map(|token| token.trim())
        .filter(|token| !token.is_empty())
        .map(|token| {
            wow_http::check_operator_token(token)
                .map_err(|why| SettingsError::OperatorToken { from, why })?;
            if tenants.contains_key(token) {
                return Err(SettingsError::OperatorToken {
                    from,
                    why: "is a tenant's token too (of the auth tokens): an operator token must be no tenant's",
                });
            }
            Ok(token.to_owned())
        })
        .collect()
}

/// Each token's binding read from its `tenant[/owner[/space]]`; one written wrong is an error
/// naming where it came from.
fn bindings(
    tokens: HashMap<String, String>,
    from: &'static str,
) -> Result<HashMap<String, TokenBinding>, SettingsError> {
    tokens
        .into_iter()
        .map(|(token, spec)| {
            spec.parse()
                .map(|binding| (token, binding))
                .map_err(|source| SettingsError::AuthToken { from, source })
        })
        .collect()
}

/// The server's limits: each from its `WOW_*` variable, else the file, else the default of
/// [`ServerLimits`]; a zero that cannot be served with is an error.
fn server_limits(file: &FileConfig, env: &Env<'_>) -> Result<ServerLimits, SettingsError> {
    let defaults = ServerLimits::default();
    let limits = ServerLimits {
        header_read_timeout: env.millis(
            "WOW_HEADER_READ_TIMEOUT_MS",
            file.header_read_timeout_ms,
            defaults.header_read_timeout,
        )?,
        body_read_timeout: env.millis(
            "WOW_BODY_READ_TIMEOUT_MS",
            file.body_read_timeout_ms,
            defaults.body_read_timeout,
        )?,
        write_timeout: env.millis(
            "WOW_WRITE_TIMEOUT_MS",
            file.write_timeout_ms,
            defaults.write_timeout,
        )?,
        max_header_bytes: env
            .number("WOW_MAX_HEADER_BYTES")?
            .or(file.max_header_bytes)
            .unwrap_or(defaults.max_header_bytes),
        max_connections: env
            .number("WOW_MAX_CONNECTIONS")?
            .or(file.max_connections)
            .unwrap_or(defaults.max_connections),
        max_connections_per_peer: env
            .number("WOW_MAX_CONNECTIONS_PER_PEER")?
            .or(file.max_connections_per_peer),
        shutdown_grace: env.millis(
            "WOW_SHUTDOWN_GRACE_MS",
            file.shutdown_grace_ms,
            defaults.shutdown_grace,
        )?,
    };
    limits.validate()?;
    Ok(limits)
}

/// `[idempotency]`, with `WOW_IDEMPOTENCY_*` over it.
fn idempotency(file: &FileConfig, env: &Env<'_>) -> Result<IdempotencyConfig, SettingsError> {
    let mut idempotency = file.idempotency.clone().unwrap_or_default();
    if let Some(ttl) = env.number::<u64>("WOW_IDEMPOTENCY_TTL_MS")? {
        idempotency.ttl = Duration::from_millis(ttl);
    }
    if let Some(n) = env.number::<usize>("WOW_IDEMPOTENCY_EXPECTED_INSERTIONS")? {
        idempotency.expected_insertions = n;
    }
    if let Some(enabled) = env.var("WOW_IDEMPOTENCY_ENABLED") {
        idempotency.enabled = !matches!(enabled.trim(), "false" | "0" | "off");
    }
    idempotency.validate().map_err(SettingsError::Idempotency)?;
    Ok(idempotency)
}

/// `[compensation]`, with `WOW_COMPENSATION_*` over it: the retry spec and how often the
/// scheduler runs (an interval of 0 runs it never).
fn retry(file: &FileConfig, env: &Env<'_>) -> Result<(RetrySpec, Option<Duration>), SettingsError> {
    let compensation = file.compensation.as_ref();
    let defaults = RetrySpec::default();
    let retry = RetrySpec {
        max_attempts: env
            .number("WOW_COMPENSATION_MAX_ATTEMPTS")?
            .or(compensation.and_then(|c| c.max_attempts))
            .unwrap_or(defaults.max_attempts),
        initial_backoff_ms: env
            .number("WOW_COMPENSATION_INITIAL_BACKOFF_MS")?
            .or(compensation.and_then(|c| c.initial_backoff_ms))
            .unwrap_or(defaults.initial_backoff_ms),
        max_backoff_ms: env
            .number("WOW_COMPENSATION_MAX_BACKOFF_MS")?
            .or(compensation.and_then(|c| c.max_backoff_ms))
            .unwrap_or(defaults.max_backoff_ms),
    };
    let every = env.millis(
        "WOW_COMPENSATION_INTERVAL_MS",
        compensation.and_then(|c| c.interval_ms),
        DEFAULT_RETRY_EVERY,
    )?;
    Ok((retry, (!every.is_zero()).then_some(every)))
}

#[cfg(test)]
mod tests;
