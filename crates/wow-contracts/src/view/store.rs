//! The ViewStore contract: view rows written once per message, together with the record that
//! the message was processed (SPEC DS-2).

use async_trait::async_trait;

use crate::event::{ProcessError, Processed};
use crate::view::ViewFilter;
use wow_model::error::BoxError;
use wow_model::query::{DocumentQuery, Filter};
use wow_model::view::{ViewKey, ViewRow};

/// The work of one [`ViewStore::update`]: given the row as stored (`None` when there is
/// none), the row to store, or `None` to leave it as it is. An error stores nothing.
pub type ViewUpdate = Box<dyn FnOnce(Option<ViewRow>) -> Result<Option<ViewRow>, BoxError> + Send>;

/// Why a view store could not read or clear. Nothing was written when it fails.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewStoreError {
    /// An argument is not acceptable (a filter's field name, say); nothing was read. Fix the
    /// call: retrying it as is fails the same way.
    #[error("illegal argument: {0}")]
    IllegalArgument(String),
    /// The store could not be reached; try again later.
    #[error("view store unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The store failed in an unexpected way (a row it cannot decode, say).
    #[error("view store failed: {0}")]
    Internal(#[source] BoxError),
    /// A query was not answered within the store's bounds (its time budget, the tenant's
    /// share of query connections).
    #[error(transparent)]
    QueryRefused(#[from] wow_model::query::QueryRefusal),
}

/// An update returned a row of another key than the one it was given: a bug of the work.
#[derive(Debug, thiserror::Error)]
#[error("the update of {expected:?} returned a row of {returned:?}")]
pub struct ViewKeyMismatch {
    /// The key the update was for.
    pub expected: ViewKey,
    /// The key of the row it returned.
    pub returned: ViewKey,
}

/// Runs `work` on `current` for the row of `key`, and refuses a returned row of another key
/// ([`ViewKeyMismatch`]). Every store calls it inside its transaction, so all of them treat
/// the work alike.
pub fn apply_update(
    key: &ViewKey,
    current: Option<ViewRow>,
    work: ViewUpdate,
) -> Result<Option<ViewRow>, BoxError> {
    let next = work(current)?;
    if let Some(row) = &next {
        if &row.key != key {
            return Err(Box::new(ViewKeyMismatch {
                expected: key.clone(),
                returned: row.key.clone(),
            }));
        }
    }
    Ok(next)
}

/// Keeps view rows: one per (view, tenant, aggregate id), each with the last aggregate
/// version folded into it.
///
/// Every backend passes the view suite of `wow-tck`.
///
/// # Cancel safety
///
/// Reads are cancel safe. A dropped `update` or `clear` either committed or did not: its row
/// and its processed-message record go together, so a later delivery of the message finds
/// both or neither.
#[async_trait]
pub trait ViewStore: Send + Sync + std::fmt::Debug {
    /// Runs `work` on the row of `key` once per (`key.view`, `message_id`), and stores the row
    /// it returns together with the record that `message_id` was processed by the view, in
    /// one transaction (SPEC DS-2).
    ///
    /// Returns [`Processed::AlreadyProcessed`] without running `work` when the record is
    /// there. Updates of one key are serialised: concurrent updates with distinct message
    /// ids each see the row the previous one stored, so each applies exactly once.
    ///
    /// Fails with [`ProcessError::Work`] when `work` fails, panics, or returns a row of
    /// another key ([`ViewKeyMismatch`]), and with [`ProcessError::Store`] when the store
    /// fails; in both cases neither the row nor the record was written, so a later delivery
    /// runs `work` again.
    async fn update(
        &self,
        key: &ViewKey,
        message_id: &str,
        work: ViewUpdate,
    ) -> Result<Processed, ProcessError>;

    /// Stores `row` in place of its key's row unless the stored one is at `row.version` or
    /// later, and answers whether it wrote. No processed-message record is kept: this is for
    /// views whose row is a whole function of one aggregate's history up to its version
    /// (Wow's materialized snapshots), where a redelivered stream would write what is there
    /// already, so the version alone makes the write idempotent and never moves a row back.
    ///
    /// Fails with [`ViewStoreError::Unavailable`] or [`ViewStoreError::Internal`]; then
    /// nothing was written. By default an [`update`](Self::update) whose message id is the
    /// row's tenant, aggregate id and version (the in-memory store's way: the durable stores
    /// write the row in one statement and keep no record).
    async fn put_newer(&self, row: ViewRow) -> Result<bool, ViewStoreError> {
        let key = row.key.clone();
        let message_id = format!("{}/{}@{}", key.tenant_id, key.aggregate_id, row.version);
        let version = row.version;
        let wrote = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let marked = wrote.clone();
        let written = self
            .update(
                &key,
                &message_id,
                Box::new(move |current| {
                    Ok(match current {
                        Some(current) if current.version >= version => None,
                        _ => {
                            marked.store(true, std::sync::atomic::Ordering::Relaxed);
                            Some(row)
                        }
                    })
                }),
            )
            .await;
        match written {
            Ok(Processed::Applied) => Ok(wrote.load(std::sync::atomic::Ordering::Relaxed)),
            Ok(_) => Ok(false),
            Err(ProcessError::Store(error)) => Err(ViewStoreError::Unavailable(error)),
            Err(other) => Err(ViewStoreError::Internal(Box::new(other))),
        }
    }

    /// The row of `key`, if one was stored.
    ///
    /// Fails with [`ViewStoreError::Unavailable`] or [`ViewStoreError::Internal`].
    async fn load(&self, key: &ViewKey) -> Result<Option<ViewRow>, ViewStoreError>;

    /// Up to `limit` rows of `view` in `tenant_id` that match `filter`, in aggregate id order
    /// (by bytes of UTF-8), starting after the aggregate id `after` (from the first when
    /// `None`): pass the last id of one page to get the next. Another tenant's rows are never
    /// listed.
    ///
    /// Fails with [`ViewStoreError::IllegalArgument`] when a field name of `filter` does not
    /// pass [`check_field`](crate::view::check_field), and with [`ViewStoreError::Unavailable`] or
    /// [`ViewStoreError::Internal`].
    async fn list(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &ViewFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError>;

    /// The rows of `view` in `tenant_id` whose state matches `query.filter`, in `query.sort`
    /// order and then by aggregate id (by bytes of UTF-8), `query.limit` of them from
    /// `query.offset`: Wow's query DSL over view rows (and over materialized snapshots, which
    /// are view rows). The store runs the filter itself, with the semantics of
    /// [`Filter`] ([`matches`](wow_model::query::matches) is the reference); another
    /// tenant's rows are never read.
    ///
    /// Fails with [`ViewStoreError::IllegalArgument`] when the store cannot run a part of the
    /// query (naming it), and with [`ViewStoreError::Unavailable`] or
    /// [`ViewStoreError::Internal`]. The default says queries are not supported.
    async fn query(
        &self,
        view: &str,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        let _ = (view, tenant_id, query);
        Err(ViewStoreError::IllegalArgument(
            "this view store does not run queries".to_owned(),
        ))
    }

    /// How many rows of `view` in `tenant_id` match `filter`.
    ///
    /// Fails as [`query`](Self::query) does.
    async fn count(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, ViewStoreError> {
        let _ = (view, tenant_id, filter);
        Err(ViewStoreError::IllegalArgument(
            "this view store does not run queries".to_owned(),
        ))
    }

    /// Up to `limit` rows of `view` across every tenant, in (tenant id, aggregate id) order
    /// (each by bytes of UTF-8), starting after the row whose tenant and aggregate id are
    /// those of `after` (from the first when `None`; `after.view` is not looked at): pass the
    /// last key of one page to get the next. For work that spans tenants, such as delivering
    /// an outbox; a tenant's own reads use [`ViewStore::list`].
    ///
    /// Fails with [`ViewStoreError::Unavailable`] or [`ViewStoreError::Internal`].
    async fn scan(
        &self,
        view: &str,
        after: Option<&ViewKey>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError>;

    /// Drops every row of `view` and every processed-message record of its consumer (named
    /// `view`), in one transaction, so that replaying history rebuilds it. Other views keep
    /// theirs. The consumer's positions are another store's: reset them too before a
    /// catch-up.
    ///
    /// Fails with [`ViewStoreError::Unavailable`] or [`ViewStoreError::Internal`]; then
    /// nothing was dropped.
    async fn clear(&self, view: &str) -> Result<(), ViewStoreError>;

    /// Keeps an index over `view`'s documents for the query DSL's equality tests (`EQ`,
    /// `IN`, `ID`, `AGGREGATE_ID`, `TENANT_ID`, ...) where the store has one: PostgreSQL keeps
    /// a GIN index over the view's JSONB, which every equality test of a
    /// [`query`](ViewStore::query) or [`count`](ViewStore::count) can use; the other stores
    /// answer the same queries without one. Idempotent: safe at every start, and when two
    /// processes declare it at once.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an index is made whole or not at all.
    async fn declare_query_index(&self, view: &str) -> Result<(), ViewStoreError> {
        let _ = view;
        Ok(())
    }

    /// Keeps an index on the top-level `field` of the states of `view` (SPEC DM-4), so that
    /// a [`list`](ViewStore::list) whose filter tests `field` reads the index, never every
    /// row of the tenant: SQLite and PostgreSQL keep an expression index on (view, tenant,
    /// field); the in-memory store needs none. Fails with
    /// [`ViewStoreError::IllegalArgument`] when `field` does not pass
    /// [`check_field`](crate::view::check_field). Idempotent: safe at every start, and when
    /// two processes declare it at once.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an index is made whole or not at all.
    async fn declare_field_index(&self, view: &str, field: &str) -> Result<(), ViewStoreError> {
        let _ = view;
        crate::view::check_field(field)
    }
}
