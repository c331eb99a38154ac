//! The ViewStore conformance suite (SPEC DS-2, TN-1): a view row and its processed-message
//! record commit together, once per message, per tenant; lists filter, order and page alike
//! in every store.
//!
//! Each case takes a fresh, empty store. Run them all with
//! [`view_store_tck!`](crate::view_store_tck).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use wow_core::event::{ProcessError, Processed};
use wow_core::id;
use wow_core::view::{ViewFilter, ViewKey, ViewRow, ViewStore, ViewStoreError, ViewUpdate};

/// The store under test.
pub type Store = Arc<dyn ViewStore>;

/// The view every case writes unless it says otherwise.
pub const VIEW: &str = "tck_view";

fn key(view: &str, tenant: &str, aggregate_id: &str) -> ViewKey {
    ViewKey::new(view, tenant, aggregate_id)
}

/// A fresh key of [`VIEW`] in `tenant-a`.
fn fresh_key() -> ViewKey {
    key(VIEW, "tenant-a", &id::new_id())
}

/// An update that stores `state` at `version` whatever was there.
fn put(key: &ViewKey, version: u64, state: Value) -> ViewUpdate {
    let row = ViewRow {
        key: key.clone(),
        version,
        state,
        updated_at: 1_700_000_000_000 + i64::try_from(version).unwrap_or(0),
    };
    Box::new(move |_| Ok(Some(row)))
}

/// An update that adds 1 to the row's `n` and its version (both 0 before the first).
fn increment(key: &ViewKey) -> ViewUpdate {
    let key = key.clone();
    Box::new(move |current| {
        let (n, version) = current.map_or((0, 0), |row| {
            (row.state["n"].as_i64().unwrap_or(0), row.version)
        });
        Ok(Some(ViewRow {
            key,
            version: version + 1,
            state: json!({ "n": n + 1 }),
            updated_at: 0,
        }))
    })
}

/// Asserts that message `m-1` (an [`increment`]) of `key` is applied, as no record of it
/// stands, for the reason `why`.
async fn runs_m1_again(store: &Store, key: &ViewKey, why: &str) {
    assert_eq!(
        store.update(key, "m-1", increment(key)).await.unwrap(),
        Processed::Applied,
        "{why}"
    );
}

async fn count(store: &Store, key: &ViewKey) -> i64 {
    store
        .load(key)
        .await
        .unwrap()
        .map_or(0, |row| row.state["n"].as_i64().unwrap_or(0))
}

/// An updated row loads back equal, every field; a row of another key is refused and leaves
/// nothing; an unknown key has no row.
pub async fn updates_and_loads_a_row(store: Store) {
    let order = fresh_key();
    assert!(store.load(&order).await.unwrap().is_none());
    let state = json!({"name": "Alice", "balance": 30, "tags": ["a", "b"], "nested": {"x": 1.5}});
    assert_eq!(
        store
            .update(&order, "m-1", put(&order, 7, state.clone()))
            .await
            .unwrap(),
        Processed::Applied
    );
    let row = store
        .load(&order)
        .await
        .unwrap()
        .expect("the row is stored");
    assert_eq!(
        row,
        ViewRow {
            key: order.clone(),
            version: 7,
            state,
            updated_at: 1_700_000_000_007,
        }
    );
    // The work sees the stored row; `None` leaves it as it is (and records the message).
    let seen = Arc::new(std::sync::Mutex::new(None));
    let slot = seen.clone();
    let keep: ViewUpdate = Box::new(move |current| {
        *slot.lock().unwrap() = current;
        Ok(None)
    });
    assert_eq!(
        store.update(&order, "m-2", keep).await.unwrap(),
        Processed::Applied
    );
    assert_eq!(seen.lock().unwrap().as_ref(), Some(&row));
    assert_eq!(store.load(&order).await.unwrap(), Some(row.clone()));

    let other = fresh_key();
    assert!(matches!(
        store.update(&order, "m-3", put(&other, 1, json!({}))).await,
        Err(ProcessError::Work(_))
    ));
    assert_eq!(store.load(&order).await.unwrap(), Some(row));
    assert!(store.load(&other).await.unwrap().is_none());
}

