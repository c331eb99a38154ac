//! The query conformance suite: Wow's query DSL over view rows (and so over materialized
//! snapshots), every operator, sort and page, with the same answers in every store. Part of
//! [`view_store_tck!`](crate::view_store_tck).

use serde_json::{json, Value};
use wow_core::query::{
    Condition, Direction, DocumentQuery, FieldPath, Lowering, QueryError, SortKey, Target,
    MAX_CONDITIONS, MAX_DEPTH, MAX_VALUES, MAX_VALUES_IN_ALL,
};
use wow_core::view::{ViewKey, ViewRow};

use crate::view_store::Store;

/// The view the suite's documents are rows of.
/// The view the query cases write their documents to (a backend may index it first).
pub const DOCS: &str = "tck_query";
/// Thursday 2024-06-06 12:00:00 UTC, in milliseconds.
const NOW: i64 = 1_717_675_200_000;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

/// Materialized-snapshot-like documents in `tenant-a`, and one in `tenant-b` that no query
/// of `tenant-a` may see.
fn documents() -> Vec<(&'static str, &'static str, Value)> {
    let doc = |id: &str, deleted: bool, opened: i64, state: Value| {
        json!({"aggregateId": id, "tenantId": "tenant-a", "ownerId": format!("owner-{id}"),
               "spaceId": "", "deleted": deleted, "opened": opened, "state": state})
    };
    vec![
        (
            "tenant-a",
            "a1",
            doc(
                "a1",
                false,
                NOW - 4 * HOUR,
                json!({
            "name": "Ann", "balance": 100, "rate": 1.5, "frozen": false,
            "tags": ["vip", "eu"], "items": [{"sku": "x", "qty": 2}, {"sku": "y", "qty": 5}],
            "note": null, "owner": {"city": "Paris"}}),
            ),
        ),
        (
            "tenant-a",
            "a2",
            doc(
                "a2",
                false,
                NOW - 16 * HOUR,
                json!({
            "name": "bob", "balance": 5, "frozen": true, "tags": ["eu"],
            "items": [{"sku": "x", "qty": 1}], "owner": {"city": "Berlin"}}),
            ),
        ),
        (
            "tenant-a",
            "a3",
            doc(
                "a3",
                true,
                NOW - 10 * DAY,
                json!({
            "name": "Cleo", "balance": 0, "rate": 2, "frozen": false, "tags": [], "items": []}),
            ),
        ),
        (
            "tenant-a",
            "a4",
            doc(
                "a4",
                false,
                NOW + 6 * DAY,
                json!({
            "name": "dan", "balance": "100", "frozen": "no"}),
            ),
        ),
        (
            "tenant-a",
            "a5",
            doc(
                "a5",
                false,
                NOW + 22 * HOUR,
                json!({
            "name": "Eva-Lu", "balance": 100.0, "note": "hi"}),
            ),
        ),
        (
            "tenant-b",
            "a1",
            json!({"aggregateId": "a1", "tenantId": "tenant-b", "deleted": false,
            "state": {"name": "Ann", "balance": 100}}),
        ),
    ]
}

async fn filled(store: &Store) {
    for (index, (tenant, id, document)) in documents().into_iter().enumerate() {
        let key = ViewKey::new(DOCS, tenant, id);
        let row = ViewRow {
            key: key.clone(),
            version: 1,
            state: document,
            updated_at: 1_700_000_000_000,
        };
        let processed = store
            .update(
                &key,
                &format!("m-{index}"),
                Box::new(move |_| Ok(Some(row))),
            )
            .await;
        assert!(processed.is_ok(), "{processed:?}");
    }
}

fn lowering() -> Lowering {
    Lowering::new(Target::Snapshot, NOW).with_zone(jiff::tz::TimeZone::UTC)
}

