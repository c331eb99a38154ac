//! Streams and snapshots for the suites, built the way the framework builds them.

use std::collections::BTreeMap;

use serde_json::json;
use wow_core::eventsourcing::Snapshot;
use wow_core::{id, AggregateId, DomainEvent, DomainEventStream};

/// The context every suite aggregate lives in.
pub const CONTEXT: &str = "tck";
/// The aggregate name every suite aggregate has unless a case says otherwise.
pub const AGGREGATE: &str = "order";

/// A fresh aggregate id of the suite's aggregate type, in tenant `tenant-a`.
pub fn aggregate() -> AggregateId {
    AggregateId::new(CONTEXT, AGGREGATE, id::new_id(), "tenant-a")
}

/// A stream of two events for `aggregate` at `version` with `request_id`, made now.
pub fn stream(aggregate: &AggregateId, version: u64, request_id: &str) -> DomainEventStream {
    stream_at(aggregate, version, request_id, id::now_millis())
}

/// A stream of two events for `aggregate` at `version` with `request_id`, made at
/// `create_time` (milliseconds since the Unix epoch).
pub fn stream_at(
    aggregate: &AggregateId,
    version: u64,
    request_id: &str,
    create_time: i64,
) -> DomainEventStream {
    let mut header = BTreeMap::new();
    header.insert("source".to_owned(), "tck".to_owned());
    DomainEventStream {
        id: id::new_id(),
        request_id: request_id.to_owned(),
        command_id: id::new_id(),
        aggregate_id: aggregate.clone(),
        version,
        create_time,
        fingerprint: format!("fp-{request_id}"),
        header,
        body: vec![
            DomainEvent {
                id: id::new_id(),
                name: "LineAdded".to_owned(),
                revision: "0.0.1".to_owned(),
                body: json!({"sku": format!("sku-{version}"), "quantity": version}),
            },
            DomainEvent {
                id: id::new_id(),
                name: "TotalChanged".to_owned(),
                revision: "0.0.2".to_owned(),
                body: json!({"total": {"amount": version * 10, "currency": "EUR"}, "note": "ünïcode ✓"}),
            },
        ],
    }
}

/// A snapshot of `aggregate` at `version` whose state records the version.
pub fn snapshot(aggregate: &AggregateId, version: u64) -> Snapshot {
    Snapshot {
        aggregate_id: aggregate.clone(),
        version,
        state: json!({"version": version, "lines": [version]}),
        snapshot_time: id::now_millis(),
        state_version: 1,
    }
}
