//! Why a store could not be opened, and how PostgreSQL's errors map to the portable ones.

use tokio_postgres::error::SqlState;
use wow_core::event::ConsumerStoreError;
use wow_core::eventsourcing::{EventStoreError, SnapshotStoreError};
use wow_core::view::ViewStoreError;

/// Why [`PostgresStore::open`](crate::PostgresStore::open) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The URL or an option is not usable.
    #[error("bad store URL: {0}")]
    BadUrl(String),
    /// PostgreSQL could not be reached or refused.
    #[error("PostgreSQL failed: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// The pool could not be built or handed out no connection.
    #[error("connection pool failed: {0}")]
    Pool(String),
    /// The schema was written by a newer wow-postgres.
    #[error("the database has schema version {found}, newer than this build's {supported}: upgrade wow-rs")]
    SchemaTooNew {
        /// The database's schema version.
        found: i32,
        /// The newest version this build knows.
        supported: i32,
    },
}

/// The unique constraints of `event_stream`, by name: the version, and the one decision per
/// request id, which appended streams and recorded rejections share (SPEC ID-6).
pub(crate) const VERSION_CONSTRAINT: &str = "event_stream_pk";
/// See [`VERSION_CONSTRAINT`].
pub(crate) const REQUEST_CONSTRAINT: &str = "event_stream_request_uq";

/// Which unique constraint `error` broke, if it is a unique violation on `event_stream`.
pub(crate) fn violated_constraint(error: &tokio_postgres::Error) -> Option<&str> {
    let db = error.as_db_error()?;
    (db.code() == &SqlState::UNIQUE_VIOLATION)
        .then(|| db.constraint())
        .flatten()
}

/// Whether `error` means the database could not be reached (rather than refused the work):
/// a closed connection, an I/O failure on the way, or the server saying it is shutting down
/// or full. A parameter that could not be encoded, or any other error of ours, is not.
pub(crate) fn is_unavailable(error: &tokio_postgres::Error) -> bool {
    match error.as_db_error() {
        None => error.is_closed() || caused_by_io(error),
        Some(db) => {
            let code = db.code();
            code == &SqlState::ADMIN_SHUTDOWN
                || code == &SqlState::CRASH_SHUTDOWN
                || code == &SqlState::CANNOT_CONNECT_NOW
                || code == &SqlState::CONNECTION_FAILURE
                || code == &SqlState::CONNECTION_EXCEPTION
                || code == &SqlState::TOO_MANY_CONNECTIONS
        }
    }
}

/// Whether an I/O error is among the causes of `error`.
fn caused_by_io(error: &tokio_postgres::Error) -> bool {
    let mut cause = std::error::Error::source(error);
    while let Some(inner) = cause {
        if inner.is::<std::io::Error>() {
            return true;
        }
        cause = inner.source();
    }
    false
}

/// `error` as an [`EventStoreError`]: unavailable when the database could not be reached
/// ([`is_unavailable`]), internal otherwise.
pub(crate) fn store_error(error: tokio_postgres::Error) -> EventStoreError {
    if is_unavailable(&error) {
        EventStoreError::Unavailable(Box::new(error))
    } else {
        EventStoreError::Internal(Box::new(error))
    }
}

/// `error` as a [`ConsumerStoreError`], as [`store_error`] maps it.
pub(crate) fn consumer_store_error(error: tokio_postgres::Error) -> ConsumerStoreError {
    if is_unavailable(&error) {
        ConsumerStoreError::Unavailable(Box::new(error))
    } else {
        ConsumerStoreError::Internal(Box::new(error))
    }
}

/// `error` as a [`SnapshotStoreError`], as [`store_error`] maps it.
pub(crate) fn snapshot_error(error: tokio_postgres::Error) -> SnapshotStoreError {
    if is_unavailable(&error) {
        SnapshotStoreError::Unavailable(Box::new(error))
    } else {
        SnapshotStoreError::Internal(Box::new(error))
    }
}

/// A pool's failure as an [`EventStoreError`]: the database's own error mapped by
/// [`store_error`], any other (a timeout, a closed pool) unavailable.
pub(crate) fn pool_error(error: deadpool_postgres::PoolError) -> EventStoreError {
    match error {
        deadpool_postgres::PoolError::Backend(error) => store_error(error),
        other => EventStoreError::Unavailable(Box::new(other)),
    }
}

/// A pool's failure as a [`SnapshotStoreError`], as [`pool_error`] maps it.
pub(crate) fn pool_snapshot_error(error: deadpool_postgres::PoolError) -> SnapshotStoreError {
    match error {
        deadpool_postgres::PoolError::Backend(error) => snapshot_error(error),
        other => SnapshotStoreError::Unavailable(Box::new(other)),
    }
}

/// `error` as a [`ViewStoreError`], as [`store_error`] maps it.
pub(crate) fn view_error(error: tokio_postgres::Error) -> ViewStoreError {
    if is_unavailable(&error) {
        ViewStoreError::Unavailable(Box::new(error))
    } else {
        ViewStoreError::Internal(Box::new(error))
    }
}

/// A pool's failure as a [`ViewStoreError`], as [`pool_error`] maps it.
pub(crate) fn pool_view_error(error: deadpool_postgres::PoolError) -> ViewStoreError {
    match error {
        deadpool_postgres::PoolError::Backend(error) => view_error(error),
        other => ViewStoreError::Unavailable(Box::new(other)),
    }
}