/// The ids of the rows `condition` matches (in id order), checked against the count.
async fn ids(store: &Store, condition: Value) -> Vec<String> {
    let condition: Condition = serde_json::from_value(condition).unwrap();
    let filter = lowering().lower(&condition).unwrap();
    let rows = store
        .query(DOCS, "tenant-a", &DocumentQuery::new(filter.clone(), 100))
        .await
        .unwrap();
    let count = store.count(DOCS, "tenant-a", &filter).await.unwrap();
    assert_eq!(
        count,
        rows.len() as u64,
        "count and list agree on {condition:?}"
    );
    rows.into_iter().map(|row| row.key.aggregate_id).collect()
}

fn refused(condition: Value) -> QueryError {
    let condition: Condition = serde_json::from_value(condition).unwrap();
    lowering().lower(&condition).unwrap_err()
}

macro_rules! check {
    ($store:expr, $condition:expr, [$($id:expr),*]) => {
        let expected: Vec<&str> = vec![$($id),*];
        let condition = $condition;
        assert_eq!(ids($store, condition.clone()).await, expected, "{condition}");
    };
}

/// [`check!`] for each `condition => [ids]`, in order: one line per case.
macro_rules! check_each {
    ($store:expr, $($condition:tt => [$($id:expr),*],)*) => {
        $(check!($store, json!($condition), [$($id),*]);)*
    };
}

/// Logical operators and the shorthands for ids, tenant, owner, space and deletion.
pub async fn query_logic_and_shorthands(store: Store) {
    filled(&store).await;
    let s = &store;
    check_each!(s,
        {"operator": "ALL"} => ["a1", "a2", "a3", "a4", "a5"],
        {} => ["a1", "a2", "a3", "a4", "a5"],
        {"operator": "ID", "value": "a2"} => ["a2"],
        {"operator": "IDS", "value": ["a2", "a3", "zz"]} => ["a2", "a3"],
        {"operator": "AGGREGATE_ID", "value": "a1"} => ["a1"],
        {"operator": "AGGREGATE_IDS", "value": ["a1", "a5"]} => ["a1", "a5"],
        {"operator": "TENANT_ID", "value": "tenant-a"} => ["a1", "a2", "a3", "a4", "a5"],
        {"operator": "TENANT_ID", "value": "tenant-b"} => [],
        {"operator": "OWNER_ID", "value": "owner-a4"} => ["a4"],
        {"operator": "SPACE_ID", "value": ""} => ["a1", "a2", "a3", "a4", "a5"],
        {"operator": "DELETED", "value": "ACTIVE"} => ["a1", "a2", "a4", "a5"],
        {"operator": "DELETED", "value": "deleted"} => ["a3"],
        {"operator": "DELETED", "value": true} => ["a3"],
        {"operator": "DELETED", "value": "ALL"} => ["a1", "a2", "a3", "a4", "a5"],
        {"operator": "AND", "children": [ {"field": "state.frozen", "operator": "FALSE"}, {"field": "state.balance", "operator": "GT", "value": 1}]} => ["a1"],
        {"operator": "OR", "children": [ {"operator": "ID", "value": "a2"}, {"field": "state.name", "operator": "EQ", "value": "dan"}]} => ["a2", "a4"],
        {"operator": "NOR", "children": [ {"operator": "ID", "value": "a2"}, {"field": "state.name", "operator": "EQ", "value": "dan"}]} => ["a1", "a3", "a5"],
    );
    assert!(matches!(
        refused(json!({"operator": "AND"})),
        QueryError::Value { .. }
    ));
}

