//! Why a store could not be opened, and how SQLite's errors map to the portable ones.

use wow_core::eventsourcing::{BoxError, EventStoreError, SnapshotStoreError};

/// Why [`SqliteStore::open`](crate::SqliteStore::open) failed. Nothing was changed in the
/// file unless the error says a migration ran.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The URL is not `sqlite://PATH`.
    #[error("bad store URL: {0}")]
    BadUrl(String),
    /// The folder or file could not be created or opened.
    #[error("cannot open {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// SQLite refused.
    #[error("SQLite failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The file was written by a newer wow-sqlite; this one does not know its schema.
    #[error("the database has schema version {found}, newer than this build's {supported}: upgrade wow-rs")]
    SchemaTooNew {
        /// The file's schema version.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
}

/// Whether SQLite could not get at the file (locked, I/O, full disk): retryable.
fn is_unavailable(error: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode as C;
    matches!(
        error.sqlite_error_code(),
        Some(
            C::DatabaseBusy | C::DatabaseLocked | C::SystemIoFailure | C::DiskFull | C::CannotOpen
        )
    )
}

/// Whether another connection holds the file (busy or locked): worth waiting out.
pub(crate) fn is_locked(error: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode as C;
    matches!(
        error.sqlite_error_code(),
        Some(C::DatabaseBusy | C::DatabaseLocked)
    )
}

pub(crate) fn store_error(error: rusqlite::Error) -> EventStoreError {
    if is_unavailable(&error) {
        EventStoreError::Unavailable(Box::new(error))
    } else {
        EventStoreError::Internal(Box::new(error))
    }
}

pub(crate) fn snapshot_error(error: rusqlite::Error) -> SnapshotStoreError {
    if is_unavailable(&error) {
        SnapshotStoreError::Unavailable(Box::new(error))
    } else {
        SnapshotStoreError::Internal(Box::new(error))
    }
}

pub(crate) fn gone() -> BoxError {
    "the SQLite store is shut down".into()
}