/// `put_newer` writes a row only past the stored version: an older or equal one (a
/// redelivery) leaves the stored row and answers `false`; a newer one replaces it; rows of
/// other tenants are their own.
pub async fn puts_only_newer_rows(store: Store) {
    let order = fresh_key();
    let row = |version: u64, balance: i64| ViewRow {
        key: order.clone(),
        version,
        state: json!({"balance": balance}),
        updated_at: 1_700_000_000_000 + i64::try_from(version).unwrap_or(0),
    };
    assert!(store.put_newer(row(2, 20)).await.unwrap(), "a first row");
    assert_eq!(store.load(&order).await.unwrap(), Some(row(2, 20)));
    assert!(
        !store.put_newer(row(2, 99)).await.unwrap(),
        "the same version"
    );
    assert!(!store.put_newer(row(1, 10)).await.unwrap(), "an older one");
    assert_eq!(store.load(&order).await.unwrap(), Some(row(2, 20)));
    assert!(store.put_newer(row(5, 50)).await.unwrap(), "a newer one");
    assert_eq!(store.load(&order).await.unwrap(), Some(row(5, 50)));
    let elsewhere = key(VIEW, "tenant-b", &order.aggregate_id);
    assert!(store
        .put_newer(ViewRow {
            key: elsewhere.clone(),
            version: 1,
            state: json!({"balance": 1}),
            updated_at: 0,
        })
        .await
        .unwrap());
    assert_eq!(store.load(&order).await.unwrap(), Some(row(5, 50)));
    assert_eq!(
        store.load(&elsewhere).await.unwrap().map(|r| r.version),
        Some(1)
    );
}

