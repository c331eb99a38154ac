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
}

impl PostgresOptions {
    /// Options for `url` in `schema`, with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            schema: "public".to_owned(),
            max_connections: 16,
        }
    }

    /// Uses `schema` (letters, digits and `_` only).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
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

    /// Reads `postgres://…` (or `postgresql://…`), with optional `schema=NAME` and
    /// `max_connections=N` parameters of our own; the rest is handed to the driver.
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
                _ => rest.push(pair),
            }
        }
        if !rest.is_empty() {
            options.url = format!("{base}?{}", rest.join("&"));
        }
        Ok(options)
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
    }
}
