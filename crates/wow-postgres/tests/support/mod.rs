//! A PostgreSQL store per test, in its own schema, dropped when the test's store is dropped.
#![allow(dead_code, unreachable_pub, clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use wow_core::event::{ProcessError, Processed};
use wow_core::eventsourcing::{
    EventStore, EventStoreError, RejectionRecord, RequestDecision, Snapshot, SnapshotStore,
    SnapshotStoreError,
};
use wow_core::view::{ViewFilter, ViewKey, ViewRow, ViewStore, ViewStoreError, ViewUpdate};
use wow_core::{AggregateId, DomainEventStream, NamedAggregate};
use wow_postgres::{PostgresOptions, PostgresStore};

/// The server the tests use: `WOW_TEST_POSTGRES_URL`, or the local one.
pub fn url() -> String {
    std::env::var("WOW_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Drops its schema when dropped, from a thread of its own (the test's runtime may be gone).
#[derive(Debug)]
pub struct SchemaGuard(String);

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let schema = self.0.clone();
        let url = url();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .ok()?;
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await
                    .ok()
            })
        });
        let _ = dropped.join();
    }
}

/// A store in a fresh schema; the schema goes when the store does.
#[derive(Debug)]
pub struct TestStore {
    pub store: PostgresStore,
    _guard: SchemaGuard,
}

impl TestStore {
    /// A new store, with a pool of its own, on this store's schema: what a restarted process
    /// opens.
    pub async fn reopen(&self) -> PostgresStore {
        let options = url()
            .parse::<PostgresOptions>()
            .expect("a postgres:// URL")
            .schema(&self._guard.0)
            .max_connections(4);
        PostgresStore::open(options)
            .await
            .expect("the same schema opens again")
    }
}

/// A store in a new schema, or `None` (said on stderr) when PostgreSQL is not reachable and
/// not required.
pub async fn fresh() -> Option<Arc<TestStore>> {
    fresh_with(16).await
}

/// [`fresh`] with a pool of `connections`.
pub async fn fresh_with(connections: usize) -> Option<Arc<TestStore>> {
    fresh_configured(|options| options.max_connections(connections)).await
}

/// [`fresh`] with the options `configure` makes of the defaults.
pub async fn fresh_configured(
    configure: impl FnOnce(PostgresOptions) -> PostgresOptions,
) -> Option<Arc<TestStore>> {
    let schema = format!("wow_test_{}", uuid::Uuid::now_v7().simple());
    let options = configure(
        url()
            .parse::<PostgresOptions>()
            .expect("a postgres:// URL")
            .schema(&schema),
    );
    match PostgresStore::open(options).await {
        Ok(store) => Some(Arc::new(TestStore {
            store,
            _guard: SchemaGuard(schema),
        })),
        Err(error) => {
            // One line per skipped test, past the test harness's capture (or a failure when
            // the run requires PostgreSQL).
            wow_tck::skip::unavailable(
                wow_tck::skip::Requirement::Backends,
                &format!(
                    "no PostgreSQL at {} ({error}); start it or point WOW_TEST_POSTGRES_URL at one",
                    url()
                ),
            );
            None
        }
    }
}

#[async_trait]
impl EventStore for TestStore {
    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        self.store.append(stream).await
    }
    async fn load(
        &self,
        id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        EventStore::load(&self.store, id, head, tail).await
    }
    async fn load_by_time(
        &self,
        id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.store.load_by_time(id, start, end).await
    }
    async fn last(&self, id: &AggregateId) -> Result<Option<DomainEventStream>, EventStoreError> {
        self.store.last(id).await
    }
    async fn find_decision(
        &self,
        id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        self.store.find_decision(id, request_id).await
    }
    async fn record_rejection(
        &self,
        id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError> {
        self.store.record_rejection(id, request_id, rejection).await
    }
    async fn scan_aggregate_ids(
        &self,
        named: &NamedAggregate,
        after: Option<&AggregateId>,
        limit: usize,
    ) -> Result<Vec<AggregateId>, EventStoreError> {
        self.store.scan_aggregate_ids(named, after, limit).await
    }

    async fn read_feed(
        &self,
        after: wow_core::eventsourcing::GlobalPosition,
        limit: usize,
    ) -> Result<Vec<wow_core::eventsourcing::FeedEntry>, wow_core::eventsourcing::EventStoreError>
    {
        self.store.read_feed(after, limit).await
    }

    async fn query_streams(
        &self,
        named: &wow_core::NamedAggregate,
        tenant_id: &str,
        query: &wow_core::query::DocumentQuery,
    ) -> Result<Vec<wow_core::DomainEventStream>, wow_core::eventsourcing::EventStoreError> {
        self.store.query_streams(named, tenant_id, query).await
    }

    async fn count_streams(
        &self,
        named: &wow_core::NamedAggregate,
        tenant_id: &str,
        filter: &wow_core::query::Filter,
    ) -> Result<u64, wow_core::eventsourcing::EventStoreError> {
        self.store.count_streams(named, tenant_id, filter).await
    }
}

#[async_trait]
impl SnapshotStore for TestStore {
    async fn load(&self, id: &AggregateId) -> Result<Option<Snapshot>, SnapshotStoreError> {
        SnapshotStore::load(&self.store, id).await
    }
    async fn version(&self, id: &AggregateId) -> Result<Option<u64>, SnapshotStoreError> {
        self.store.version(id).await
    }
    async fn save(&self, snapshot: &Snapshot) -> Result<bool, SnapshotStoreError> {
        self.store.save(snapshot).await
    }
}

#[async_trait]
impl ViewStore for TestStore {
    async fn update(
        &self,
        key: &ViewKey,
        message_id: &str,
        work: ViewUpdate,
    ) -> Result<Processed, ProcessError> {
        self.store.update(key, message_id, work).await
    }
    async fn load(&self, key: &ViewKey) -> Result<Option<ViewRow>, ViewStoreError> {
        ViewStore::load(&self.store, key).await
    }
    async fn list(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &ViewFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        self.store.list(view, tenant_id, filter, after, limit).await
    }
    async fn query(
        &self,
        view: &str,
        tenant_id: &str,
        query: &wow_core::query::DocumentQuery,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        ViewStore::query(&self.store, view, tenant_id, query).await
    }
    async fn count(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &wow_core::query::Filter,
    ) -> Result<u64, ViewStoreError> {
        ViewStore::count(&self.store, view, tenant_id, filter).await
    }
    async fn scan(
        &self,
        view: &str,
        after: Option<&ViewKey>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        self.store.scan(view, after, limit).await
    }
    async fn clear(&self, view: &str) -> Result<(), ViewStoreError> {
        self.store.clear(view).await
    }

    async fn declare_query_index(&self, view: &str) -> Result<(), ViewStoreError> {
        self.store.declare_query_index(view).await
    }
}
