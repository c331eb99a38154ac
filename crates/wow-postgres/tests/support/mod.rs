//! A PostgreSQL store per test, in its own schema, dropped when the test's store is dropped.
#![allow(dead_code, unreachable_pub, clippy::expect_used)]

pub mod formation;
pub mod server;

use std::sync::Arc;

use wow_core::deadline::{DeadlineStore, DeadlineStoreDecorator};
use wow_core::eventsourcing::{
    EventStore, EventStoreDecorator, SnapshotStore, SnapshotStoreDecorator,
};
use wow_core::view::{ViewStore, ViewStoreDecorator};
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

/// Every method reaches `store` as it is.
impl EventStoreDecorator for TestStore {
    fn inner(&self) -> &dyn EventStore {
        &self.store
    }
}

/// Every method reaches `store` as it is.
impl DeadlineStoreDecorator for TestStore {
    fn inner(&self) -> &dyn DeadlineStore {
        &self.store
    }
}

/// Every method reaches `store` as it is.
impl SnapshotStoreDecorator for TestStore {
    fn inner(&self) -> &dyn SnapshotStore {
        &self.store
    }
}

/// Every method reaches `store` as it is.
impl ViewStoreDecorator for TestStore {
    fn inner(&self) -> &dyn ViewStore {
        &self.store
    }
}