/// A redelivered message leaves one effect: its work does not run again. Another view's
/// record of the same message id is its own.
pub async fn applies_a_message_once(store: Store) {
    let order = fresh_key();
    let runs = Arc::new(AtomicUsize::new(0));
    for expected in [Processed::Applied, Processed::AlreadyProcessed] {
        let (runs, inner) = (runs.clone(), increment(&order));
        let work: ViewUpdate = Box::new(move |current| {
            runs.fetch_add(1, Ordering::SeqCst);
            inner(current)
        });
        assert_eq!(store.update(&order, "m-1", work).await.unwrap(), expected);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the work ran once");
    assert_eq!(count(&store, &order).await, 1);

    let twin = key("tck_other_view", &order.tenant_id, &order.aggregate_id);
    assert_eq!(
        store.update(&twin, "m-1", increment(&twin)).await.unwrap(),
        Processed::Applied,
        "another view's records are its own"
    );
    assert_eq!(count(&store, &twin).await, 1);
    assert_eq!(count(&store, &order).await, 1);
}

/// 16 concurrent updates of distinct message ids on one key that has no row yet, each
/// delivered twice at once, apply exactly once each: the store serialises updates of a key,
/// so none is lost and none doubled.
pub async fn concurrent_updates_of_one_key_apply_once_each(store: Store) {
    for _ in 0..3 {
        let order = fresh_key();
        let tasks: Vec<_> = (0..32)
            .map(|i| {
                let (store, order) = (store.clone(), order.clone());
                let message_id = format!("{}-m-{}", order.aggregate_id, i % 16);
                tokio::spawn(
                    async move { store.update(&order, &message_id, increment(&order)).await },
                )
            })
            .collect();
        let mut applied = 0;
        for task in tasks {
            if task.await.expect("task runs").expect("update succeeds") == Processed::Applied {
                applied += 1;
            }
        }
        assert_eq!(applied, 16, "each message applied once");
        assert_eq!(count(&store, &order).await, 16);
        assert_eq!(store.load(&order).await.unwrap().unwrap().version, 16);
    }
}

/// A failing or panicking work writes neither the row nor the record, so the next delivery
/// of the message applies it.
pub async fn a_failed_update_writes_nothing(store: Store) {
    let order = fresh_key();
    store
        .update(&order, "m-0", put(&order, 1, json!({"n": 1})))
        .await
        .unwrap();
    let before = store.load(&order).await.unwrap();
    let fails: ViewUpdate = Box::new(|_| Err("the fold failed".into()));
    assert!(matches!(
        store.update(&order, "m-1", fails).await,
        Err(ProcessError::Work(_))
    ));
    let panics: ViewUpdate = Box::new(|_| panic!("the fold panicked"));
    assert!(matches!(
        store.update(&order, "m-1", panics).await,
        Err(ProcessError::Work(_))
    ));
    assert_eq!(store.load(&order).await.unwrap(), before, "nothing written");
    runs_m1_again(
        &store,
        &order,
        "no record was written: the message runs again",
    )
    .await;
    assert_eq!(count(&store, &order).await, 2);
}

/// Two tenants' aggregates with one id have a row each (SPEC TN-1): an update, a load and a
/// list of one never see the other's.
pub async fn tenants_have_their_own_rows(store: Store) {
    let a = fresh_key();
    let b = key(VIEW, "tenant-b", &a.aggregate_id);
    store
        .update(&a, "m-1", put(&a, 1, json!({"owner": "a"})))
        .await
        .unwrap();
    assert!(store.load(&b).await.unwrap().is_none());
    assert_eq!(
        store
            .update(&b, "m-2", put(&b, 4, json!({"owner": "b"})))
            .await
            .unwrap(),
        Processed::Applied
    );
    assert_eq!(store.load(&a).await.unwrap().unwrap().state["owner"], "a");
    assert_eq!(store.load(&b).await.unwrap().unwrap().version, 4);
    for (tenant, owner) in [("tenant-a", "a"), ("tenant-b", "b")] {
        let rows = store
            .list(VIEW, tenant, &ViewFilter::new(), None, 10)
            .await
            .unwrap();
        assert_eq!(rows.len(), 1, "{tenant} lists its own row only");
        assert_eq!(rows[0].state["owner"], owner);
    }
}

fn ids(rows: &[ViewRow]) -> Vec<&str> {
    rows.iter()
        .map(|row| row.key.aggregate_id.as_str())
        .collect()
}

/// A scan lists one view's rows of every tenant in (tenant, aggregate id) order by bytes, in
/// pages that resume after the last key; another view's rows never appear.
pub async fn scans_every_tenant_in_key_order_and_pages(store: Store) {
    let written = [
        ("tenant-b", "a"),
        ("tenant-a", "z"),
        ("tenant-a", "B"),
        ("tenant-c", "m"),
        ("tenant-a", "b"),
        ("tenant-b", "0"),
    ];
    for (n, (tenant, id)) in written.iter().enumerate() {
        let row = key(VIEW, tenant, id);
        store
            .update(&row, &format!("m-{n}"), put(&row, 1, json!({"n": n})))
            .await
            .unwrap();
    }
    let other = key("tck_other_view", "tenant-a", "a");
    store
        .update(&other, "m-other", put(&other, 1, json!({})))
        .await
        .unwrap();
    let expected = [
        ("tenant-a", "B"),
        ("tenant-a", "b"),
        ("tenant-a", "z"),
        ("tenant-b", "0"),
        ("tenant-b", "a"),
        ("tenant-c", "m"),
    ];
    let all = store.scan(VIEW, None, 100).await.unwrap();
    let keys: Vec<(&str, &str)> = all
        .iter()
        .map(|row| (row.key.tenant_id.as_str(), row.key.aggregate_id.as_str()))
        .collect();
    assert_eq!(keys, expected);
    assert!(all.iter().all(|row| row.key.view == VIEW));
    let mut paged = Vec::new();
    let mut after: Option<ViewKey> = None;
    loop {
        let page = store.scan(VIEW, after.as_ref(), 4).await.unwrap();
        assert!(page.len() <= 4);
        let Some(last) = page.last() else { break };
        after = Some(last.key.clone());
        paged.extend(page);
    }
    assert_eq!(
        paged, all,
        "pages resume after the last key, nothing skipped or repeated"
    );
    assert!(store
        .scan("tck_no_such_view", None, 10)
        .await
        .unwrap()
        .is_empty());
}

/// Lists match every condition of the filter with the same semantics in every store, in
/// aggregate id order by bytes, in pages; another view's rows never appear; a field name
/// that is not an identifier is refused.
pub async fn lists_by_filter_in_id_order_and_pages(store: Store) {
    seed_filter_rows(&store).await;
    lists_in_id_order_by_page(&store).await;
    lists_by_equality(&store).await;
    lists_by_range_and_combined_conditions(&store).await;
    refuses_field_names_that_are_not_identifiers(&store).await;
}

/// With field indexes declared (SPEC DM-4) on every field the filters test, twice over (a
/// declaration is idempotent), lists answer exactly what they answer without them; a field
/// name that is not an identifier is refused.
pub async fn lists_through_field_indexes_as_without_them(store: Store) {
    for field in ["name", "balance", "vip"] {
        store
            .declare_field_index(VIEW, field)
            .await
            .expect("declared");
        store
            .declare_field_index(VIEW, field)
            .await
            .expect("declared again");
    }
    let refused = store.declare_field_index(VIEW, "na'me").await;
    assert!(
        matches!(refused, Err(ViewStoreError::IllegalArgument(_))),
        "{refused:?}"
    );
    seed_filter_rows(&store).await;
    lists_in_id_order_by_page(&store).await;
    lists_by_equality(&store).await;
    lists_by_range_and_combined_conditions(&store).await;
}

/// Six rows of [`VIEW`] in `tenant-a`, of mixed field types, and one row of another view
/// that every filter would match.
async fn seed_filter_rows(store: &Store) {
    let rows = [
        (
            "a-03",
            json!({"name": "Alice", "balance": 30, "vip": true, "score": 1.0}),
        ),
        ("a-01", json!({"name": "Bob", "balance": 10, "vip": false})),
        (
            "a-05",
            json!({"name": "Alice", "balance": 50, "vip": false}),
        ),
        (
            "a-02",
            json!({"name": "Carol", "balance": 20, "vip": true, "score": 2}),
        ),
        (
            "a-04",
            json!({"name": "Dave", "balance": "40", "vip": "yes"}),
        ),
        ("B-01", json!({"name": "Eve", "balance": -5})),
    ];
    for (i, (id, state)) in rows.iter().enumerate() {
        let key = key(VIEW, "tenant-a", id);
        store
            .update(&key, &format!("m-{i}"), put(&key, 1, state.clone()))
            .await
            .unwrap();
    }
    let elsewhere = key("tck_other_view", "tenant-a", "a-00");
    store
        .update(
            &elsewhere,
            "m-x",
            put(&elsewhere, 1, json!({"name": "Alice"})),
        )
        .await
        .unwrap();
}

/// The ids of one page of [`VIEW`] in `tenant-a` under `filter`.
async fn list_ids(
    store: &Store,
    filter: ViewFilter,
    after: Option<&str>,
    limit: usize,
) -> Vec<String> {
    let rows = store
        .list(VIEW, "tenant-a", &filter, after, limit)
        .await
        .unwrap();
    ids(&rows).into_iter().map(str::to_owned).collect()
}

/// Order by bytes ("B" < "a"), paged by the last id.
async fn lists_in_id_order_by_page(store: &Store) {
    let all = ViewFilter::new;
    assert_eq!(
        list_ids(store, all(), None, 3).await,
        ["B-01", "a-01", "a-02"]
    );
    assert_eq!(
        list_ids(store, all(), Some("a-02"), 3).await,
        ["a-03", "a-04", "a-05"]
    );
    assert!(list_ids(store, all(), Some("a-05"), 3).await.is_empty());
    assert!(list_ids(store, all(), None, 0).await.is_empty());
}

/// Equality on text, booleans and numbers; a value of another type matches nothing.
async fn lists_by_equality(store: &Store) {
    let all = ViewFilter::new;
    assert_eq!(
        list_ids(store, all().equals("name", "Alice"), None, 10).await,
        ["a-03", "a-05"]
    );
    assert_eq!(
        list_ids(store, all().equals("vip", true), None, 10).await,
        ["a-02", "a-03"]
    );
    assert_eq!(
        list_ids(store, all().equals("balance", 20), None, 10).await,
        ["a-02"]
    );
    assert_eq!(
        list_ids(store, all().equals("score", 1), None, 10).await,
        ["a-03"]
    );
    assert!(list_ids(store, all().equals("balance", "20"), None, 10)
        .await
        .is_empty());
    assert!(list_ids(store, all().equals("missing", 1), None, 10)
        .await
        .is_empty());
}

/// Ranges hold for numbers only ("40" is a string); conditions combine, and pages still
/// follow the id.
async fn lists_by_range_and_combined_conditions(store: &Store) {
    let all = ViewFilter::new;
    let between = all().at_least("balance", 20).at_most("balance", 50);
    assert_eq!(
        list_ids(store, between, None, 10).await,
        ["a-02", "a-03", "a-05"]
    );
    assert_eq!(
        list_ids(store, all().at_most("balance", 0), None, 10).await,
        ["B-01"]
    );
    let alice_in_credit = all().equals("name", "Alice").at_least("balance", 0);
    assert_eq!(
        list_ids(store, alice_in_credit, Some("a-03"), 10).await,
        ["a-05"]
    );
}

/// Field names are identifiers; anything else is refused, never run.
async fn refuses_field_names_that_are_not_identifiers(store: &Store) {
    for bad in ["name') OR 1=1 --", "a.b", "", "1x"] {
        let filter = ViewFilter::new().equals(bad, 1);
        assert!(
            matches!(
                store.list(VIEW, "tenant-a", &filter, None, 10).await,
                Err(ViewStoreError::IllegalArgument(_))
            ),
            "`{bad}` must be refused"
        );
    }
}

/// Clearing a view drops its rows and its processed-message records, so replaying its
/// messages applies them again; another view keeps both.
pub async fn clear_drops_one_views_rows_and_records(store: Store) {
    let order = fresh_key();
    let twin = key("tck_other_view", &order.tenant_id, &order.aggregate_id);
    for key in [&order, &twin] {
        store.update(key, "m-1", increment(key)).await.unwrap();
    }
    store.clear(VIEW).await.unwrap();
    assert!(store.load(&order).await.unwrap().is_none());
    assert!(store
        .list(VIEW, &order.tenant_id, &ViewFilter::new(), None, 10)
        .await
        .unwrap()
        .is_empty());
    runs_m1_again(&store, &order, "the record went with the row").await;
    assert_eq!(count(&store, &order).await, 1);
    assert_eq!(count(&store, &twin).await, 1);
    assert_eq!(
        store.update(&twin, "m-1", increment(&twin)).await.unwrap(),
        Processed::AlreadyProcessed,
        "another view keeps its records"
    );
}

pub use crate::query::{
    query_comparisons, query_dates, query_logic_and_shorthands, query_long_and_mixed_lists,
    query_sorts_and_pages, query_text_arrays_and_presence,
};
