//! Wow's event stream queries: streams of one aggregate type in one tenant, filtered as JSON
//! documents (`id`, `aggregateId`, `version`, `createTime`, `header`, `body`), sorted and
//! paged alike in every store.

use serde_json::{json, Value};
use wow_core::eventsourcing::{RejectionRecord, TenantStreams};
use wow_core::query::{Condition, Direction, DocumentQuery, FieldPath, Lowering, SortKey, Target};
use wow_core::{AggregateId, ErrorCode, NamedAggregate};

use super::Store;
use crate::fixtures::{stream, stream_at, CONTEXT};

fn order(id: &str, tenant: &str) -> AggregateId {
    AggregateId::new(CONTEXT, "order", id, tenant)
}

async fn matching(store: &Store, condition: Value, sort: Vec<SortKey>) -> Vec<(String, u64)> {
    let condition: Condition = serde_json::from_value(condition).unwrap();
    let filter = Lowering::new(Target::EventStream, 0)
        .lower(&condition)
        .unwrap();
    let named = NamedAggregate::new(CONTEXT, "order");
    let query = DocumentQuery {
        filter: filter.clone(),
        sort,
        offset: 0,
        limit: 100,
    };
    let streams = store
        .query_streams(TenantStreams::new(&named, "tenant-a"), &query)
        .await
        .unwrap();
    let count = store
        .count_streams(TenantStreams::new(&named, "tenant-a"), &filter)
        .await
        .unwrap();
    assert_eq!(
        count,
        streams.len() as u64,
        "count and list agree on {condition:?}"
    );
    streams
        .into_iter()
        .map(|s| (s.aggregate_id.id, s.version))
        .collect()
}

fn ids(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(id, v)| ((*id).to_owned(), *v)).collect()
}

/// Streams are documents with Wow's field names: by aggregate, version, time, stream id,
/// header and the events in `body`; another tenant's, another type's and rejections are
/// never among them; sort and page as the reference does.
pub async fn queries_streams_as_documents(store: Store) {
    let (o1, tagged) = seed_documents(&store).await;
    filters_by_field(&store, &tagged).await;
    filters_through_body(&store).await;
    sorts_and_pages(&store, &o1).await;
}

/// Two orders of `tenant-a` (o1 at versions 1 and 2, o2 at 1 and 2, its second tagged with a
/// header and one event), a rejection, another tenant's order and another type's aggregate:
/// o1 and the tagged stream.
async fn seed_documents(store: &Store) -> (AggregateId, wow_core::DomainEventStream) {
    let (o1, o2) = (order("o1", "tenant-a"), order("o2", "tenant-a"));
    store.append(&stream_at(&o1, 1, "r1", 1_000)).await.unwrap();
    store.append(&stream_at(&o1, 2, "r2", 2_000)).await.unwrap();
    store.append(&stream_at(&o2, 1, "r3", 3_000)).await.unwrap();
    let mut tagged = stream_at(&o2, 2, "r4", 4_000);
    tagged
        .header
        .insert("command_operator".into(), "ann".into());
    tagged.body.truncate(1);
    store.append(&tagged).await.unwrap();
    store
        .record_rejection(
            &o2,
            "r5",
            &RejectionRecord {
                command_id: "c".into(),
                fingerprint: "f".into(),
                error_code: ErrorCode::IllegalState,
                error_msg: "no".into(),
                version: 2,
                create_time: 5_000,
            },
        )
        .await
        .unwrap();
    store
        .append(&stream(&order("o1", "tenant-b"), 1, "r1"))
        .await
        .unwrap();
    store
        .append(&stream(
            &AggregateId::new(CONTEXT, "invoice", "o1", "tenant-a"),
            1,
            "r1",
        ))
        .await
        .unwrap();
    (o1, tagged)
}

