//! `wow serve` settings: flags win over `WOW_*` environment variables, which win over the
//! TOML file, which wins over the defaults.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use wow_core::compensation::RetrySpec;
use wow_core::idempotency::IdempotencyConfig;

/// The default listen address.
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The default store.
pub(crate) const DEFAULT_STORE: &str = "sqlite://./data/wow.db";

/// The TOML file, every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    pub(crate) listen: Option<String>,
    pub(crate) store: Option<String>,
    pub(crate) wait_timeout_ms: Option<u64>,
    pub(crate) body_limit: Option<usize>,
    pub(crate) header_read_timeout_ms: Option<u64>,
    pub(crate) body_read_timeout_ms: Option<u64>,
    pub(crate) max_header_bytes: Option<usize>,
    pub(crate) max_connections: Option<usize>,
    pub(crate) shutdown_grace_ms: Option<u64>,
    pub(crate) idempotency: Option<IdempotencyConfig>,
    pub(crate) compensation: Option<CompensationConfig>,
    #[serde(default)]
    pub(crate) auth_tokens: HashMap<String, String>,
}

/// `[compensation]`: how failed consumers are retried (SPEC DS-4).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompensationConfig {
    pub(crate) max_attempts: Option<u32>,
    pub(crate) initial_backoff_ms: Option<u64>,
    pub(crate) max_backoff_ms: Option<u64>,
    /// How often the scheduler looks for due retries; 0 turns automatic retries off.
    pub(crate) interval_ms: Option<u64>,
}

/// Why the settings could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not valid: {source}")]
    Parse {
        path: String,
        source: toml::de::Error,
    },
    #[error("{name} must be {what}, not `{value}`")]
    Env {
        name: &'static str,
        what: &'static str,
        value: String,
    },
    #[error("idempotency settings: {0}")]
    Idempotency(String),
    #[error("server limits: {0}")]
    ServerLimits(#[from] wow_http::InvalidLimits),
}

/// The resolved settings.
#[derive(Debug)]
pub(crate) struct ServeConfig {
    pub(crate) listen: String,
    pub(crate) store: String,
    pub(crate) wait_timeout: Duration,
    pub(crate) body_limit: usize,
    /// How the server holds its connections (`WOW_HEADER_READ_TIMEOUT_MS`, ...).
    pub(crate) server_limits: wow_http::ServerLimits,
    pub(crate) idempotency: IdempotencyConfig,
    pub(crate) retry: RetrySpec,
    pub(crate) retry_every: Option<Duration>,
    pub(crate) auth_tokens: HashMap<String, String>,
}

fn env_number<T: std::str::FromStr>(name: &'static str) -> Result<Option<T>, ConfigError> {
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| ConfigError::Env {
                name,
                what: "a whole number",
                value,
            }),
        Err(_) => Ok(None),
    }
}

