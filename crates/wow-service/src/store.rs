//! Opening a store by URL into one [`Stores`] value: every contract the backend implements
//! (events, snapshots, positions, compensation, views, effects) served by the same database.

use wow_core::Stores;
#[cfg(feature = "postgres")]
use wow_postgres::{PostgresOptions, PostgresStore};
#[cfg(feature = "sqlite")]
use wow_sqlite::{SqliteOptions, SqliteStore};

/// Why a store could not be opened. Nothing was started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The URL names no backend this crate opens: fix the URL.
    #[error("unsupported store URL `{0}`: use sqlite://PATH, postgres://... or memory://")]
    Unsupported(String),
    /// The URL names a backend this build was compiled without: build wow-service with the
    /// feature named.
    #[error("store URL `{url}` needs wow-service's `{feature}` feature, which this build was compiled without")]
    NotBuiltIn {
        /// The store URL.
        url: String,
        /// The feature that opens it.
        feature: &'static str,
    },
    /// The SQLite database could not be opened or migrated.
    #[cfg(feature = "sqlite")]
    #[error("cannot open the store: {0}")]
    Sqlite(#[from] wow_sqlite::OpenError),
    /// The PostgreSQL database could not be reached or migrated.
    #[cfg(feature = "postgres")]
    #[error("cannot open the store: {0}")]
    Postgres(#[from] wow_postgres::OpenError),
}

/// Opens the store `url` names:
///
/// - `memory://` (or `memory:`): everything in memory, gone when the process ends;
/// - `sqlite://PATH` (see `SqliteOptions` for the query parameters): the embedded store,
///   made and migrated when missing;
/// - `postgres://...` or `postgresql://...`: PostgreSQL, migrated when behind.
///
/// # Errors
///
/// [`StoreError::Unsupported`] for any other URL, and the backend's own open error.
pub async fn open_store(url: &str) -> Result<Stores, StoreError> {
    if url == "memory://" || url == "memory:" {
        return Ok(Stores::in_memory());
    }
    let not_built_in = |feature| StoreError::NotBuiltIn {
        url: url.to_owned(),
        feature,
    };
    if url.starts_with("sqlite:") {
        #[cfg(feature = "sqlite")]
        {
            let store = SqliteStore::open(url.parse::<SqliteOptions>()?).await?;
            return Ok(Stores::of(store));
        }
        #[cfg(not(feature = "sqlite"))]
        return Err(not_built_in("sqlite"));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        {
            let store = PostgresStore::open(url.parse::<PostgresOptions>()?).await?;
            return Ok(Stores::of(store.clone()).with_health(std::sync::Arc::new(store)));
        }
        #[cfg(not(feature = "postgres"))]
        return Err(not_built_in("postgres"));
    }
    let _ = not_built_in;
    Err(StoreError::Unsupported(url.to_owned()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn memory_and_sqlite_open_and_anything_else_is_unsupported() {
        open_store("memory://").await.unwrap();
        let folder = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", folder.path().join("a.db").display());
        open_store(&url).await.unwrap();
        let error = open_store("mysql://x").await.unwrap_err();
        assert!(matches!(error, StoreError::Unsupported(_)), "{error}");
    }
}
