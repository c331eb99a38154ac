//! How connections are made: the driver settings a store adds to those of its URL, the pool
//! of the command path, and a walk over the URL's hosts that gives each host a bounded time.
//!
//! Why a walk of our own: the driver tries a multi-host URL's hosts in order but bounds only
//! each socket's connect (`connect_timeout`). A host that takes the TCP connection and then
//! says nothing (a frozen server, a hung machine whose kernel still completes handshakes)
//! holds the driver's walk for good, and the pool's create timeout then cancels the walk
//! before the next host is ever tried. Here each host gets `connect_timeout` (default
//! [`DEFAULT_HOST_TIMEOUT`]) for all of its set-up, the socket, the start-up, the
//! authentication and the `target_session_attrs` check, and then the next host is tried.
//!
//! TCP keepalive (a probe after 5 s idle, then every 2 s, 3 probes) and a TCP user timeout of
//! 10 s are set unless the URL sets them, so that a peer that vanished (a partition, a machine
//! gone) is noticed on an idle connection and on one with unacknowledged data. Neither notices
//! a frozen server whose machine still answers for it: the call deadline of
//! [`crate::call`] does.
//!
//! The URL's own `options` are kept: the store adds `-c search_path=<schema>` after them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Connect, Manager, ManagerConfig, Pool, RecyclingMethod};
use futures::future::BoxFuture;
use tokio_postgres::config::{Host, TargetSessionAttrs};
use tokio_postgres::{Client, Config, NoTls};

use crate::call::Watch;
use crate::{OpenError, PostgresOptions};

/// How long one host may take to set up a connection when the URL gives no `connect_timeout`.
pub(crate) const DEFAULT_HOST_TIMEOUT: Duration = Duration::from_secs(2);

/// The driver's keepalive idle time when the URL sets none (its own default is two hours).
const DRIVER_KEEPALIVE_IDLE: Duration = Duration::from_secs(2 * 60 * 60);

/// The driver settings of `options`: its URL's, with the store's schema added to the URL's
/// `options`, and the TCP keepalive, user timeout and per-host set-up bound of this module
/// where the URL sets none. Warns (once, here) when the URL names several hosts without
/// `target_session_attrs=read-write`: the walk then stops at the first host that answers,
/// which may be a standby that refuses every write.
pub(crate) fn driver_config(options: &PostgresOptions) -> Result<Config, OpenError> {
    let mut config: Config = options
        .url
        .parse()
        .map_err(|e: tokio_postgres::Error| OpenError::BadUrl(e.to_string()))?;
    let search_path = format!("-c search_path={}", options.schema);
    let merged = match config.get_options() {
        Some(given) if !given.trim().is_empty() => format!("{given} {search_path}"),
        _ => search_path,
    };
    config.options(merged);
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(DEFAULT_HOST_TIMEOUT);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(Duration::from_secs(10));
    }
    if config.get_keepalives() {
        if config.get_keepalives_idle() == DRIVER_KEEPALIVE_IDLE {
            config.keepalives_idle(Duration::from_secs(5));
        }
        if config.get_keepalives_interval().is_none() {
            config.keepalives_interval(Duration::from_secs(2));
        }
        if config.get_keepalives_retries().is_none() {
            config.keepalives_retries(3);
        }
    }
    if config.get_hosts().len() > 1
        && config.get_target_session_attrs() != TargetSessionAttrs::ReadWrite
    {
        tracing::warn!(
            hosts = config.get_hosts().len(),
            "the store URL names several hosts without target_session_attrs=read-write: \
             connections go to the first host that answers, which may be a standby that \
             refuses every write (503) until it is promoted; add target_session_attrs=read-write"
        );
    }
    let hosts = u32::try_from(config.get_hosts().len()).unwrap_or(u32::MAX);
    let per_host = config
        .get_connect_timeout()
        .copied()
        .unwrap_or(DEFAULT_HOST_TIMEOUT);
    if hosts > 1 && per_host.saturating_mul(hosts) >= options.call_timeout {
        tracing::warn!(
            hosts,
            connect_timeout_ms = u64::try_from(per_host.as_millis()).unwrap_or(u64::MAX),
            call_timeout_ms = u64::try_from(options.call_timeout.as_millis()).unwrap_or(u64::MAX),
            "a call's deadline may end before the walk over the store's hosts reaches the last \
             one: lower connect_timeout or raise call_timeout_ms"
        );
    }
    Ok(config)
}

