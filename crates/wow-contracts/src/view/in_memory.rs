//! The in-memory view store: the reference the durable ones follow.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::event::{InMemoryProcessedMessages, ProcessError, Processed};
use crate::view::{apply_update, ViewFilter, ViewStore, ViewStoreError, ViewUpdate};
use wow_model::query::{matches, order, DocumentQuery, Filter};
use wow_model::view::{ViewKey, ViewRow};

/// View rows in memory, beside their processed-message records under one lock, so an update
/// and its record happen together. Updates are serialised by the lock; the work reads one
/// row and prepares the next, so a failing or panicking work leaves the rows and the records
/// as they were, and an update costs the same in a large store as in a small one.
///
/// Nothing survives a restart: for tests and `memory://` services.
#[derive(Debug, Default)]
pub struct InMemoryViewStore {
    rows: InMemoryProcessedMessages<BTreeMap<ViewKey, ViewRow>>,
}

impl InMemoryViewStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl ViewStore for InMemoryViewStore {
    async fn update(
        &self,
        key: &ViewKey,
        message_id: &str,
        work: ViewUpdate,
    ) -> Result<Processed, ProcessError> {
        self.rows.process_once_staged(
            &key.view,
            message_id,
            |rows| {
                let current = rows.get(key).cloned();
                let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    apply_update(key, current, work)
                }))
                .map_err(|_| "the view's update panicked")??;
                Ok(next)
            },
            |rows, next| {
                if let Some(row) = next {
                    rows.insert(key.clone(), row);
                }
            },
        )
    }

    async fn load(&self, key: &ViewKey) -> Result<Option<ViewRow>, ViewStoreError> {
        Ok(self.rows.read(|rows| rows.get(key).cloned()))
    }

    async fn list(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &ViewFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        filter.check()?;
        Ok(self.rows.read(|rows| {
            rows.values()
                .filter(|row| row.key.view == view && row.key.tenant_id == tenant_id)
                .filter(|row| after.is_none_or(|after| row.key.aggregate_id.as_str() > after))
                .filter(|row| filter.matches(&row.state))
                .take(limit)
                .cloned()
                .collect()
        }))
    }

    async fn query(
        &self,
        view: &str,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        let mut found: Vec<ViewRow> = self.rows.read(|rows| {
            rows.values()
                .filter(|row| row.key.view == view && row.key.tenant_id == tenant_id)
                .filter(|row| matches(&query.filter, &row.state))
                .cloned()
                .collect()
        });
        // Rows come in aggregate id order; a stable sort keeps it among equal keys.
        found.sort_by(|a, b| order(&query.sort, &a.state, &b.state));
        let offset = usize::try_from(query.offset).unwrap_or(usize::MAX);
        let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
        Ok(found.into_iter().skip(offset).take(limit).collect())
    }

    async fn count(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, ViewStoreError> {
        Ok(self.rows.read(|rows| {
            rows.values()
                .filter(|row| row.key.view == view && row.key.tenant_id == tenant_id)
                .filter(|row| matches(filter, &row.state))
                .count() as u64
        }))
    }

    async fn scan(
        &self,
        view: &str,
        after: Option<&ViewKey>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        // Keys order by (view, tenant, aggregate id), so one view's rows come in scan order.
        Ok(self.rows.read(|rows| {
            rows.values()
                .filter(|row| row.key.view == view)
                .filter(|row| {
                    after.is_none_or(|after| {
                        (row.key.tenant_id.as_str(), row.key.aggregate_id.as_str())
                            > (after.tenant_id.as_str(), after.aggregate_id.as_str())
                    })
                })
                .take(limit)
                .cloned()
                .collect()
        }))
    }

    async fn clear(&self, view: &str) -> Result<(), ViewStoreError> {
        self.rows
            .forget(view, |rows| rows.retain(|key, _| key.view != view));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_is_send_and_sync() {
        fn shared<T: Send + Sync + 'static>() {}
        shared::<InMemoryViewStore>();
        shared::<std::sync::Arc<dyn ViewStore>>();
    }
}
