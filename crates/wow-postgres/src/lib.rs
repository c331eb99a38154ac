//! # wow-postgres
//!
//! The production backend of wow-rs: event streams and snapshots in PostgreSQL, shared by
//! several processing nodes.
//!
//! Built on `tokio-postgres` with a `deadpool` pool rather than sqlx: the store needs nothing
//! of sqlx's query macros or other databases, and `tokio-postgres` hands over each
//! failure's SQLSTATE and constraint name directly, which is what maps a conflict to its typed
//! error.
//!
//! - Named constraints: the primary key `event_stream_pk` on (tenant, aggregate name,
//!   aggregate id, version) and the unique `event_stream_request_uq` on (tenant, aggregate
//!   name, aggregate id, request id): the tenant leads every key (SPEC TN-1). Each maps to its conflict; event rows are never written with `ON CONFLICT DO
//!   NOTHING`. One append is one `INSERT` (autocommit), atomic by itself.
//! - Unique keys (SPEC DM-1, table `unique_key`, keyed by tenant, key space and value): an
//!   append with key changes inserts its stream and makes them in one transaction, and the
//!   table's primary key, not a read first, decides between two claimants of a key.
//! - Deadlines (SPEC DM-2, table `deadline`, keyed by tenant, owner aggregate and name): an
//!   append's schedules and cancels are made in its transaction after its key changes, so a
//!   refused append leaves no row; the scheduler reads what is due by a range scan of the
//!   index on the due time.
//! - The global feed (`EventFeed::read_feed`) orders appended streams by (appending
//!   transaction id, position) and reads only below the oldest transaction in flight, so it
//!   never skips a stream that commits late; a long transaction anywhere in the cluster holds
//!   it back (see the docs of `src/store/feed.rs` for why, and how to find it).
//! - Migrations run on open; a schema newer than this build is refused.
//! - A lost connection is [`EventStoreError::Unavailable`](wow_core::eventsourcing::EventStoreError)
//!   (the outcome of that append is unknown); the pool reconnects by itself.
//!
//! - Every call of the command path and of the background loops has a deadline
//!   ([`PostgresOptions::call_timeout`], default 5 s): past it the call is `Unavailable`
//!   (its outcome unknown) and the connections made before it are replaced. A multi-host
//!   URL's hosts are walked with a bounded set-up each, so a hung host never stops the walk;
//!   a read-only or shutting-down server is `Unavailable` too, and a decision is answered
//!   only once a failover cannot undo it (`src/call.rs`, `src/connect.rs`,
//!   `src/store/request_decision.rs`).
//!
//! [`PostgresStore`] implements `EventStore`, `SnapshotStore` and `DeadlineStore`, the
//! `ViewStore` of portable views (table `view_row`) and `StoreHealth` (`/health`), and passes
//! the whole `wow-tck` suite.
//!
//! The SQL is kept by table, each statement a named constant beside the code that runs it:
//! `store/` (`event_stream`, its request decisions, feed and queries, `snapshot`,
//! `processed_message`, `unique_key`, `deadline`), `view/` (`view_row`), `downstream/`
//! (`consumer_position`, `feed_cursor`, `external_effect`, `execution_failed`), `rename.rs`
//! and `schema.rs`.

mod bounded;
mod call;
mod connect;
mod downstream;
mod error;
mod health;
mod options;
mod query;
mod rename;
mod schema;
mod store;
mod view;

pub use error::OpenError;
pub use options::{PostgresOptions, DEFAULT_CALL_TIMEOUT};
pub use schema::SCHEMA_VERSION;
pub use store::PostgresStore;