/// The pool of the command path: `size` connections made by a [`HostWalk`] over `config`,
/// none handed out once `watch` holds it in doubt (made before the store's last failure, see
/// [`Watch::made_before_doubt`]); a wait for a free connection bounded by the call deadline.
pub(crate) fn command_pool(
    config: Config,
    size: usize,
    watch: Arc<Watch>,
) -> Result<Pool, OpenError> {
    let walk = HostWalk::of(&config);
    let create_timeout = walk.bound() + Duration::from_secs(1);
    let manager = Manager::from_connect(
        config,
        walk,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let deadline = watch.deadline();
    Pool::builder(manager)
        .max_size(size)
        .wait_timeout(Some(deadline))
        .create_timeout(Some(create_timeout))
        .pre_recycle(deadpool_postgres::Hook::sync_fn(move |_, metrics| {
            if watch.made_before_doubt(metrics.created) {
                Err(deadpool_postgres::HookError::message(
                    "made before the store's last failure",
                ))
            } else {
                Ok(())
            }
        }))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()
        .map_err(|e| OpenError::Pool(e.to_string()))
}

/// Connects to the first of a URL's hosts that sets up a connection within its bound (see
/// the module docs for why not the driver's own walk): the host the last connection was
/// made to first, then the others in the URL's order. Why start from the last good host:
/// after a failover the URL's first host may be the old primary, frozen or a standby, and
/// every new connection would pay its bound before reaching the primary.
#[derive(Debug)]
pub(crate) struct HostWalk {
    /// One configuration per host, each naming that host alone.
    hosts: Vec<Config>,
    /// The set-up bound of each host.
    per_host: Duration,
    /// The host the last connection was made to.
    last_good: AtomicUsize,
}

impl HostWalk {
    /// The walk over `config`'s hosts, each bounded by its `connect_timeout`.
    pub(crate) fn of(config: &Config) -> Self {
        let count = config.get_hosts().len();
        let hosts = if count <= 1 {
            vec![config.clone()]
        } else {
            (0..count).map(|index| one_host(config, index)).collect()
        };
        Self {
            hosts,
            last_good: AtomicUsize::new(0),
            per_host: config
                .get_connect_timeout()
                .copied()
                .unwrap_or(DEFAULT_HOST_TIMEOUT),
        }
    }

    /// The hosts' indexes in the order of the next walk: the last good one, then the others
    /// in the URL's order.
    fn order(&self) -> Vec<usize> {
        let first = self.last_good.load(Ordering::Relaxed) % self.hosts.len().max(1);
        std::iter::once(first)
            .chain((0..self.hosts.len()).filter(|index| *index != first))
            .collect()
    }

    /// The longest a whole walk takes: every host's bound.
    pub(crate) fn bound(&self) -> Duration {
        self.per_host
            .saturating_mul(u32::try_from(self.hosts.len()).unwrap_or(u32::MAX))
    }
}

impl Connect for HostWalk {
    /// Tries each host in turn ([`HostWalk::order`]); the first connection set up within its
    /// bound is the answer.
    /// When every host failed, the last host's error; when none answered at all, the future
    /// does not end and the pool's create timeout (a little past [`HostWalk::bound`]) ends
    /// it as a timeout: the driver's error type has no public timeout of its own.
    fn connect(
        &self,
        _: &Config,
    ) -> BoxFuture<'_, Result<(Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>> {
        Box::pin(async move {
            let mut last_error = None;
            for index in self.order() {
                let Some(host) = self.hosts.get(index) else {
                    continue;
                };
                match tokio::time::timeout(self.per_host, host.connect(NoTls)).await {
                    Ok(Ok((client, connection))) => {
                        self.last_good.store(index, Ordering::Relaxed);
                        let task = tokio::spawn(async move {
                            if let Err(error) = connection.await {
                                tracing::debug!(%error, "a store connection ended");
                            }
                        });
                        return Ok((client, task));
                    }
                    Ok(Err(error)) => {
                        tracing::debug!(host = index, error = %crate::error::PgFault(&error), "a store host refused a connection; trying the next");
                        last_error = Some(error);
                    }
                    Err(_) => tracing::debug!(
                        host = index,
                        bound_ms = u64::try_from(self.per_host.as_millis()).unwrap_or(u64::MAX),
                        "a store host did not set up a connection within its bound; trying the next"
                    ),
                }
            }
            match last_error {
                Some(error) => Err(error),
                None => futures::future::pending().await,
            }
        })
    }
}

