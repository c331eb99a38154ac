#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

fn from_file_and_env(text: &str, env: &[(&str, &str)]) -> Result<Settings, SettingsError> {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("wow.toml");
    std::fs::write(&path, text).unwrap();
    let lookup = |name: &str| {
        env.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_owned())
    };
    Settings::resolve_in(None, None, Some(&path), &Env(&lookup))
}

fn from_file(text: &str) -> Result<Settings, SettingsError> {
    from_file_and_env(text, &[])
}

#[test]
fn nothing_given_is_the_defaults() {
    let resolved = Settings::resolve_in(None, None, None, &Env(&no_env)).unwrap();
    assert_eq!(resolved, Settings::default());
    assert_eq!(resolved.listen, DEFAULT_LISTEN);
    assert_eq!(resolved.store_url(None), DEFAULT_STORE);
    assert_eq!(resolved.store_url(Some("memory://")), "memory://");
}

#[test]
fn flags_win_over_the_file_and_the_environment_over_the_file() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("wow.toml");
    std::fs::write(
        &path,
        "listen = \"0.0.0.0:1\"\nstore = \"memory://\"\nwait_timeout_ms = 5\nbody_limit = 7\n",
    )
    .unwrap();
    let env = |name: &str| (name == "WOW_BODY_LIMIT").then(|| "9".to_owned());
    let settings = Settings::resolve_in(
        Some("127.0.0.1:0".to_owned()),
        None,
        Some(&path),
        &Env(&env),
    )
    .unwrap();
    assert_eq!(settings.listen, "127.0.0.1:0");
    assert_eq!(settings.store_url(Some("sqlite://ignored.db")), "memory://");
    assert_eq!(settings.wait_timeout, Duration::from_millis(5));
    assert_eq!(settings.body_limit, 9);
    let http = settings.http_config();
    assert_eq!(http.body_limit, 9);
    assert_eq!(http.default_wait_timeout, Duration::from_millis(5));
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
        "header_read_timeout_ms = 1500\nbody_read_timeout_ms = 2500\nwrite_timeout_ms = 3500\nmax_header_bytes = 4096\nmax_connections = 8\nmax_connections_per_peer = 3\nshutdown_grace_ms = 0\n",
    )
    .unwrap();
    assert_eq!(
        settings.server_limits,
        ServerLimits {
            header_read_timeout: Duration::from_millis(1500),
            body_read_timeout: Duration::from_millis(2500),
            write_timeout: Duration::from_millis(3500),
            max_header_bytes: 4096,
            max_connections: 8,
            max_connections_per_peer: Some(3),
            shutdown_grace: Duration::ZERO,
        }
    );
    assert_eq!(
        from_file("").unwrap().server_limits,
        ServerLimits::default()
    );
    let error = from_file("max_connections = 0\n").unwrap_err();
    assert!(
        matches!(
            error,
            SettingsError::ServerLimits(wow_http::InvalidLimits::Zero("max_connections"))
        ),
        "{error}"
    );
    let error = from_file("max_connections = -1\n").unwrap_err();
    assert!(matches!(error, SettingsError::Parse { .. }), "{error}");
}

