//! Queries within bounds: on a pool of their own (so the command path never waits for a
//! connection behind them), a tenant's share of it at most, and stopped by the server
//! (`statement_timeout` on those connections) when they run past the time budget.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio_postgres::error::SqlState;
use tokio_postgres::{NoTls, Row};
use wow_core::eventsourcing::EventStoreError;
use wow_core::query::{QueryRefusal, SharePlace, TenantShare};
use wow_core::view::ViewStoreError;

use crate::error::{pool_error, pool_view_error, store_error, view_error};
use crate::query::{param_refs, Param};
use crate::OpenError;

/// The query connections, the tenants' share of them and the time budget of each query.
#[derive(Clone)]
pub(crate) struct QueryPool {
    pool: Pool,
    share: TenantShare,
    budget: Duration,
}

/// A query connection, held with its tenant's place.
pub(crate) struct QueryClient {
    /// The connection.
    pub(crate) client: Object,
    _place: SharePlace,
}

/// Why a bounded query did not answer.
#[derive(Debug)]
pub(crate) enum QueryFailure {
    /// Past a bound.
    Refused(QueryRefusal),
    /// No connection.
    Pool(deadpool_postgres::PoolError),
    /// The database failed.
    Postgres(tokio_postgres::Error),
}

impl QueryPool {
    /// A pool of `size` connections configured as `config`, each statement stopped by the
    /// server after `budget`.
    pub(crate) fn open(
        mut config: tokio_postgres::Config,
        size: usize,
        budget: Duration,
    ) -> Result<Self, OpenError> {
        let millis = budget.as_millis().max(1);
        let options = config.get_options().unwrap_or_default().to_owned();
        config.options(format!("{options} -c statement_timeout={millis}"));
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(size.max(1))
            .wait_timeout(Some(budget))
            .create_timeout(Some(Duration::from_secs(5)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| OpenError::Pool(e.to_string()))?;
        Ok(Self {
            pool,
            share: TenantShare::of_pool(size, budget),
            budget,
        })
    }

    /// The tenants' share of the query connections.
    pub(crate) fn share(&self) -> &TenantShare {
        &self.share
    }

    /// A connection for one query of `tenant_id`, within the tenant's share.
    pub(crate) async fn client(&self, tenant_id: &str) -> Result<QueryClient, QueryFailure> {
        let place = self
            .share
            .enter(tenant_id)
            .await
            .map_err(QueryFailure::Refused)?;
        let client = self.pool.get().await.map_err(QueryFailure::Pool)?;
        Ok(QueryClient {
            client,
            _place: place,
        })
    }

    /// The rows `text` answers with `params`, run for `tenant_id` within its share.
    pub(crate) async fn rows(
        &self,
        tenant_id: &str,
        text: &str,
        params: &[Param],
    ) -> Result<Vec<Row>, QueryFailure> {
        let bounded = self.client(tenant_id).await?;
        bounded
            .client
            .query(text, &param_refs(params))
            .await
            .map_err(|e| self.failed(e))
    }

    /// The count `text` answers with `params` (the first column of its one row), run for
    /// `tenant_id` within its share.
    pub(crate) async fn count(
        &self,
        tenant_id: &str,
        text: &str,
        params: &[Param],
    ) -> Result<u64, QueryFailure> {
        let bounded = self.client(tenant_id).await?;
        let count: i64 = bounded
            .client
            .query_one(text, &param_refs(params))
            .await
            .map_err(|e| self.failed(e))?
            .get(0);
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// `error` of a query, as a refusal when the server stopped it at the budget.
    pub(crate) fn failed(&self, error: tokio_postgres::Error) -> QueryFailure {
        match error.code() {
            Some(code) if code == &SqlState::QUERY_CANCELED => {
                QueryFailure::Refused(QueryRefusal::TimedOut(self.budget))
            }
            _ => QueryFailure::Postgres(error),
        }
    }
}

impl From<QueryFailure> for EventStoreError {
    fn from(failure: QueryFailure) -> Self {
        match failure {
            QueryFailure::Refused(refusal) => EventStoreError::QueryRefused(refusal),
            QueryFailure::Pool(error) => pool_error(error),
            QueryFailure::Postgres(error) => store_error(error),
        }
    }
}

impl From<QueryFailure> for ViewStoreError {
    fn from(failure: QueryFailure) -> Self {
        match failure {
            QueryFailure::Refused(refusal) => ViewStoreError::QueryRefused(refusal),
            QueryFailure::Pool(error) => pool_view_error(error),
            QueryFailure::Postgres(error) => view_error(error),
        }
    }
}
