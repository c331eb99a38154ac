//! # wow-sqlite
//!
//! The embedded default backend of wow-rs: event streams and snapshots in one SQLite file
//! (bundled SQLite, WAL), durable on acknowledgement.
//!
//! - One writer thread owns the write connection. Concurrent appends queue up and commit
//!   together in one transaction (group commit); a stream that conflicts fails alone and the
//!   rest of its batch commits. An append is acknowledged once its transaction is durable.
//! - Reads use a small pool of read-only connections; under WAL they never wait for the
//!   writer. Queries (Wow's query DSL) run on connections of their own, a tenant on half of
//!   them at most, each stopped past its time budget (`SqliteOptions::query_timeout`).
//! - The schema is versioned and migrated on open; a file written by a newer schema is
//!   refused.
//!
//! [`SqliteStore`] implements both [`EventStore`](wow_core::eventsourcing::EventStore) and
//! [`SnapshotStore`](wow_core::eventsourcing::SnapshotStore), and the
//! [`ViewStore`](wow_core::view::ViewStore) of portable views (table `view_row`, updated
//! through the writer, so updates of one row are serialised), and the
//! [`DeadlineStore`](wow_core::deadline::DeadlineStore) of scheduled commands (table
//! `deadline`, each row written in the transaction of the stream that schedules it, SPEC
//! DM-2), and passes the whole `wow-tck` suite.
//!
//! ```no_run
//! # async fn demo() -> Result<(), wow_sqlite::OpenError> {
//! let store = wow_sqlite::SqliteStore::open("sqlite://./data/wow.db".parse()?).await?;
//! # Ok(()) }
//! ```

mod bounded;
mod downstream;
mod error;
mod options;
mod query;
mod reader;
mod rename;
mod schema;
mod store;
mod view;
mod write_job;
mod writer;

pub use error::OpenError;
pub use options::{SqliteOptions, Synchronous, DEFAULT_COMMIT_DELAY};
pub use schema::SCHEMA_VERSION;
pub use store::SqliteStore;
