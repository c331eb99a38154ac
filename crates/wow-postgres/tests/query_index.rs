//! A declared query index (`ViewStore::declare_query_index`, from `Aggregate::QUERY_INDEX`)
//! is one PostgreSQL uses: an equality query over many documents is answered through the
//! view's GIN index (its `idx_scan` counts the query), with the same rows as without it; and
//! two processes declaring it at once both succeed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use wow_core::query::{DocumentQuery, Filter};
use wow_core::view::ViewStore;

const VIEW: &str = "snapshot:account";

#[tokio::test]
async fn an_equality_query_over_many_documents_is_answered_through_the_index() {
    let Some(test) = support::fresh().await else {
        return;
    };
    let (a, b) = (test.store.clone(), test.store.clone());
    let (first, second) = tokio::join!(a.declare_query_index(VIEW), b.declare_query_index(VIEW));
    first.expect("one declares");
    second.expect("the other declares too");
    test.store
        .declare_query_index(VIEW)
        .await
        .expect("again, at the next start");

    // Many documents, written as the materialized snapshots write them.
    let (client, connection) = tokio_postgres::connect(&support::url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let schema = test.store.schema().to_owned();
    client
        .batch_execute(&format!(
            "SET search_path = {schema};
             INSERT INTO view_row (view, tenant_id, aggregate_id, version, state, updated_at)
             SELECT '{VIEW}', 't1', 'a-' || n, 1,
                    jsonb_build_object('aggregateId', 'a-' || n, 'state', jsonb_build_object('name', 'n-' || n, 'balance', n % 100)),
                    0
             FROM generate_series(1, 20000) AS n;
             ANALYZE view_row;"
        ))
        .await
        .unwrap();
    let index = client
        .query_one(
            "SELECT indexrelname::text FROM pg_stat_user_indexes WHERE schemaname = $1 AND indexrelname LIKE 'view_row_query_%'",
            &[&schema],
        )
        .await
        .unwrap()
        .get::<_, String>(0);
    let scans = || async {
        client
            .query_one(
                "SELECT idx_scan FROM pg_stat_user_indexes WHERE schemaname = $1 AND indexrelname = $2",
                &[&schema, &index],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
    };
    let before = scans().await;

    let name = Filter::Eq(
        wow_core::query::FieldPath::parse("state.name").unwrap(),
        wow_core::query::Scalar::Text("n-12345".to_owned()),
    );
    let rows = test
        .store
        .query(VIEW, "t1", &DocumentQuery::new(name, 10))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].state["aggregateId"], json!("a-12345"));

    // The server counts the scan once the serving connection flushes its statistics (within
    // about ten seconds of going idle).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if scans().await > before {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the query did not use the index {index}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
