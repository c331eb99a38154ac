//! How a PostgreSQL store is reached.

use std::str::FromStr;

use crate::OpenError;

/// Where the store lives: a `postgres://` URL, the schema to use, and the pool's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// The connection URL, without our own `schema` parameter.
    pub url: String,
    /// The schema the tables live in (created if missing). Default `public`.
    pub schema: String,
    /// Connections in the pool. Default 16.
    pub max_connections: usize,
    /// Connections that run queries (Wow's query DSL over event streams and views), a pool
    /// of their own, so that queries never take a connection from the command path; a tenant
    /// has half of them at most (at least one). Default 4.
    pub query_connections: usize,
    /// How long one query may run before the server stops it (`statement_timeout` on the
    /// query connections) and it is answered
    /// [`QueryRefusal::TimedOut`](wow_core::query::QueryRefusal::TimedOut); also how long a
    /// query waits for its tenant's share. Default 5 s.
    pub query_timeout: std::time::Duration,
    /// How long one call of the command path or of a background loop (an append, a
    /// look-up, a load, a consumer's transaction, a deadline or position write) may take,
    /// connection included: past it the call fails
    /// [`Unavailable`](wow_core::eventsourcing::EventStoreError::Unavailable) (its outcome
    /// unknown) and every connection made before it is replaced, never handed out again.
    /// Default 5 s ([`DEFAULT_CALL_TIMEOUT`]).
    pub call_timeout: std::time::Duration,
}

/// The default of [`PostgresOptions::call_timeout`]: 5 s, long enough for a commit that
/// waits for a synchronous standby under load, short enough that a hung server is noticed
/// before a caller gives up.
pub const DEFAULT_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl PostgresOptions {
    /// Options for `url` in `schema`, with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            schema: "public".to_owned(),
            max_connections: 16,
            query_connections: 4,
            query_timeout: wow_core::query::DEFAULT_QUERY_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
        }
    }

    /// Uses `schema` (letters, digits and `_` only).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
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

    /// Sets the deadline of each store call (at least a millisecond; default 5 s).
    pub fn call_timeout(mut self, budget: std::time::Duration) -> Self {
        self.call_timeout = budget.max(std::time::Duration::from_millis(1));
        self
    }

    /// Sets the pool size (at least 1).
    pub fn max_connections(mut self, count: usize) -> Self {
        self.max_connections = count.max(1);
        self
    }
}

impl FromStr for PostgresOptions {
    type Err = OpenError;

    /// Reads `postgres://…` (or `postgresql://…`), with optional `schema=NAME`,
    /// `max_connections=N`, `query_connections=N`, `query_timeout_ms=N` and `call_timeout_ms=N`
    /// parameters of our own; the rest (`target_session_attrs`, `options`, `connect_timeout`,
    /// `keepalives_*`, several hosts `h1:p1,h2:p2`) is handed to the driver.
    fn from_str(url: &str) -> Result<Self, Self::Err> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(OpenError::BadUrl(format!(
                "`{url}` is not a postgres:// URL"
            )));
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut options = PostgresOptions::new(base);
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("schema", schema)) => options.schema = schema.to_owned(),
                Some(("max_connections", n)) => {
                    options.max_connections = n.parse().map_err(|_| {
                        OpenError::BadUrl(format!("max_connections must be a number in `{url}`"))
                    })?
                }
                Some(("query_connections", n)) => {
                    let count = positive(url, "query_connections", n)?;
                    options = options.query_connections(usize::try_from(count).unwrap_or(1));
                }
                Some(("query_timeout_ms", n)) => {
                    let millis = positive(url, "query_timeout_ms", n)?;
                    options = options.query_timeout(std::time::Duration::from_millis(millis));
                }
                Some(("call_timeout_ms", n)) => {
                    let millis = positive(url, "call_timeout_ms", n)?;
                    options = options.call_timeout(std::time::Duration::from_millis(millis));
                }
                _ => rest.push(pair),
            }
        }
        if !rest.is_empty() {
            options.url = format!("{base}?{}", rest.join("&"));
        }
        Ok(options)
    }
}

/// The value `n` of the parameter `name` of `url`, a whole number above zero.
fn positive(url: &str, name: &str, n: &str) -> Result<u64, OpenError> {
    match n.parse::<u64>() {
        Ok(number) if number > 0 => Ok(number),
        _ => Err(OpenError::BadUrl(format!(
            "{name} must be a whole number above zero in `{url}`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_urls_with_our_parameters() {
        let options: PostgresOptions =
            "postgres://u@h:5432/db?schema=tck_1&sslmode=disable&max_connections=4"
                .parse()
                .unwrap();
        assert_eq!(options.url, "postgres://u@h:5432/db?sslmode=disable");
        assert_eq!(
            (options.schema.as_str(), options.max_connections),
            ("tck_1", 4)
        );
        assert!("sqlite://x".parse::<PostgresOptions>().is_err());
        let options: PostgresOptions = "postgres://h/db?query_timeout_ms=250&query_connections=2"
            .parse()
            .unwrap();
        assert_eq!(options.url, "postgres://h/db");
        assert_eq!(options.query_timeout, std::time::Duration::from_millis(250));
        assert_eq!(options.query_connections, 2);
        assert!("postgres://h/db?query_timeout_ms=0"
            .parse::<PostgresOptions>()
            .is_err());
        assert_eq!(options.call_timeout, DEFAULT_CALL_TIMEOUT);
        let options: PostgresOptions =
            "postgres://u@h1:5432,h2:5433/db?call_timeout_ms=1500&target_session_attrs=read-write"
                .parse()
                .unwrap();
        assert_eq!(options.call_timeout, std::time::Duration::from_millis(1500));
        assert_eq!(
            options.url,
            "postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write"
        );
        assert!("postgres://h/db?call_timeout_ms=x"
            .parse::<PostgresOptions>()
            .is_err());
    }
}
