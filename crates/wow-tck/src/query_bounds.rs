//! The bounds a store runs queries within: a query past its time budget is stopped and
//! answered [`QueryRefusal::TimedOut`], and a tenant's queries take at most its share of the
//! query connections, so another tenant's query is answered while they run.
//!
//! A backend runs [`a_query_past_its_budget_is_stopped_and_another_tenant_is_served`] on a
//! store opened with two query connections (a share of one per tenant) and a time budget of
//! about a second, and hands over that store's [`TenantShare`].

use std::time::Duration;

use serde_json::{json, Value};
use wow_core::query::{Condition, DocumentQuery, Lowering, QueryRefusal, Target, TenantShare};
use wow_core::view::{ViewKey, ViewRow, ViewStoreError};

use crate::view_store::Store;

/// The view the cases write.
const BOUNDED: &str = "tck_bounded";
/// Rows of the busy tenant, and elements of each one's array.
const ROWS: usize = 300;
const ELEMENTS: i64 = 10_000;

async fn fill(store: &Store) {
    let elements: Vec<i64> = (0..ELEMENTS).collect();
    let row = |tenant: &str, id: String, state: Value| {
        let key = ViewKey::new(BOUNDED, tenant, id);
        (
            key.clone(),
            ViewRow {
                key,
                version: 1,
                state,
                updated_at: 1_700_000_000_000,
            },
        )
    };
    let mut rows: Vec<_> = (0..ROWS)
        .map(|i| row("tenant-a", format!("r{i:04}"), json!({"n": elements})))
        .collect();
    rows.push(row("tenant-b", "only".to_owned(), json!({"n": [1]})));
    let writes = rows.into_iter().enumerate().map(|(i, (key, row))| {
        let store = store.clone();
        async move {
            store
                .update(&key, &format!("m-{i}"), Box::new(move |_| Ok(Some(row))))
                .await
        }
    });
    for written in futures::future::join_all(writes).await {
        assert!(written.is_ok(), "{written:?}");
    }
}

/// A query that visits every element of every row many times over, and matches nothing:
/// seconds of work on any store, far past a budget of a second.
fn heavy() -> Condition {
    let children: Vec<Value> = (0..31)
        .map(|i| {
            json!({"field": "n", "operator": "ELEM_MATCH", "children": [
                {"field": "", "operator": "GT", "value": ELEMENTS + i}]})
        })
        .collect();
    serde_json::from_value(json!({"operator": "OR", "children": children}))
        .unwrap_or_else(|e| panic!("a condition: {e}"))
}

fn lowered(condition: &Condition) -> DocumentQuery {
    let filter = Lowering::new(Target::Snapshot, 0)
        .lower(condition)
        .unwrap_or_else(|e| panic!("lowers: {e}"));
    DocumentQuery::new(filter, 10)
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} by the deadline"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The busy tenant's heavy query is stopped at the budget (`TimedOut`); while it runs, a
/// second one of the same tenant waits for its share, and another tenant's query is
/// answered at once; afterwards the busy tenant is served again.
pub async fn a_query_past_its_budget_is_stopped_and_another_tenant_is_served(
    store: Store,
    share: TenantShare,
) {
    assert_eq!(
        share.per_tenant(),
        1,
        "the case runs with a share of one per tenant"
    );
    fill(&store).await;
    let heavy = lowered(&heavy());
    let first = tokio::spawn({
        let (store, heavy) = (store.clone(), heavy.clone());
        async move { store.count(BOUNDED, "tenant-a", &heavy.filter).await }
    });
    until("the first heavy query runs", || {
        share.running("tenant-a") == 1
    })
    .await;
    let second = tokio::spawn({
        let (store, heavy) = (store.clone(), heavy.clone());
        async move {
            store
                .query(BOUNDED, "tenant-a", &heavy)
                .await
                .map(|rows| rows.len() as u64)
        }
    });
    until(
        "the second heavy query waits for its tenant's share",
        || share.running("tenant-a") == 1 && share.waiting("tenant-a") == 1,
    )
    .await;
    let other = store
        .count(BOUNDED, "tenant-b", &lowered(&Condition::all()).filter)
        .await;
    assert_eq!(other.ok(), Some(1), "another tenant is answered");
    assert!(
        !first.is_finished(),
        "the other tenant was answered while the busy tenant's query still ran"
    );

    match first
        .await
        .unwrap_or_else(|e| panic!("the first query's task: {e}"))
    {
        Err(ViewStoreError::QueryRefused(QueryRefusal::TimedOut(_))) => {}
        other => panic!("the first heavy query is stopped at its budget, not {other:?}"),
    }
    match second
        .await
        .unwrap_or_else(|e| panic!("the second query's task: {e}"))
    {
        Err(ViewStoreError::QueryRefused(QueryRefusal::TimedOut(_) | QueryRefusal::Busy(_))) => {}
        other => panic!("the second heavy query is refused at a bound, not {other:?}"),
    }
    let served = store
        .count(BOUNDED, "tenant-a", &lowered(&Condition::all()).filter)
        .await;
    assert_eq!(
        served.ok(),
        Some(ROWS as u64),
        "the busy tenant is served again"
    );
}
