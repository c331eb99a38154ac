//! Wow's event stream queries, run by the store itself.

use async_trait::async_trait;

use crate::eventsourcing::EventStoreError;
use wow_model::aggregate_id::NamedAggregate;
use wow_model::event::DomainEventStream;
use wow_model::query::{DocumentQuery, Filter};

/// Document queries over appended streams (`POST /{aggregate}/event/list`, `.../count`).
#[async_trait]
pub trait StreamQueries: Send + Sync + std::fmt::Debug {
    /// The appended streams of the aggregate type `named` in `tenant_id` that match
    /// `query.filter`, as Wow's event stream queries ask (`POST /{aggregate}/event/list`):
    /// each stream is the document of its JSON with Wow's field names (`id`, `aggregateId`,
    /// `tenantId`, `ownerId`, `spaceId`, `requestId`, `commandId`, `version`, `createTime`,
    /// `header`, `body` with the events as stored), in `query.sort` order and then by
    /// (aggregate id, version), `query.limit` of them from `query.offset`. The store runs the
    /// filter itself, with the semantics of [`Filter`]; another tenant's streams are never
    /// read, and rejections are not streams.
    ///
    /// Fails with [`EventStoreError::IllegalArgument`] when the store cannot run the query
    /// (the default: it runs none), and as [`History::load`](crate::eventsourcing::History::load) does.
    async fn query_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        let _ = (named, tenant_id, query);
        Err(EventStoreError::IllegalArgument(
            "this event store does not run queries".to_owned(),
        ))
    }

    /// How many appended streams of `named` in `tenant_id` match `filter`.
    ///
    /// Fails as [`query_streams`](Self::query_streams) does.
    async fn count_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, EventStoreError> {
        let _ = (named, tenant_id, filter);
        Err(EventStoreError::IllegalArgument(
            "this event store does not run queries".to_owned(),
        ))
    }
}

/// A stream as the document Wow's event stream queries filter: its JSON, with `ownerId` and
/// `spaceId` from its header (empty when its command named none).
pub fn stream_document(stream: &DomainEventStream) -> serde_json::Value {
    let mut document = serde_json::to_value(stream).unwrap_or_default();
    if let Some(object) = document.as_object_mut() {
        object.remove("fingerprint");
        for (field, header) in [
            ("ownerId", wow_model::command::OWNER_ID_HEADER),
            ("spaceId", wow_model::command::SPACE_ID_HEADER),
        ] {
            let value = stream.header.get(header).cloned().unwrap_or_default();
            object.insert(field.to_owned(), serde_json::Value::String(value));
        }
    }
    document
}