/// Conditions on the stream's own fields and header.
async fn filters_by_field(s: &Store, tagged: &wow_core::DomainEventStream) {
    assert_eq!(
        matching(s, json!({"operator": "ALL"}), Vec::new()).await,
        ids(&[("o1", 1), ("o1", 2), ("o2", 1), ("o2", 2)])
    );
    assert_eq!(
        matching(
            s,
            json!({"operator": "AGGREGATE_ID", "value": "o2"}),
            Vec::new()
        )
        .await,
        ids(&[("o2", 1), ("o2", 2)])
    );
    assert_eq!(
        matching(s, json!({"operator": "ID", "value": tagged.id}), Vec::new()).await,
        ids(&[("o2", 2)])
    );
    assert_eq!(
        matching(
            s,
            json!({"field": "version", "operator": "GT", "value": 1}),
            Vec::new()
        )
        .await,
        ids(&[("o1", 2), ("o2", 2)])
    );
    assert_eq!(
        matching(
            s,
            json!({"field": "createTime", "operator": "BETWEEN", "value": [2000, 3000]}),
            Vec::new()
        )
        .await,
        ids(&[("o1", 2), ("o2", 1)])
    );
    assert_eq!(
        matching(
            s,
            json!({"field": "header.command_operator", "operator": "EQ", "value": "ann"}),
            Vec::new()
        )
        .await,
        ids(&[("o2", 2)])
    );
    assert_eq!(
        matching(
            s,
            json!({"operator": "TENANT_ID", "value": "tenant-b"}),
            Vec::new()
        )
        .await,
        ids(&[])
    );
}

/// Conditions on the events in `body`.
async fn filters_through_body(s: &Store) {
    assert_eq!(
        matching(
            s,
            json!({"field": "body", "operator": "ELEM_MATCH", "children": [
            {"field": "name", "operator": "EQ", "value": "TotalChanged"}]}),
            Vec::new()
        )
        .await,
        ids(&[("o1", 1), ("o1", 2), ("o2", 1)])
    );
    assert_eq!(
        matching(
            s,
            json!({"field": "body", "operator": "ELEM_MATCH", "children": [
            {"field": "body.quantity", "operator": "GTE", "value": 2}]}),
            Vec::new()
        )
        .await,
        ids(&[("o1", 2), ("o2", 2)])
    );
    // A path through `body` is about each event, as Wow's clients write it (`body.name`,
    // MongoDB's reading of a dotted path through an array): it holds for one event; NE and
    // NOT_IN hold for none.
    for (condition, expected) in [
        (
            json!({"field": "body.name", "operator": "EQ", "value": "TotalChanged"}),
            ids(&[("o1", 1), ("o1", 2), ("o2", 1)]),
        ),
        (
            json!({"field": "body.name", "operator": "NE", "value": "TotalChanged"}),
            ids(&[("o2", 2)]),
        ),
        (
            json!({"field": "body.name", "operator": "NOT_IN", "value": ["TotalChanged"]}),
            ids(&[("o2", 2)]),
        ),
        (
            json!({"field": "body.body.quantity", "operator": "GTE", "value": 2}),
            ids(&[("o1", 2), ("o2", 2)]),
        ),
        (
            json!({"operator": "AND", "children": [
                {"field": "version", "operator": "GTE", "value": 2},
                {"field": "body.name", "operator": "IN", "value": ["TotalChanged", "Nothing"]}]}),
            ids(&[("o1", 2)]),
        ),
    ] {
        assert_eq!(
            matching(s, condition.clone(), Vec::new()).await,
            expected,
            "{condition}"
        );
    }
}

/// Sorting and paging as the reference does; a queried stream is the stream as loaded.
async fn sorts_and_pages(store: &Store, o1: &AggregateId) {
    let s = store;
    let newest_first = vec![SortKey {
        path: FieldPath::parse("createTime").unwrap(),
        direction: Direction::Desc,
    }];
    assert_eq!(
        matching(s, json!({}), newest_first.clone()).await,
        ids(&[("o2", 2), ("o2", 1), ("o1", 2), ("o1", 1)])
    );
    let named = NamedAggregate::new(CONTEXT, "order");
    let page = DocumentQuery {
        filter: wow_core::query::Filter::All,
        sort: newest_first,
        offset: 1,
        limit: 2,
    };
    let page: Vec<_> = store
        .query_streams(TenantStreams::new(&named, "tenant-a"), &page)
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.aggregate_id.id, s.version))
        .collect();
    assert_eq!(page, ids(&[("o2", 1), ("o1", 2)]));
    let whole = store
        .query_streams(
            TenantStreams::new(&named, "tenant-a"),
            &DocumentQuery::new(wow_core::query::Filter::All, 1),
        )
        .await
        .unwrap();
    let loaded = store.load(o1, 1, 1).await.unwrap();
    assert_eq!(whole, loaded, "a queried stream is the stream as loaded");
}