/// Comparisons: by type (a number never equals the text "100"; 100 equals 100.0), text by
/// bytes, and `NE`/`NOT_IN` holding for a missing field.
pub async fn query_comparisons(store: Store) {
    filled(&store).await;
    let s = &store;
    check_each!(s,
        {"field": "state.balance", "operator": "EQ", "value": 100} => ["a1", "a5"],
        {"field": "state.balance", "operator": "EQ", "value": "100"} => ["a4"],
        {"field": "state.name", "operator": "EQ", "value": "Ann"} => ["a1"],
        {"field": "state.owner.city", "operator": "EQ", "value": "Paris"} => ["a1"],
        {"field": "state.balance", "operator": "NE", "value": 100} => ["a2", "a3", "a4"],
        {"field": "state.rate", "operator": "NE", "value": 2} => ["a1", "a2", "a4", "a5"],
        {"field": "state.balance", "operator": "GT", "value": 5} => ["a1", "a5"],
        {"field": "state.balance", "operator": "GTE", "value": 5} => ["a1", "a2", "a5"],
        {"field": "state.balance", "operator": "LT", "value": 5} => ["a3"],
        {"field": "state.balance", "operator": "LTE", "value": 5} => ["a2", "a3"],
        {"field": "state.rate", "operator": "GT", "value": 1.75} => ["a3"],
        {"field": "state.name", "operator": "GT", "value": "Z"} => ["a2", "a4"],
        {"field": "state.name", "operator": "LT", "value": "C"} => ["a1"],
        {"field": "state.balance", "operator": "BETWEEN", "value": [1, 100]} => ["a1", "a2", "a5"],
        {"field": "state.name", "operator": "BETWEEN", "value": ["B", "Cz"]} => ["a3"],
        {"field": "state.balance", "operator": "IN", "value": [0, 5, "100"]} => ["a2", "a3", "a4"],
        {"field": "state.balance", "operator": "NOT_IN", "value": [0, 5]} => ["a1", "a4", "a5"],
        {"field": "state.missing", "operator": "NOT_IN", "value": [1]} => ["a1", "a2", "a3", "a4", "a5"],
    );
    assert!(matches!(
        refused(json!({"field": "state.balance", "operator": "BETWEEN", "value": [1]})),
        QueryError::Value { .. }
    ));
    assert!(matches!(
        refused(json!({"field": "state.name", "operator": "EQ", "value": "a\u{0}b"})),
        QueryError::Value { .. }
    ));
    assert!(matches!(
        refused(json!({"field": "state..x", "operator": "EQ", "value": 1})),
        QueryError::Field(_)
    ));
    assert!(matches!(
        refused(json!({"field": "state.x'--", "operator": "EQ", "value": 1})),
        QueryError::Field(_)
    ));
}

/// Lists of any length up to the limits, of mixed types: a list is one value to the store,
/// so a thousand values run as one does; and the limits are refused before anything runs.
pub async fn query_long_and_mixed_lists(store: Store) {
    filled(&store).await;
    let s = &store;
    let filler = |n: usize| -> Vec<Value> { (0..n).map(|i| json!(format!("none-{i}"))).collect() };
    let mut balances = filler(MAX_VALUES - 3);
    balances.extend([json!(100), json!(true), json!(0.0)]);
    check!(
        s,
        json!({"field": "state.balance", "operator": "IN", "value": balances}),
        ["a1", "a3", "a5"]
    );
    let mut names = filler(MAX_VALUES - 2);
    names.extend([json!("bob"), json!("dan")]);
    check_each!(s,
        {"field": "state.name", "operator": "NOT_IN", "value": names} => ["a1", "a3", "a5"],
        {"field": "state.frozen", "operator": "IN", "value": [true, "no", 7]} => ["a2", "a4"],
        {"field": "state.frozen", "operator": "IN", "value": [false]} => ["a1", "a3"],
        {"field": "state.tags", "operator": "ALL_IN", "value": []} => ["a1", "a2", "a3"],
        {"field": "state.tags", "operator": "ALL_IN", "value": ["eu", "eu", "vip"]} => ["a1"],
        {"field": "state.tags", "operator": "ALL_IN", "value": ["eu", "nowhere"]} => [],
        {"field": "state.name", "operator": "ALL_IN", "value": ["Ann"]} => [],
    );
    let mut wanted = vec![json!("eu")];
    wanted.extend(std::iter::repeat_n(json!("vip"), MAX_VALUES - 1));
    let all_of = json!({"field": "state.tags", "operator": "ALL_IN", "value": wanted});
    let every = json!({"operator": "AND", "children": [all_of.clone(), all_of.clone(), all_of.clone(), all_of]});
    check!(s, every, ["a1"]);

    let too_many =
        json!({"field": "state.balance", "operator": "IN", "value": filler(MAX_VALUES + 1)});
    assert!(
        matches!(
            refused(too_many),
            QueryError::TooLarge("values in one condition", MAX_VALUES)
        ),
        "one list past its limit"
    );
    let each = json!({"field": "state.balance", "operator": "IN", "value": filler(MAX_VALUES)});
    let in_all =
        json!({"operator": "OR", "children": vec![each; MAX_VALUES_IN_ALL / MAX_VALUES + 1]});
    assert!(
        matches!(
            refused(in_all),
            QueryError::TooLarge("values in all the conditions", MAX_VALUES_IN_ALL)
        ),
        "the lists together past their limit"
    );
    let mut deep = json!({"field": "state.balance", "operator": "EQ", "value": 5});
    for _ in 0..MAX_DEPTH {
        deep = json!({"operator": "AND", "children": [deep]});
    }
    assert!(
        matches!(
            refused(deep),
            QueryError::TooLarge("levels of nested conditions", MAX_DEPTH)
        ),
        "nesting past its limit"
    );
    let wide = json!({"operator": "AND", "children": vec![json!({"field": "state.balance", "operator": "EQ", "value": 5}); MAX_CONDITIONS]});
    assert!(
        matches!(
            refused(wide),
            QueryError::TooLarge("conditions", MAX_CONDITIONS)
        ),
        "conditions past their limit"
    );
}