/// `token=tenant,token2=tenant2`.
fn env_tokens() -> Result<Option<HashMap<String, String>>, ConfigError> {
    let Ok(value) = std::env::var("WOW_AUTH_TOKENS") else {
        return Ok(None);
    };
    value
        .split(',')
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| {
            pair.split_once('=')
                .map(|(token, tenant)| (token.trim().to_owned(), tenant.trim().to_owned()))
                .ok_or_else(|| ConfigError::Env {
                    name: "WOW_AUTH_TOKENS",
                    what: "token=tenant pairs separated by commas",
                    value: value.clone(),
                })
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// The server's limits: each from its `WOW_*` variable, else the file, else the default of
/// [`wow_http::ServerLimits`]; a zero that cannot be served with is an error.
fn server_limits(file: &FileConfig) -> Result<wow_http::ServerLimits, ConfigError> {
    let defaults = wow_http::ServerLimits::default();
    let millis = |name, from_file: Option<u64>, default: Duration| {
        env_number::<u64>(name)
            .map(|value| value.or(from_file).map_or(default, Duration::from_millis))
    };
    let limits = wow_http::ServerLimits {
        header_read_timeout: millis(
            "WOW_HEADER_READ_TIMEOUT_MS",
            file.header_read_timeout_ms,
            defaults.header_read_timeout,
        )?,
        body_read_timeout: millis(
            "WOW_BODY_READ_TIMEOUT_MS",
            file.body_read_timeout_ms,
            defaults.body_read_timeout,
        )?,
        max_header_bytes: env_number("WOW_MAX_HEADER_BYTES")?
            .or(file.max_header_bytes)
            .unwrap_or(defaults.max_header_bytes),
        max_connections: env_number("WOW_MAX_CONNECTIONS")?
            .or(file.max_connections)
            .unwrap_or(defaults.max_connections),
        shutdown_grace: millis(
            "WOW_SHUTDOWN_GRACE_MS",
            file.shutdown_grace_ms,
            defaults.shutdown_grace,
        )?,
    };
    limits.validate()?;
    Ok(limits)
}

impl ServeConfig {
    /// Resolves the settings from the flags (which already hold their environment twins),
    /// the other `WOW_*` variables, and the file.
    pub(crate) fn resolve(
        listen: Option<String>,
        store: Option<String>,
        file: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let file = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.display().to_string(),
                    source,
                })?;
                toml::from_str(&text).map_err(|source| ConfigError::Parse {
                    path: path.display().to_string(),
                    source,
                })?
            }
            None => FileConfig::default(),
        };
        let server_limits = server_limits(&file)?;
        let mut idempotency = file.idempotency.unwrap_or_default();
        if let Some(ttl) = env_number::<u64>("WOW_IDEMPOTENCY_TTL_MS")? {
            idempotency.ttl = Duration::from_millis(ttl);
        }
        if let Some(n) = env_number::<usize>("WOW_IDEMPOTENCY_EXPECTED_INSERTIONS")? {
            idempotency.expected_insertions = n;
        }
        if let Ok(enabled) = std::env::var("WOW_IDEMPOTENCY_ENABLED") {
            idempotency.enabled = !matches!(enabled.trim(), "false" | "0" | "off");
        }
        idempotency.validate().map_err(ConfigError::Idempotency)?;
        let compensation = file.compensation.unwrap_or_default();
        let defaults = RetrySpec::default();
        let retry = RetrySpec {
            max_attempts: env_number("WOW_COMPENSATION_MAX_ATTEMPTS")?
                .or(compensation.max_attempts)
                .unwrap_or(defaults.max_attempts),
            initial_backoff_ms: env_number("WOW_COMPENSATION_INITIAL_BACKOFF_MS")?
                .or(compensation.initial_backoff_ms)
                .unwrap_or(defaults.initial_backoff_ms),
            max_backoff_ms: env_number("WOW_COMPENSATION_MAX_BACKOFF_MS")?
                .or(compensation.max_backoff_ms)
                .unwrap_or(defaults.max_backoff_ms),
        };
        let interval_ms = env_number::<u64>("WOW_COMPENSATION_INTERVAL_MS")?
            .or(compensation.interval_ms)
            .unwrap_or(1_000);
        Ok(Self {
            retry,
            retry_every: (interval_ms > 0).then(|| Duration::from_millis(interval_ms)),
            listen: listen
                .or(file.listen)
                .unwrap_or_else(|| DEFAULT_LISTEN.to_owned()),
            store: store
                .or(file.store)
                .unwrap_or_else(|| DEFAULT_STORE.to_owned()),
            wait_timeout: Duration::from_millis(
                env_number("WOW_WAIT_TIMEOUT_MS")?
                    .or(file.wait_timeout_ms)
                    .unwrap_or(30_000),
            ),
            body_limit: env_number("WOW_BODY_LIMIT")?
                .or(file.body_limit)
                .unwrap_or(1024 * 1024),
            server_limits,
            idempotency,
            auth_tokens: env_tokens()?.unwrap_or(file.auth_tokens),
        })
    }
}

impl ServeConfig {
    /// The bank's options from these settings.
    pub(crate) fn bank_options(&self) -> wow_example_bank::BankOptions {
        wow_example_bank::BankOptions {
            idempotency: self.idempotency.clone(),
            retry: self.retry,
            retry_every: self.retry_every,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn from_file(text: &str) -> Result<ServeConfig, ConfigError> {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("wow.toml");
        std::fs::write(&path, text).unwrap();
        ServeConfig::resolve(None, None, Some(&path))
    }

    #[test]
    fn the_file_sets_compensation_and_zero_turns_automatic_retries_off() {
        let settings = from_file(
            "[compensation]\nmax_attempts = 3\ninitial_backoff_ms = 50\nmax_backoff_ms = 400\ninterval_ms = 0\n",
        )
        .unwrap();
        assert_eq!(
            settings.retry,
            RetrySpec {
                max_attempts: 3,
                initial_backoff_ms: 50,
                max_backoff_ms: 400
            }
        );
        assert_eq!(settings.retry_every, None);
        let defaults = from_file("").unwrap();
        assert_eq!(defaults.retry, RetrySpec::default());
        assert_eq!(defaults.retry_every, Some(Duration::from_secs(1)));
    }

    #[test]
    fn the_file_sets_the_server_limits_and_a_zero_is_a_typed_error() {
        let settings = from_file(
            "header_read_timeout_ms = 1500\nbody_read_timeout_ms = 2500\nmax_header_bytes = 4096\nmax_connections = 8\nshutdown_grace_ms = 0\n",
        )
        .unwrap();
        assert_eq!(
            settings.server_limits,
            wow_http::ServerLimits {
                header_read_timeout: Duration::from_millis(1500),
                body_read_timeout: Duration::from_millis(2500),
                max_header_bytes: 4096,
                max_connections: 8,
                shutdown_grace: Duration::ZERO,
            }
        );
        assert_eq!(
            from_file("").unwrap().server_limits,
            wow_http::ServerLimits::default()
        );
        let error = from_file("max_connections = 0\n").unwrap_err();
        assert!(
            matches!(
                error,
                ConfigError::ServerLimits(wow_http::InvalidLimits::Zero("max_connections"))
            ),
            "{error}"
        );
        let error = from_file("max_connections = -1\n").unwrap_err();
        assert!(matches!(error, ConfigError::Parse { .. }), "{error}");
    }

    #[test]
    fn an_unknown_compensation_key_is_a_clear_error() {
        let error = from_file("[compensation]\nmax_tries = 3\n").unwrap_err();
        assert!(matches!(error, ConfigError::Parse { .. }), "{error}");
        assert!(error.to_string().contains("max_tries"), "{error}");
    }
}
