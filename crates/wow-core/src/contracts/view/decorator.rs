//! The forwarding base of view store decorators, made as the event store's is (its module
//! doc, [`EventStoreDecorator`](crate::eventsourcing::EventStoreDecorator), says why): a
//! wrapper states the methods whose behaviour it changes, and every other one reaches the
//! view store it wraps, the query methods and
//! [`declare_query_index`](ViewStore::declare_query_index) included.

use async_trait::async_trait;

use crate::contracts::event::{ProcessError, Processed};
use crate::contracts::view::{ViewFilter, ViewStore, ViewStoreError, ViewUpdate};
use crate::model::query::{DocumentQuery, Filter};
use crate::model::view::{ViewKey, ViewRow};

/// A wrapper that adds one concern to the [`ViewStore`] it wraps: every type that implements
/// it is a [`ViewStore`] whose methods are these, each forwarding to [`inner`](Self::inner)
/// unless the wrapper states it. Each method's contract is that of the [`ViewStore`] method of
/// its name.
#[async_trait]
pub trait ViewStoreDecorator: Send + Sync + std::fmt::Debug {
    /// The store this wrapper adds its concern to: every method it does not state is this
    /// store's.
    fn inner(&self) -> &dyn ViewStore;

    /// [`ViewStore::update`]; by default the inner store's.
    async fn update(
        &self,
        key: &ViewKey,
        message_id: &str,
        work: ViewUpdate,
    ) -> Result<Processed, ProcessError> {
        self.inner().update(key, message_id, work).await
    }

    /// [`ViewStore::load`]; by default the inner store's.
    async fn load(&self, key: &ViewKey) -> Result<Option<ViewRow>, ViewStoreError> {
        self.inner().load(key).await
    }

    /// [`ViewStore::list`]; by default the inner store's.
    async fn list(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &ViewFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        self.inner()
            .list(view, tenant_id, filter, after, limit)
            .await
    }

    /// [`ViewStore::query`]; by default the inner store's.
    async fn query(
        &self,
        view: &str,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        self.inner().query(view, tenant_id, query).await
    }

    /// [`ViewStore::count`]; by default the inner store's.
    async fn count(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, ViewStoreError> {
        self.inner().count(view, tenant_id, filter).await
    }

    /// [`ViewStore::scan`]; by default the inner store's.
    async fn scan(
        &self,
        view: &str,
        after: Option<&ViewKey>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        self.inner().scan(view, after, limit).await
    }

    /// [`ViewStore::clear`]; by default the inner store's.
    async fn clear(&self, view: &str) -> Result<(), ViewStoreError> {
        self.inner().clear(view).await
    }

    /// [`ViewStore::declare_query_index`]; by default the inner store's.
    async fn declare_query_index(&self, view: &str) -> Result<(), ViewStoreError> {
        self.inner().declare_query_index(view).await
    }
}

/// Every view decorator is a view store: each method is the decorator's own.
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<T: ViewStoreDecorator> ViewStore for T {
    async fn update(
        &self,
        key: &ViewKey,
        message_id: &str,
        work: ViewUpdate,
    ) -> Result<Processed, ProcessError> {
        ViewStoreDecorator::update(self, key, message_id, work).await
    }

    async fn load(&self, key: &ViewKey) -> Result<Option<ViewRow>, ViewStoreError> {
        ViewStoreDecorator::load(self, key).await
    }

    async fn list(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &ViewFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        ViewStoreDecorator::list(self, view, tenant_id, filter, after, limit).await
    }

    async fn query(
        &self,
        view: &str,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        ViewStoreDecorator::query(self, view, tenant_id, query).await
    }

    async fn count(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, ViewStoreError> {
        ViewStoreDecorator::count(self, view, tenant_id, filter).await
    }

    async fn scan(
        &self,
        view: &str,
        after: Option<&ViewKey>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        ViewStoreDecorator::scan(self, view, after, limit).await
    }

    async fn clear(&self, view: &str) -> Result<(), ViewStoreError> {
        ViewStoreDecorator::clear(self, view).await
    }

    async fn declare_query_index(&self, view: &str) -> Result<(), ViewStoreError> {
        ViewStoreDecorator::declare_query_index(self, view).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::view::{RecordingViewStore, ViewStoreMethod};

    /// States nothing but its inner store.
    #[derive(Debug, Default)]
    struct Plain(RecordingViewStore);

    impl ViewStoreDecorator for Plain {
        fn inner(&self) -> &dyn ViewStore {
            &self.0
        }
    }

    #[tokio::test]
    async fn every_view_store_method_of_a_decorator_that_states_none_reaches_the_inner_store() {
        let plain = Plain::default();
        assert_eq!(
            plain.0.trace(&plain).await,
            ViewStoreMethod::forwarded_trace()
        );
    }
}