/// `config` naming only its host number `index` (with that host's address and port).
fn one_host(config: &Config, index: usize) -> Config {
    let mut one = Config::new();
    if let Some(user) = config.get_user() {
        one.user(user);
    }
    if let Some(password) = config.get_password() {
        one.password(password);
    }
    if let Some(dbname) = config.get_dbname() {
        one.dbname(dbname);
    }
    if let Some(options) = config.get_options() {
        one.options(options);
    }
    if let Some(name) = config.get_application_name() {
        one.application_name(name);
    }
    one.ssl_mode(config.get_ssl_mode())
        .ssl_negotiation(config.get_ssl_negotiation())
        .channel_binding(config.get_channel_binding())
        .target_session_attrs(config.get_target_session_attrs())
        .keepalives(config.get_keepalives())
        .keepalives_idle(config.get_keepalives_idle());
    match config.get_hosts().get(index) {
        Some(Host::Tcp(host)) => {
            one.host(host);
        }
        Some(Host::Unix(path)) => {
            one.host_path(path);
        }
        None => {}
    }
    if let Some(address) = config.get_hostaddrs().get(index) {
        one.hostaddr(*address);
    }
    let ports = config.get_ports();
    if let Some(port) = ports
        .get(index)
        .or(ports.first().filter(|_| ports.len() == 1))
    {
        one.port(*port);
    }
    if let Some(timeout) = config.get_connect_timeout() {
        one.connect_timeout(*timeout);
    }
    if let Some(timeout) = config.get_tcp_user_timeout() {
        one.tcp_user_timeout(*timeout);
    }
    if let Some(interval) = config.get_keepalives_interval() {
        one.keepalives_interval(interval);
    }
    if let Some(retries) = config.get_keepalives_retries() {
        one.keepalives_retries(retries);
    }
    one
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn config(url: &str) -> Config {
        driver_config(&url.parse::<PostgresOptions>().unwrap().schema("s1")).unwrap()
    }

    #[test]
    fn keeps_the_urls_options_and_adds_the_schema_after_them() {
        let config = config("postgres://u@h/db?options=-c%20statement_timeout%3D1000");
        assert_eq!(
            config.get_options(),
            Some("-c statement_timeout=1000 -c search_path=s1")
        );
        let config = self::config("postgres://u@h/db");
        assert_eq!(config.get_options(), Some("-c search_path=s1"));
    }

    #[test]
    fn sets_keepalives_and_timeouts_unless_the_url_does() {
        let config = config("postgres://u@h/db");
        assert_eq!(config.get_connect_timeout(), Some(&DEFAULT_HOST_TIMEOUT));
        assert_eq!(config.get_keepalives_idle(), Duration::from_secs(5));
        assert_eq!(
            config.get_tcp_user_timeout(),
            Some(&Duration::from_secs(10))
        );
        let config = self::config(
            "postgres://u@h/db?connect_timeout=7&keepalives_idle=30&tcp_user_timeout=20",
        );
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(7)));
        assert_eq!(config.get_keepalives_idle(), Duration::from_secs(30));
        assert_eq!(
            config.get_tcp_user_timeout(),
            Some(&Duration::from_secs(20))
        );
    }

    #[test]
    fn walks_each_host_of_a_multi_host_url_alone_with_its_port() {
        let config = config(
            "postgres://u:pw@h1:5001,h2:5002/db?target_session_attrs=read-write&connect_timeout=3",
        );
        let walk = HostWalk::of(&config);
        assert_eq!(walk.hosts.len(), 2);
        assert_eq!(walk.bound(), Duration::from_secs(6));
        for (host, (name, port)) in walk.hosts.iter().zip([("h1", 5001), ("h2", 5002)]) {
            assert_eq!(host.get_hosts(), &[Host::Tcp(name.to_owned())]);
            assert_eq!(host.get_ports(), &[port]);
            assert_eq!(host.get_user(), Some("u"));
            assert_eq!(host.get_password(), Some(&b"pw"[..]));
            assert_eq!(host.get_dbname(), Some("db"));
            assert_eq!(host.get_options(), Some("-c search_path=s1"));
            assert_eq!(
                host.get_target_session_attrs(),
                TargetSessionAttrs::ReadWrite
            );
            assert_eq!(host.get_keepalives_idle(), Duration::from_secs(5));
        }
        // A host without a port has the default one, as the driver reads the URL.
        assert_eq!(walk.order(), vec![0, 1]);
        walk.last_good.store(1, Ordering::Relaxed);
        assert_eq!(walk.order(), vec![1, 0], "the last good host first");
        let default_port = HostWalk::of(&self::config("postgres://u@h1,h2:6000/db"));
        assert_eq!(default_port.hosts[0].get_ports(), &[5432]);
        assert_eq!(default_port.hosts[1].get_ports(), &[6000]);
    }
}
