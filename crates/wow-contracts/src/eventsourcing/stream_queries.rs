//! Wow's event stream queries, run by the store itself.

use async_trait::async_trait;

use crate::eventsourcing::EventStoreError;
use wow_model::aggregate_id::NamedAggregate;
use wow_model::event::DomainEventStream;
use wow_model::query::{DocumentQuery, Filter};

/// Document queries over appended streams (`POST /{aggregate}/event/list`, `.../count`).
#[async_trait]
pub trait StreamQueries: Send + Sync + std::fmt::Debug {
    /// The appended streams of `streams` (an aggregate type in a tenant) that match
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
        streams: TenantStreams<'_>,
        query: &DocumentQuery,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        let _ = (streams, query);
        Err(EventStoreError::IllegalArgument(
            "this event store does not run queries".to_owned(),
        ))
    }

    /// How many appended streams of `streams` match `filter`.
    ///
    /// Fails as [`query_streams`](Self::query_streams) does.
    async fn count_streams(
        &self,
        streams: TenantStreams<'_>,
        filter: &Filter,
    ) -> Result<u64, EventStoreError> {
        let _ = (streams, filter);
        Err(EventStoreError::IllegalArgument(
            "this event store does not run queries".to_owned(),
        ))
    }
}

/// The streams a query over appended streams reads: those of the aggregate type `named` in
/// the tenant `tenant_id`, never another tenant's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantStreams<'a> {
    /// The aggregate type whose streams are read.
    pub named: &'a NamedAggregate,
    /// The tenant whose streams are read.
    pub tenant_id: &'a str,
}

impl<'a> TenantStreams<'a> {
    /// The streams of `named` in `tenant_id`.
    pub fn new(named: &'a NamedAggregate, tenant_id: &'a str) -> Self {
        Self { named, tenant_id }
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
