//! The bounds a store runs queries within: a time budget per query, and a share of the
//! query connections per tenant, so that one tenant's queries cannot take every connection
//! from the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::model::error_code::ErrorCode;

/// The default time budget of one query.
pub const DEFAULT_QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a store did not answer a query within its bounds. Nothing was written either way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryRefusal {
    /// The query ran past the store's time budget and was stopped. A narrower query answers;
    /// the same one may answer when the store is less busy.
    #[error("the query ran past its time budget of {} ms and was stopped", .0.as_millis())]
    TimedOut(Duration),
    /// Every query connection of the tenant's share stayed in use for the whole wait: the
    /// tenant's own queries are queued behind each other. Try again shortly.
    #[error("all {0} query connections of this tenant's share stayed busy; try again shortly")]
    Busy(usize),
}

impl QueryRefusal {
    /// The error code it reports as: `QueryTimeout` (HTTP 503) or `TooManyRequests` (429).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            QueryRefusal::TimedOut(_) => ErrorCode::QueryTimeout,
            QueryRefusal::Busy(_) => ErrorCode::TooManyRequests,
        }
    }
}

/// At most `per_tenant` queries of one tenant at once, whatever the others do. A query past
/// its tenant's share waits for one of them to end, at most `wait`.
#[derive(Debug, Clone)]
pub struct TenantShare {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    per_tenant: usize,
    wait: Duration,
    running: Mutex<HashMap<String, usize>>,
    ended: Notify,
}

impl TenantShare {
    /// A share of `per_tenant` queries at once (at least 1) per tenant, waiting at most `wait`
    /// for a place.
    pub fn new(per_tenant: usize, wait: Duration) -> Self {
        Self {
            inner: Arc::new(Shared {
                per_tenant: per_tenant.max(1),
                wait,
                running: Mutex::new(HashMap::new()),
                ended: Notify::new(),
            }),
        }
    }

    /// The share of a pool of `connections`: half of them (at least one) per tenant.
    pub fn of_pool(connections: usize, wait: Duration) -> Self {
        Self::new(connections / 2, wait)
    }

    /// How many queries of one tenant run at once at most.
    pub fn per_tenant(&self) -> usize {
        self.inner.per_tenant
    }

    /// A place for one query of `tenant_id`, held until the [`SharePlace`] is dropped.
    ///
    /// # Errors
    ///
    /// [`QueryRefusal::Busy`] when the tenant's share stayed full for the whole wait.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped wait takes no place.
    pub async fn enter(&self, tenant_id: &str) -> Result<SharePlace, QueryRefusal> {
        let deadline = tokio::time::Instant::now() + self.inner.wait;
        loop {
            // Registered before the count is read, so an end between the two still wakes us.
            let ended = self.inner.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.try_enter(tenant_id) {
                return Ok(SharePlace {
                    share: self.inner.clone(),
                    tenant_id: tenant_id.to_owned(),
                });
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return Err(QueryRefusal::Busy(self.inner.per_tenant));
            }
        }
    }

    fn try_enter(&self, tenant_id: &str) -> bool {
        let mut running = self
            .inner
            .running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = running.entry(tenant_id.to_owned()).or_insert(0);
        if *count >= self.inner.per_tenant {
            return false;
        }
        *count += 1;
        true
    }
}

/// One query's place in its tenant's share; dropping it lets the next one in.
#[derive(Debug)]
#[must_use = "the place is given back when dropped"]
pub struct SharePlace {
    share: Arc<Shared>,
    tenant_id: String,
}

impl Drop for SharePlace {
    fn drop(&mut self) {
        let mut running = self
            .share
            .running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = running.get_mut(&self.tenant_id) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                running.remove(&self.tenant_id);
            }
        }
        drop(running);
        self.share.ended.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_tenant_past_its_share_waits_while_another_tenant_enters() {
        let share = TenantShare::new(2, Duration::from_millis(50));
        let first = share.enter("a").await.unwrap();
        let _second = share.enter("a").await.unwrap();
        assert_eq!(share.enter("a").await.unwrap_err(), QueryRefusal::Busy(2));
        let _other = share.enter("b").await.unwrap();
        drop(first);
        let _third = share.enter("a").await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_query_enters_when_one_of_its_tenant_ends() {
        let share = TenantShare::new(1, Duration::from_secs(60));
        let first = share.enter("a").await.unwrap();
        let waiting = tokio::spawn({
            let share = share.clone();
            async move { share.enter("a").await.map(drop) }
        });
        tokio::task::yield_now().await;
        drop(first);
        assert_eq!(waiting.await.unwrap(), Ok(()));
    }
}
