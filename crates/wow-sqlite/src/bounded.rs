//! Queries within bounds: on their own connections (so the command path's reads never wait
//! behind them), a tenant's share of those at most, and stopped by SQLite's progress handler
//! when they run past the time budget.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use wow_core::eventsourcing::EventStoreError;
use wow_core::query::{QueryRefusal, TenantShare};
use wow_core::view::ViewStoreError;

use crate::error::store_error;
use crate::reader::ReadPool;

/// How many virtual machine steps run between two looks at the clock.
const STEPS_PER_CHECK: std::ffi::c_int = 1000;

/// The query connections, the tenants' share of them and the time budget of each query.
#[derive(Debug)]
pub(crate) struct QueryPool {
    connections: Arc<ReadPool>,
    share: TenantShare,
    budget: Duration,
}

/// Why a bounded query did not answer.
#[derive(Debug)]
pub(crate) enum QueryFailure {
    /// Past a bound.
    Refused(QueryRefusal),
    /// SQLite failed.
    Sqlite(rusqlite::Error),
}

impl QueryPool {
    /// `size` connections from `connections`, each query within `budget`.
    pub(crate) fn new(connections: Arc<ReadPool>, size: usize, budget: Duration) -> Self {
        Self {
            connections,
            share: TenantShare::of_pool(size, budget),
            budget,
        }
    }

    /// The tenants' share of the query connections.
    pub(crate) fn share(&self) -> &TenantShare {
        &self.share
    }

    /// Runs `read` for `tenant_id` within the bounds.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped read still stops at its budget and gives its place back.
    pub(crate) async fn read<T, F>(&self, tenant_id: &str, read: F) -> Result<T, QueryFailure>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let place = self
            .share
            .enter(tenant_id)
            .await
            .map_err(QueryFailure::Refused)?;
        let budget = self.budget;
        let result = self
            .connections
            .read(move |connection| {
                let _place = place;
                let deadline = Instant::now() + budget;
                connection
                    .progress_handler(STEPS_PER_CHECK, Some(move || Instant::now() >= deadline));
                let result = read(connection);
                connection.progress_handler(0, None::<fn() -> bool>);
                result
            })
            .await;
        result.map_err(|error| match error.sqlite_error_code() {
            Some(rusqlite::ErrorCode::OperationInterrupted) => {
                QueryFailure::Refused(QueryRefusal::TimedOut(budget))
            }
            _ => QueryFailure::Sqlite(error),
        })
    }

    /// The count a `SELECT COUNT(*)` statement `text` answers with `values`, as a query of
    /// `tenant_id` (within its share and budget, as [`read`](Self::read)).
    pub(crate) async fn count(
        &self,
        tenant_id: &str,
        text: String,
        values: Vec<rusqlite::types::Value>,
    ) -> Result<u64, QueryFailure> {
        let count: i64 = self
            .read(tenant_id, move |connection| {
                connection
                    .prepare(&text)?
                    .query_row(rusqlite::params_from_iter(values), |row| row.get(0))
            })
            .await?;
        Ok(u64::try_from(count).unwrap_or(0))
    }
}

impl From<QueryFailure> for EventStoreError {
    fn from(failure: QueryFailure) -> Self {
        match failure {
            QueryFailure::Refused(refusal) => EventStoreError::QueryRefused(refusal),
            QueryFailure::Sqlite(error) => store_error(error),
        }
    }
}

impl From<QueryFailure> for ViewStoreError {
    fn from(failure: QueryFailure) -> Self {
        match failure {
            QueryFailure::Refused(refusal) => ViewStoreError::QueryRefused(refusal),
            QueryFailure::Sqlite(error) => ViewStoreError::Internal(Box::new(error)),
        }
    }
}
