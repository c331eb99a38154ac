//! The PostgreSQL store passes the whole conformance suite, each case in a schema of its own,
//! the race and duplicate-storm cases over separate pooled connections.
#![allow(clippy::expect_used)]

mod support;

mod event_store {
    wow_tck::event_store_tck!(optional: super::support::fresh);
}

mod deadline {
    wow_tck::deadline_store_tck!(optional: super::support::fresh);
}

mod lifecycle {
    wow_tck::lifecycle_tck!(optional: || async {
        super::support::fresh()
            .await
            .map(wow_tck::lifecycle::Store::of)
    });
}

mod snapshot_store {
    wow_tck::snapshot_store_tck!(optional: super::support::fresh);
}

mod view_store {
    wow_tck::view_store_tck!(optional: super::support::fresh);
}

mod generations {
    use std::sync::Arc;

    use wow_tck::generations::Stores;

    async fn stores() -> Option<Stores> {
        let test = super::support::fresh().await?;
        Some(Stores::of(Arc::new(test.store.clone())).keeping(test))
    }

    wow_tck::generations_tck!(optional: stores);
}

/// The query cases again, over a view with its query index (SPEC ES-2: the same answers
/// whether the equality tests are served by the GIN index or not).
mod view_store_with_query_index {
    use std::sync::Arc;

    use wow_core::view::ViewStore;

    async fn indexed() -> Option<Arc<super::support::TestStore>> {
        let test = super::support::fresh().await?;
        test.declare_query_index(wow_tck::query::DOCS)
            .await
            .expect("the query index");
        Some(test)
    }

    wow_tck::view_store_tck!(optional: indexed);
}

mod downstream {
    use std::sync::Arc;

    use wow_tck::downstream::Stores;

    use wow_core::event::ConsumerPositions;

    /// The stores in a fresh schema; a restart opens a new pool on the same schema.
    async fn stores() -> Option<Stores> {
        let test = super::support::fresh().await?;
        let reopen = test.clone();
        Some(
            Stores::of(Arc::new(test.store.clone()))
                .keeping(test)
                .reopening(Arc::new(move || {
                    let test = reopen.clone();
                    Box::pin(
                        async move { Arc::new(test.reopen().await) as Arc<dyn ConsumerPositions> },
                    )
                })),
        )
    }

    wow_tck::downstream_tck!(optional: stores);

    mod parking {
        wow_tck::parking_tck!(optional: super::stores);
    }
}

mod processed_message {
    use std::sync::Arc;

    use async_trait::async_trait;
    use wow_core::event::{ProcessError, Processed};
    use wow_tck::processed_message::Ledger;

    use super::support::{fresh, TestStore};

    /// A consumer's own table beside the processed-message records, in the same schema.
    #[derive(Debug)]
    struct PostgresLedger(Arc<TestStore>);

    #[async_trait]
    impl Ledger for PostgresLedger {
        async fn apply_once(
            &self,
            consumer: &str,
            message_id: &str,
            amount: i64,
            fail: bool,
        ) -> Result<Processed, ProcessError> {
            let owner = consumer.to_owned();
            self.0
                .store
                .process_once(consumer, message_id, move |transaction| {
                    Box::pin(async move {
                        transaction
                            .execute(
                                "INSERT INTO ledger (consumer, total) VALUES ($1, $2) ON CONFLICT (consumer) DO UPDATE SET total = ledger.total + EXCLUDED.total",
                                &[&owner, &amount],
                            )
                            .await?;
                        if fail {
                            return Err("the work failed after writing".into());
                        }
                        Ok(())
                    })
                })
                .await
        }

        async fn total(&self, consumer: &str) -> i64 {
            let client = self.0.store.pool().get().await.expect("a connection");
            client
                .query_one(
                    "SELECT COALESCE(SUM(total), 0)::BIGINT FROM ledger WHERE consumer = $1",
                    &[&consumer],
                )
                .await
                .expect("the ledger reads")
                .get(0)
        }
    }

    async fn ledger() -> Option<Arc<PostgresLedger>> {
        let store = fresh().await?;
        let client = store.store.pool().get().await.expect("a connection");
        client
            .batch_execute("CREATE TABLE ledger (consumer TEXT PRIMARY KEY, total BIGINT NOT NULL)")
            .await
            .expect("the ledger table is made");
        drop(client);
        Some(Arc::new(PostgresLedger(store)))
    }

    wow_tck::processed_message_tck!(optional: ledger);
}

mod rename {
    use std::sync::Arc;

    use wow_tck::rename::Store;

    async fn stores() -> Option<Store> {
        let test = super::support::fresh().await?;
        let stores = wow_core::Stores::of(test.store.clone());
        Some(Store::of(stores).keeping(Arc::new(test)))
    }

    wow_tck::rename_tck!(optional: stores);
}

/// Queries within their bounds: the server's `statement_timeout` on the query connections,
/// a tenant's share of them.
mod query_bounds {
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_query_past_its_budget_is_stopped_and_another_tenant_is_served() {
        let Some(test) = super::support::fresh_configured(|options| {
            options
                .query_connections(2)
                .query_timeout(Duration::from_secs(1))
        })
        .await
        else {
            return;
        };
        let share = test.store.query_share().clone();
        wow_tck::query_bounds::a_query_past_its_budget_is_stopped_and_another_tenant_is_served(
            Arc::new(test.store.clone()),
            share,
        )
        .await;
        drop(test);
    }
}