/// Text, arrays, nulls, booleans and presence.
pub async fn query_text_arrays_and_presence(store: Store) {
    filled(&store).await;
    let s = &store;
    check_each!(s,
        {"field": "state.name", "operator": "CONTAINS", "value": "n"} => ["a1", "a4"],
        {"field": "state.name", "operator": "CONTAINS", "value": "LU", "options": {"ignoreCase": true}} => ["a5"],
        {"field": "state.name", "operator": "CONTAINS", "value": "LU"} => [],
        {"field": "state.name", "operator": "STARTS_WITH", "value": "b"} => ["a2"],
        {"field": "state.name", "operator": "STARTS_WITH", "value": "B", "options": {"ignoreCase": true}} => ["a2"],
        {"field": "state.name", "operator": "ENDS_WITH", "value": "eo"} => ["a3"],
        {"field": "state.name", "operator": "ENDS_WITH", "value": "%"} => [],
        {"field": "state.name", "operator": "CONTAINS", "value": "_"} => [],
        {"field": "state.tags", "operator": "ALL_IN", "value": ["eu"]} => ["a1", "a2"],
        {"field": "state.tags", "operator": "ALL_IN", "value": ["eu", "vip"]} => ["a1"],
        {"field": "state.items", "operator": "ELEM_MATCH", "children": [ {"field": "qty", "operator": "GTE", "value": 5}]} => ["a1"],
        {"field": "state.items", "operator": "ELEM_MATCH", "children": [ {"operator": "AND", "children": [ {"field": "sku", "operator": "EQ", "value": "x"}, {"field": "qty", "operator": "LT", "value": 2}]}]} => ["a2"],
        {"field": "state.tags", "operator": "ELEM_MATCH", "children": [ {"operator": "EQ", "field": "", "value": "vip"}]} => ["a1"],
        {"field": "state.note", "operator": "NULL"} => ["a1", "a2", "a3", "a4"],
        {"field": "state.note", "operator": "NOT_NULL"} => ["a5"],
        {"field": "state.frozen", "operator": "TRUE"} => ["a2"],
        {"field": "state.frozen", "operator": "FALSE"} => ["a1", "a3"],
        {"field": "state.note", "operator": "EXISTS"} => ["a1", "a5"],
        {"field": "state.note", "operator": "EXISTS", "value": false} => ["a2", "a3", "a4"],
        {"field": "state.rate", "operator": "EXISTS", "value": true} => ["a1", "a3"],
    );
}

