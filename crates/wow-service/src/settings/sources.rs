//! Where settings come from besides the flags: the TOML file and the `WOW_*` variables.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use wow_runtime::idempotency::IdempotencyConfig;

use super::role::Role;
use super::SettingsError;
use crate::build_check::OverflowChecks;

/// The TOML file, every key optional; an unknown key is an error.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    pub(super) listen: Option<String>,
    pub(super) store: Option<String>,
    pub(super) wait_timeout_ms: Option<u64>,
    pub(super) body_limit: Option<usize>,
    pub(super) header_read_timeout_ms: Option<u64>,
    pub(super) body_read_timeout_ms: Option<u64>,
    pub(super) write_timeout_ms: Option<u64>,
    pub(super) max_header_bytes: Option<usize>,
    pub(super) max_connections: Option<usize>,
    pub(super) max_connections_per_peer: Option<usize>,
    pub(super) shutdown_grace_ms: Option<u64>,
    pub(super) idempotency: Option<IdempotencyConfig>,
    pub(super) compensation: Option<CompensationConfig>,
    #[serde(default)]
    pub(super) auth_tokens: HashMap<String, String>,
    pub(super) operator_tokens: Option<Vec<String>>,
    pub(super) role: Option<Role>,
    pub(super) snapshot_queries: Option<bool>,
    pub(super) deadline_poll_ms: Option<u64>,
    pub(super) nats: Option<NatsFile>,
    pub(super) overflow_checks: Option<OverflowChecks>,
    pub(super) reads_per_tenant: Option<usize>,
    pub(super) reads_per_peer: Option<usize>,
    pub(super) read_budget_ms: Option<u64>,
}

/// `[nats]` in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NatsFile {
    pub(super) url: Option<String>,
    pub(super) partitions: Option<u32>,
    pub(super) replicas: Option<usize>,
    pub(super) storage: Option<String>,
    pub(super) lease_ttl_ms: Option<u64>,
    pub(super) ack_wait_ms: Option<u64>,
    pub(super) ping_interval_ms: Option<u64>,
    pub(super) heartbeat_ms: Option<u64>,
    pub(super) node_id: Option<String>,
    pub(super) namespace: Option<String>,
}

/// `[compensation]`: how failed consumers are retried (SPEC DS-4).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CompensationConfig {
    pub(super) max_attempts: Option<u32>,
    pub(super) initial_backoff_ms: Option<u64>,
    pub(super) max_backoff_ms: Option<u64>,
    /// How often the scheduler looks for due retries; 0 turns automatic retries off.
    pub(super) interval_ms: Option<u64>,
}

impl FileConfig {
    /// The file at `path`, or every key absent when there is none.
    pub(super) fn read(path: Option<&Path>) -> Result<Self, SettingsError> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
            path: path.display().to_string(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| SettingsError::Parse {
            path: path.display().to_string(),
            source,
        })
    }
}

/// The environment the settings read: the process's, or a table in tests.
pub(super) struct Env<'a>(pub(super) &'a dyn Fn(&str) -> Option<String>);

impl Env<'_> {
    /// The variable `name`, if it is set (and Unicode).
    pub(super) fn var(&self, name: &str) -> Option<String> {
        (self.0)(name)
    }

    /// The whole number in `name`, if it is set; anything else there is an error.
    pub(super) fn number<T: std::str::FromStr>(
        &self,
        name: &'static str,
    ) -> Result<Option<T>, SettingsError> {
        match self.var(name) {
            Some(value) => value
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| SettingsError::Env {
                    name,
                    what: "a whole number",
                    value,
                }),
            None => Ok(None),
        }
    }

    /// Milliseconds from `name`, else from the file, else `default`.
    pub(super) fn millis(
        &self,
        name: &'static str,
        from_file: Option<u64>,
        default: Duration,
    ) -> Result<Duration, SettingsError> {
        Ok(self
            .number::<u64>(name)?
            .or(from_file)
            .map_or(default, Duration::from_millis))
    }

    /// `WOW_AUTH_TOKENS`: `token=tenant[/owner[/space]],token2=...`, each binding as written.
    pub(super) fn tokens(&self) -> Result<Option<HashMap<String, String>>, SettingsError> {
        let Some(value) = self.var("WOW_AUTH_TOKENS") else {
            return Ok(None);
        };
        value
            .split(',')
            .filter(|pair| !pair.trim().is_empty())
            .map(|pair| {
                pair.split_once('=')
                    .map(|(token, tenant)| (token.trim().to_owned(), tenant.trim().to_owned()))
                    .ok_or_else(|| SettingsError::Env {
                        name: "WOW_AUTH_TOKENS",
                        what: "token=tenant[/owner[/space]] pairs separated by commas",
                        value: value.clone(),
                    })
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }
}
