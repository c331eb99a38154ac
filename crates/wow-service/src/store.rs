//! Opening a store by URL into one [`Stores`] value: every contract the backend implements
//! (events, snapshots, positions, compensation, views, effects) served by the same database.

use wow_core::Stores;
use wow_postgres::{PostgresOptions, PostgresStore};
use wow_sqlite::{SqliteOptions, SqliteStore};

/// Why a store could not be opened. Nothing was started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The URL names no backend this crate opens: fix the URL.
    #[error("unsupported store URL `{0}`: use sqlite://PATH, postgres://... or memory://")]
    Unsupported(String),
    /// The SQLite database could not be opened or migrated.
    #[error("cannot open the store: {0}")]
    Sqlite(#[from] wow_sqlite::OpenError),
    /// The PostgreSQL database could not be reached or migrated.
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
    if url.starts_with("sqlite:") {
        let store = SqliteStore::open(url.parse::<SqliteOptions>()?).await?;
        return Ok(Stores::of(store));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let store = PostgresStore::open(url.parse::<PostgresOptions>()?).await?;
        return Ok(Stores::of(store.clone()).with_health(std::sync::Arc::new(store)));
    }
    Err(StoreError::Unsupported(url.to_owned()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

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
