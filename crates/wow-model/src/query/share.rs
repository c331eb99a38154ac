//! The bounds a store runs queries within: a time budget per query, and a share of the
//! query connections per tenant, so that one tenant's queries cannot take every connection
//! from the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::error_code::ErrorCode;

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
    tenants: Mutex<HashMap<String, Counts>>,
    ended: Notify,
}

/// One tenant's queries: holding a place, and waiting for one.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    running: usize,
    waiting: usize,
}

impl Shared {
    fn tenants(&self) -> std::sync::MutexGuard<'_, HashMap<String, Counts>> {
        self.tenants
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Changes the counts of `tenant_id` by `change`, forgetting a tenant left with none.
    fn change(&self, tenant_id: &str, change: impl FnOnce(&mut Counts)) {
        let mut tenants = self.tenants();
        if let Some(counts) = tenants.get_mut(tenant_id) {
            change(counts);
            if counts.running == 0 && counts.waiting == 0 {
                tenants.remove(tenant_id);
            }
        }
    }
}

impl TenantShare {
    /// A share of `per_tenant` queries at once (at least 1) per tenant, waiting at most `wait`
    /// for a place.
    pub fn new(per_tenant: usize, wait: Duration) -> Self {
        Self {
            inner: Arc::new(Shared {
                per_tenant: per_tenant.max(1),
                wait,
                tenants: Mutex::new(HashMap::new()),
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

    /// How many queries of `tenant_id` hold a place now.
    pub fn running(&self, tenant_id: &str) -> usize {
        self.counts(tenant_id).running
    }

    /// How many queries of `tenant_id` wait for a place now.
    pub fn waiting(&self, tenant_id: &str) -> usize {
        self.counts(tenant_id).waiting
    }

    fn counts(&self, tenant_id: &str) -> Counts {
        self.inner
            .tenants()
            .get(tenant_id)
            .copied()
            .unwrap_or_default()
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
        let mut waiting: Option<WaitMark> = None;
        loop {
            // Registered before the count is read, so an end between the two still wakes us.
            let ended = self.inner.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.try_enter(tenant_id, waiting.is_none()) {
                return Ok(SharePlace {
                    share: self.inner.clone(),
                    tenant_id: tenant_id.to_owned(),
                });
            }
            waiting.get_or_insert_with(|| WaitMark {
                share: self.inner.clone(),
                tenant_id: tenant_id.to_owned(),
            });
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return Err(QueryRefusal::Busy(self.inner.per_tenant));
            }
        }
    }

    /// Takes a place when there is one; else, on a first try, counts the query as waiting.
    fn try_enter(&self, tenant_id: &str, first_try: bool) -> bool {
        let mut tenants = self.inner.tenants();
        let counts = tenants.entry(tenant_id.to_owned()).or_default();
        if counts.running >= self.inner.per_tenant {
            counts.waiting += usize::from(first_try);
            return false;
        }
        counts.running += 1;
        true
    }
}

/// A query counted as waiting for its tenant's share, until it enters or gives up.
#[derive(Debug)]
struct WaitMark {
    share: Arc<Shared>,
    tenant_id: String,
}

impl Drop for WaitMark {
    fn drop(&mut self) {
        self.share.change(&self.tenant_id, |counts| {
            counts.waiting = counts.waiting.saturating_sub(1);
        });
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
        self.share.change(&self.tenant_id, |counts| {
            counts.running = counts.running.saturating_sub(1);
        });
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
