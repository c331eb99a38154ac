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
    #[error("PostgreSQL failed: {}", PgFault(.0))]
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

/// Whether `error` means the store cannot do the work now and a retry may (rather than that
/// it refused the work): a closed connection, an I/O failure on the way, or the server saying
/// so by its SQLSTATE ([`is_unavailable_state`]). A parameter that could not be encoded, or
/// any other error of ours, is not.
pub(crate) fn is_unavailable(error: &tokio_postgres::Error) -> bool {
    match error.code() {
        None => error.is_closed() || caused_by_io(error),
        Some(code) => is_unavailable_state(code),
    }
}

/// Whether SQLSTATE `code` says "not now" rather than "not this": a connection failure (class
/// 08), a server shutting down or starting (57P01 `admin_shutdown`, 57P02 `crash_shutdown`,
/// 57P03 `cannot_connect_now`), too many connections (53300), a statement cancelled by the
/// server or an operator (57014, the outcome of a commit then unknown), or a read-only
/// transaction (25006: the server
/// is a standby, or a demoted primary; the connection is replaced and the walk over the
/// URL's hosts finds the primary).
pub(crate) fn is_unavailable_state(code: &SqlState) -> bool {
    code.code().starts_with("08")
        || code == &SqlState::ADMIN_SHUTDOWN
        || code == &SqlState::CRASH_SHUTDOWN
        || code == &SqlState::CANNOT_CONNECT_NOW
        || code == &SqlState::TOO_MANY_CONNECTIONS
        || code == &SqlState::QUERY_CANCELED
        || code == &SqlState::READ_ONLY_SQL_TRANSACTION
}

/// A driver error as logs and answers show it: the server's severity, message and SQLSTATE
/// for a database error (the driver's own display says only "db error"), the driver's
/// message and its causes otherwise.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PgFault<'a>(pub(crate) &'a tokio_postgres::Error);

impl std::fmt::Display for PgFault<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(db) = self.0.as_db_error() {
            return write!(
                f,
                "PostgreSQL {} SQLSTATE {}: {}",
                db.severity(),
                db.code().code(),
                db.message()
            );
        }
        write!(f, "{}", self.0)?;
        let mut cause = std::error::Error::source(self.0);
        while let Some(inner) = cause {
            write!(f, ": {inner}")?;
            cause = inner.source();
        }
        Ok(())
    }
}

/// A driver error kept as the source of a store error, displayed as [`PgFault`] shows it.
#[derive(Debug)]
pub(crate) struct DbFault(tokio_postgres::Error);

impl std::fmt::Display for DbFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        PgFault(&self.0).fmt(f)
    }
}

impl std::error::Error for DbFault {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl From<tokio_postgres::Error> for DbFault {
    fn from(error: tokio_postgres::Error) -> Self {
        Self(error)
    }
}

/// `error`, boxed as the source of a store error.
fn boxed(error: tokio_postgres::Error) -> wow_core::eventsourcing::BoxError {
    Box::new(DbFault(error))
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
        EventStoreError::Unavailable(boxed(error))
    } else {
        EventStoreError::Internal(boxed(error))
    }
}

/// `error` as a [`ConsumerStoreError`], as [`store_error`] maps it.
pub(crate) fn consumer_store_error(error: tokio_postgres::Error) -> ConsumerStoreError {
    if is_unavailable(&error) {
        ConsumerStoreError::Unavailable(boxed(error))
    } else {
        ConsumerStoreError::Internal(boxed(error))
    }
}

/// `error` as a [`SnapshotStoreError`], as [`store_error`] maps it.
pub(crate) fn snapshot_error(error: tokio_postgres::Error) -> SnapshotStoreError {
    if is_unavailable(&error) {
        SnapshotStoreError::Unavailable(boxed(error))
    } else {
        SnapshotStoreError::Internal(boxed(error))
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
        ViewStoreError::Unavailable(boxed(error))
    } else {
        ViewStoreError::Internal(boxed(error))
    }
}

/// A pool's failure as a [`ViewStoreError`], as [`pool_error`] maps it.
pub(crate) fn pool_view_error(error: deadpool_postgres::PoolError) -> ViewStoreError {
    match error {
        deadpool_postgres::PoolError::Backend(error) => view_error(error),
        other => ViewStoreError::Unavailable(Box::new(other)),
    }
}