#[test]
fn the_write_timeout_comes_from_its_variable_over_the_file_and_zero_is_refused() {
    let settings = from_file_and_env(
        "write_timeout_ms = 3500\n",
        &[("WOW_WRITE_TIMEOUT_MS", "250")],
    )
    .unwrap();
    assert_eq!(
        settings.server_limits.write_timeout,
        Duration::from_millis(250)
    );
    assert_eq!(
        from_file("write_timeout_ms = 3500\n")
            .unwrap()
            .server_limits
            .write_timeout,
        Duration::from_millis(3500)
    );
    assert_eq!(
        from_file("").unwrap().server_limits.write_timeout,
        Duration::from_secs(10)
    );
    let error = from_file_and_env("", &[("WOW_WRITE_TIMEOUT_MS", "0")]).unwrap_err();
    assert!(
        matches!(
            error,
            SettingsError::ServerLimits(wow_http::InvalidLimits::Zero("write_timeout"))
        ),
        "{error}"
    );
    let error = from_file_and_env("", &[("WOW_WRITE_TIMEOUT_MS", "soon")]).unwrap_err();
    assert!(
        matches!(
            error,
            SettingsError::Env {
                name: "WOW_WRITE_TIMEOUT_MS",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn an_unknown_compensation_key_is_a_clear_error() {
    let error = from_file("[compensation]\nmax_tries = 3\n").unwrap_err();
    assert!(matches!(error, SettingsError::Parse { .. }), "{error}");
    assert!(error.to_string().contains("max_tries"), "{error}");
}

#[test]
fn a_malformed_variable_names_itself() {
    let error = from_file_and_env("", &[("WOW_MAX_CONNECTIONS", "many")]).unwrap_err();
    assert!(
        matches!(
            error,
            SettingsError::Env {
                name: "WOW_MAX_CONNECTIONS",
                ..
            }
        ),
        "{error}"
    );
    let error = from_file_and_env("", &[("WOW_AUTH_TOKENS", "no-tenant")]).unwrap_err();
    assert!(error.to_string().contains("WOW_AUTH_TOKENS"), "{error}");
}

#[test]
fn variables_set_tokens_idempotency_and_retries_over_the_file() {
    let settings = from_file_and_env(
        "[auth_tokens]\nfile-token = \"t0\"\n[compensation]\ninterval_ms = 0\n",
        &[
            ("WOW_AUTH_TOKENS", "a=t1, b=t2"),
            ("WOW_IDEMPOTENCY_ENABLED", "off"),
            ("WOW_IDEMPOTENCY_TTL_MS", "5000"),
            ("WOW_COMPENSATION_INTERVAL_MS", "250"),
        ],
    )
    .unwrap();
    assert_eq!(settings.auth_tokens.len(), 2);
    assert_eq!(settings.auth_tokens["b"], TokenBinding::tenant("t2"));
    assert!(!settings.idempotency.enabled);
    assert_eq!(settings.idempotency.ttl, Duration::from_secs(5));
    assert_eq!(settings.retry_every, Some(Duration::from_millis(250)));
}

#[test]
fn a_missing_file_is_a_read_error_naming_it() {
    let error = Settings::resolve_in(
        None,
        None,
        Some(Path::new("/nonexistent/wow.toml")),
        &Env(&no_env),
    )
    .unwrap_err();
    assert!(matches!(error, SettingsError::Read { .. }), "{error}");
    assert!(
        error.to_string().contains("/nonexistent/wow.toml"),
        "{error}"
    );
}

#[test]
fn the_role_and_nats_come_from_the_file_with_the_environment_over_it() {
    let file = r#"
role = "processor"
[nats]
url = "nats://file:4222"
namespace = "bank"
partitions = 32
storage = "memory"
lease_ttl_ms = 2000
"#;
    let settings = from_file(file).unwrap();
    assert_eq!(settings.role, Role::Processor);
    assert_eq!(
        settings.distributed.nats_url.as_deref(),
        Some("nats://file:4222")
    );
    assert_eq!(settings.distributed.partitions, 32);
    assert_eq!(
        settings.distributed.storage,
        super::distributed::CommandStorage::Memory
    );
    assert_eq!(settings.distributed.lease_ttl, Duration::from_secs(2));
    #[cfg(feature = "nats")]
    {
        let config = settings.distributed.nats_config("nats://x");
        assert_eq!(config.storage, wow_nats::CommandStorage::Memory);
        assert_eq!(config.stream, "BANK_COMMANDS");
        assert_eq!(config.partition_filter(3), "bank.commands.3.>");
        assert_eq!(config.stream_subjects(), "bank.commands.>");
        assert_eq!(config.wait_subject("n1"), "bank.wait.n1");
    }

    let settings = from_file_and_env(
        file,
        &[
            ("WOW_ROLE", "gateway"),
            ("WOW_NATS_PARTITIONS", "8"),
            ("WOW_NODE_ID", "g-1"),
        ],
    )
    .unwrap();
    assert_eq!(settings.role, Role::Gateway);
    assert_eq!(settings.distributed.partitions, 8);
    assert_eq!(settings.distributed.node_id.as_deref(), Some("g-1"));
}

#[test]
fn a_role_that_needs_nats_without_a_url_and_bad_nats_values_are_refused_by_name() {
    let error = from_file("role = \"gateway\"\n").unwrap_err();
    assert!(error.to_string().contains("WOW_NATS_URL"), "{error}");
    let error = from_file_and_env("", &[("WOW_ROLE", "leader")]).unwrap_err();
    assert!(error.to_string().contains("WOW_ROLE"), "{error}");
    for (name, value, says) in [
        ("WOW_NATS_PARTITIONS", "0", "partitions"),
        ("WOW_NATS_STORAGE", "disk", "WOW_NATS_STORAGE"),
        ("WOW_NATS_NAMESPACE", "a.b", "namespace"),
        ("WOW_NODE_ID", "a b", "node id"),
        ("WOW_NATS_LEASE_TTL_MS", "10", "lease TTL"),
    ] {
        let error = from_file_and_env("", &[(name, value)]).unwrap_err();
        assert!(error.to_string().contains(says), "{name}={value}: {error}");
    }
    let monolith = Settings::default().with_role(Role::Monolith).unwrap();
    assert_eq!(monolith.role, Role::Monolith);
}

#[test]
fn snapshot_queries_are_on_unless_the_file_or_the_environment_turns_them_off() {
    assert!(from_file("").unwrap().snapshot_queries);
    assert!(
        !from_file("snapshot_queries = false\n")
            .unwrap()
            .snapshot_queries
    );
    let on = from_file_and_env(
        "snapshot_queries = false\n",
        &[("WOW_SNAPSHOT_QUERIES", "true")],
    )
    .unwrap();
    assert!(on.snapshot_queries);
    let off = from_file_and_env(
        "snapshot_queries = true\n",
        &[("WOW_SNAPSHOT_QUERIES", "off")],
    );
    assert!(!off.unwrap().snapshot_queries);
}

#[test]
fn a_token_binds_a_tenant_an_owner_and_a_space_alike_in_the_variable_and_the_file() {
    let expected = HashMap::from([
        (
            "alice".to_owned(),
            TokenBinding::tenant("tenant-a").with_owner("alice"),
        ),
        (
            "bob".to_owned(),
            TokenBinding::tenant("tenant-a")
                .with_owner("bob")
                .with_space("s1"),
        ),
        ("ops".to_owned(), TokenBinding::tenant("tenant-a")),
    ]);
    let from_env = from_file_and_env(
        "",
        &[(
            "WOW_AUTH_TOKENS",
            "alice=tenant-a/alice,bob=tenant-a/bob/s1,ops=tenant-a",
        )],
    )
    .unwrap();
    assert_eq!(from_env.auth_tokens, expected);
    let from_file = from_file_and_env(
        "[auth_tokens]\nalice = \"tenant-a/alice\"\nbob = \"tenant-a/bob/s1\"\nops = \"tenant-a\"\n",
        &[],
    )
    .unwrap();
    assert_eq!(from_file.auth_tokens, expected);
}

#[test]
fn a_malformed_token_binding_is_an_error_naming_its_source() {
    for (spec, why) in [
        ("a/b/c/d", "at most three"),
        ("tenant-a/", "the owner is empty"),
        ("tenant-a//s1", "the owner is empty"),
        ("/alice", "the tenant is empty"),
    ] {
        let error =
            from_file_and_env("", &[("WOW_AUTH_TOKENS", &format!("x={spec}"))]).unwrap_err();
        let text = error.to_string();
        assert!(
            matches!(
                error,
                SettingsError::AuthToken {
                    from: "WOW_AUTH_TOKENS",
                    ..
                }
            ),
            "{text}"
        );
        assert!(text.contains(why), "{spec}: {text}");
        let error =
            from_file_and_env(&format!("[auth_tokens]\nx = \"{spec}\"\n"), &[]).unwrap_err();
        assert!(
            matches!(
                error,
                SettingsError::AuthToken {
                    from: "[auth_tokens]",
                    ..
                }
            ),
            "{error}"
        );
    }
}

#[test]
fn operator_tokens_come_from_the_variable_over_the_file_and_reach_the_http_settings() {
    let from_file = from_file("operator_tokens = [\"op-1\", \"op-2\"]\n").unwrap();
    assert_eq!(
        from_file.operator_tokens,
        HashSet::from(["op-1".to_owned(), "op-2".to_owned()])
    );
    let from_env = from_file_and_env(
        "operator_tokens = [\"op-1\"]\n",
        &[("WOW_OPERATOR_TOKENS", " op-3 , op/4= ,")],
    )
    .unwrap();
    assert_eq!(
        from_env.operator_tokens,
        HashSet::from(["op-3".to_owned(), "op/4=".to_owned()])
    );
    let http = from_env.http_config();
    assert_eq!(http.operator_tokens, from_env.operator_tokens);
    assert!(http.operator_gated(), "operator tokens alone gate /metrics");
    assert!(Settings::default().operator_tokens.is_empty());
    assert!(!Settings::default().http_config().operator_gated());
}

#[test]
fn an_operator_token_that_a_cookie_cannot_carry_or_a_tenant_holds_is_refused_by_source() {
    for (listed, why) in [
        ("a b", "may hold only"),
        ("op;x", "may hold only"),
        ("é", "may hold only"),
    ] {
        let error = from_file_and_env("", &[("WOW_OPERATOR_TOKENS", listed)]).unwrap_err();
        assert!(
            matches!(
                error,
                SettingsError::OperatorToken {
                    from: "WOW_OPERATOR_TOKENS",
                    ..
                }
            ),
            "{error}"
        );
        assert!(error.to_string().contains(why), "{listed}: {error}");
        assert!(
            !error.to_string().contains(listed),
            "the token is not shown: {error}"
        );
        let error = from_file(&format!("operator_tokens = [\"{listed}\"]\n")).unwrap_err();
        assert!(
            matches!(
                error,
                SettingsError::OperatorToken {
                    from: "operator_tokens",
                    ..
                }
            ),
            "{error}"
        );
    }
    let error = from_file_and_env(
        "",
        &[
            ("WOW_AUTH_TOKENS", "shared=tenant-a"),
            ("WOW_OPERATOR_TOKENS", "shared"),
        ],
    )
    .unwrap_err();
    assert!(error.to_string().contains("tenant's token"), "{error}");
}

#[test]
fn overflow_checks_are_required_unless_the_file_or_the_environment_says_warn() {
    assert_eq!(
        from_file("").unwrap().overflow_checks,
        OverflowChecks::Require
    );
    assert_eq!(
        from_file("overflow_checks = \"warn\"\n")
            .unwrap()
            .overflow_checks,
        OverflowChecks::Warn
    );
    let env = from_file_and_env(
        "overflow_checks = \"warn\"\n",
        &[("WOW_OVERFLOW_CHECKS", "require")],
    );
    assert_eq!(env.unwrap().overflow_checks, OverflowChecks::Require);
    let wrong = from_file_and_env("", &[("WOW_OVERFLOW_CHECKS", "off")]).unwrap_err();
    assert!(
        matches!(wrong, SettingsError::Env { name: "WOW_OVERFLOW_CHECKS", ref value, .. } if value == "off"),
        "{wrong}"
    );
    assert!(matches!(
        from_file("overflow_checks = \"off\"\n").unwrap_err(),
        SettingsError::Parse { .. }
    ));
}

#[test]
fn the_heavy_reads_limits_come_from_the_file_and_a_zero_is_a_typed_error() {
    let settings =
        from_file("reads_per_tenant = 3\nreads_per_peer = 4\nread_budget_ms = 1500\n").unwrap();
    assert_eq!(
        settings.reads,
        wow_http::ReadLimits {
            per_tenant: 3,
            per_peer: 4,
            budget: Duration::from_millis(1500),
            ..wow_http::ReadLimits::default()
        }
    );
    assert_eq!(settings.http_config().reads, settings.reads);
    assert!(from_file("reads_per_peer = 0\n").is_err());
    assert!(from_file("read_budget_ms = 0\n").is_err());
}

#[cfg(feature = "nats")]
#[test]
fn a_comma_separated_nats_url_gives_every_server_of_the_cluster_and_the_replicas_to_every_bucket() {
    let settings = from_file_and_env(
        "",
        &[
            ("WOW_ROLE", "processor"),
            (
                "WOW_NATS_URL",
                "nats://n1:4222,nats://n2:4222,nats://n3:4222",
            ),
            ("WOW_NATS_REPLICAS", "3"),
        ],
    )
    .unwrap();
    let url = settings.distributed.nats_url.clone().unwrap();
    let config = settings.distributed.nats_config(&url);
    assert_eq!(
        config.servers(),
        ["nats://n1:4222", "nats://n2:4222", "nats://n3:4222"]
    );
    assert_eq!(config.replicas, 3);
}

#[cfg(feature = "nats")]
#[test]
fn the_nats_ping_interval_and_heartbeat_come_from_the_file_or_the_environment() {
    let settings = from_file("[nats]\nping_interval_ms = 2500\nheartbeat_ms = 700\n").unwrap();
    let config = settings.distributed.nats_config("nats://x");
    assert_eq!(config.ping_interval, Duration::from_millis(2500));
    assert_eq!(config.heartbeat, Duration::from_millis(700));
    let defaults = DistributedSettings::default().nats_config("nats://x");
    assert_eq!(defaults.ping_interval, Duration::from_secs(1));
    assert_eq!(defaults.heartbeat, Duration::from_secs(1));
    let error = from_file("[nats]\nheartbeat_ms = 0\n").unwrap_err();
    assert!(error.to_string().contains("heartbeat"), "{error}");
}