/// The date operators, as ranges of epoch milliseconds in the condition's zone (UTC here
/// unless `zoneId` names one); MATCH, RAW and date patterns are refused by name.
pub async fn query_dates(store: Store) {
    filled(&store).await;
    let s = &store;
    let on = |operator: &str| json!({"field": "opened", "operator": operator});
    check!(s, on("TODAY"), ["a1"]);
    check!(s, on("TOMORROW"), ["a5"]);
    check!(s, on("THIS_WEEK"), ["a1", "a2", "a5"]);
    check!(s, on("NEXT_WEEK"), ["a4"]);
    check!(s, on("LAST_WEEK"), ["a3"]);
    check!(s, on("THIS_MONTH"), ["a1", "a2", "a4", "a5"]);
    check!(s, on("LAST_MONTH"), ["a3"]);
    check_each!(s,
        {"field": "opened", "operator": "RECENT_DAYS", "value": 1} => ["a1"],
        {"field": "opened", "operator": "RECENT_DAYS", "value": 2} => ["a1", "a2"],
        {"field": "opened", "operator": "RECENT_DAYS", "value": 11} => ["a1", "a2", "a3"],
        {"field": "opened", "operator": "EARLIER_DAYS", "value": 2} => ["a3"],
        {"field": "opened", "operator": "BEFORE_TODAY", "value": "10:00"} => ["a1", "a2", "a3"],
        {"field": "opened", "operator": "BEFORE_TODAY", "value": 7200} => ["a2", "a3"],
    );
    // 20:00 in Shanghai: its today began at 16:00 UTC the day before.
    check_each!(s,
        {"field": "opened", "operator": "TODAY", "options": {"zoneId": "Asia/Shanghai"}} => ["a1", "a2"],
        {"field": "opened", "operator": "TODAY", "options": {"zoneId": "America/New_York"}} => ["a1"],
    );
    for operator in ["MATCH", "RAW"] {
        let error = refused(json!({"field": "state.name", "operator": operator, "value": "x"}));
        assert!(error.to_string().contains(operator), "{error}");
    }
    let error = refused(
        json!({"field": "opened", "operator": "TODAY", "options": {"datePattern": "yyyy-MM-dd"}}),
    );
    assert!(error.to_string().contains("datePattern"), "{error}");
    let error = refused(
        json!({"field": "opened", "operator": "TODAY", "options": {"zoneId": "Mars/Olympus"}}),
    );
    assert!(error.to_string().contains("zoneId"), "{error}");
}

/// Sort (by type, then value; ties by id), offset and limit; another tenant's rows never.
pub async fn query_sorts_and_pages(store: Store) {
    filled(&store).await;
    let page = |sort: Vec<SortKey>, offset: u64, limit: u64| {
        let store = store.clone();
        async move {
            let query = DocumentQuery {
                filter: wow_core::query::Filter::All,
                sort,
                offset,
                limit,
            };
            let rows = store.query(DOCS, "tenant-a", &query).await.unwrap();
            rows.into_iter()
                .map(|row| row.key.aggregate_id)
                .collect::<Vec<_>>()
        }
    };
    let key = |path: &str, direction| SortKey {
        path: FieldPath::parse(path).unwrap(),
        direction,
    };
    // Numbers (100 = 100.0, tied by id), then the text "100".
    assert_eq!(
        page(vec![key("state.balance", Direction::Desc)], 0, 10).await,
        ["a4", "a1", "a5", "a2", "a3"]
    );
    assert_eq!(
        page(vec![key("state.balance", Direction::Asc)], 1, 2).await,
        ["a2", "a1"]
    );
    assert_eq!(
        page(vec![key("state.name", Direction::Asc)], 0, 10).await,
        ["a1", "a3", "a5", "a2", "a4"]
    );
    // A missing field sorts first ascending.
    assert_eq!(
        page(
            vec![
                key("state.rate", Direction::Asc),
                key("state.name", Direction::Desc)
            ],
            0,
            3
        )
        .await,
        ["a4", "a2", "a5"]
    );
    assert_eq!(page(Vec::new(), 3, 10).await, ["a4", "a5"]);
    assert!(page(Vec::new(), 10, 10).await.is_empty());
    let other = store
        .query(
            DOCS,
            "tenant-b",
            &DocumentQuery::new(wow_core::query::Filter::All, 10),
        )
        .await
        .unwrap();
    assert_eq!(other.len(), 1);
    assert_eq!(other[0].state["tenantId"], "tenant-b");
}
