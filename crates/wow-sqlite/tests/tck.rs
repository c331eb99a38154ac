//! The SQLite store passes the whole conformance suite, each case on a file of its own.

#![allow(clippy::expect_used)]

use std::sync::Arc;

use wow_sqlite::{SqliteOptions, SqliteStore};

async fn fresh() -> Arc<SqliteStore> {
    open(&fresh_path()).await
}

/// A file of its own per case, under cargo's scratch folder for tests (target/tmp).
fn fresh_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("wow-sqlite-tck")
        .join(format!("{}.db", uuid::Uuid::now_v7()))
}

async fn open(path: &std::path::Path) -> Arc<SqliteStore> {
    let store = SqliteStore::open(SqliteOptions::new(path))
        .await
        .expect("store opens");
    Arc::new(store)
}

mod event_store {
    use super::*;
    wow_tck::event_store_tck!(fresh);
}

mod snapshot_store {
    use super::*;
    wow_tck::snapshot_store_tck!(fresh);
}

mod view_store {
    use super::*;
    wow_tck::view_store_tck!(fresh);
}

mod generations {
    use super::*;
    use wow_tck::generations::Stores;

    async fn stores() -> Stores {
        Stores::of(fresh().await)
    }

    wow_tck::generations_tck!(stores);
}

mod deadline {
    use super::*;
    wow_tck::deadline_store_tck!(fresh);
}

mod lifecycle {
    use super::*;
    wow_tck::lifecycle_tck!(|| async { wow_tck::lifecycle::Store::of(fresh().await) });
}

mod downstream {
    use super::*;
    use wow_core::event::ConsumerPositions;
    use wow_tck::downstream::Stores;

    /// The stores on a fresh file; a restart opens the same file again.
    async fn stores() -> Stores {
        let path = fresh_path();
        let store = open(&path).await;
        Stores::of(store).reopening(Arc::new(move || {
            let path = path.clone();
            Box::pin(async move { open(&path).await as Arc<dyn ConsumerPositions> })
        }))
    }

    wow_tck::downstream_tck!(stores);

    mod parking {
        wow_tck::parking_tck!(super::stores);
    }
}

mod processed_message {
    use async_trait::async_trait;
    use wow_core::event::{ProcessError, Processed};
    use wow_tck::processed_message::Ledger;

    use super::*;

    /// A consumer's own table beside the processed-message records, in the same file.
    #[derive(Debug)]
    struct SqliteLedger(Arc<SqliteStore>);

    #[async_trait]
    impl Ledger for SqliteLedger {
        async fn apply_once(
            &self,
            consumer: &str,
            message_id: &str,
            amount: i64,
            fail: bool,
        ) -> Result<Processed, ProcessError> {
            let owner = consumer.to_owned();
            self.0
                .process_once(consumer, message_id, move |connection| {
                    connection.execute(
                        "INSERT INTO ledger (consumer, total) VALUES (?1, ?2) ON CONFLICT (consumer) DO UPDATE SET total = total + excluded.total",
                        rusqlite::params![owner, amount],
                    )?;
                    if fail {
                        return Err("the work failed after writing".into());
                    }
                    Ok(())
                })
                .await
        }

        async fn total(&self, consumer: &str) -> i64 {
            let owner = consumer.to_owned();
            self.0
                .read(move |connection| {
                    connection.query_row(
                        "SELECT COALESCE(SUM(total), 0) FROM ledger WHERE consumer = ?1",
                        [owner],
                        |row| row.get(0),
                    )
                })
                .await
                .expect("the ledger reads")
        }
    }

    async fn ledger() -> Arc<SqliteLedger> {
        let store = fresh().await;
        store
            .transact(|connection| {
                connection.execute_batch(
                    "CREATE TABLE ledger (consumer TEXT PRIMARY KEY, total INTEGER NOT NULL)",
                )?;
                Ok(())
            })
            .await
            .expect("the ledger table is made");
        Arc::new(SqliteLedger(store))
    }

    wow_tck::processed_message_tck!(ledger);
}

mod rename {
    use super::*;
    wow_tck::rename_tck!(|| async {
        wow_tck::rename::Store::of(wow_core::Stores::of(SqliteStore::clone(&*fresh().await)))
    });
}

/// Queries within their bounds: a time budget, a tenant's share of the query connections.
mod query_bounds {
    use std::sync::Arc;
    use std::time::Duration;

    use wow_sqlite::{SqliteOptions, SqliteStore};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_query_past_its_budget_is_stopped_and_another_tenant_is_served() {
        let options = SqliteOptions::new(super::fresh_path())
            .query_connections(2)
            .query_timeout(Duration::from_secs(1));
        let store = SqliteStore::open(options).await.unwrap();
        let share = store.query_share().clone();
        wow_tck::query_bounds::a_query_past_its_budget_is_stopped_and_another_tenant_is_served(
            Arc::new(store),
            share,
        )
        .await;
    }
}
