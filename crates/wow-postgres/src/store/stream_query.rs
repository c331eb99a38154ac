//! Wow's event stream queries (`StreamQueries::query_streams`, `count_streams`): a query DSL
//! filter over each appended stream as a JSONB document, on the query connections.
//!
//! Why on the query connections and not the pool: a query's cost is the caller's to choose,
//! so it runs within its tenant's share and its time budget ([`crate::bounded`]) and never
//! takes a connection from the command path. The filter's SQL is built at run time by
//! [`Translation`]; the statement around it is fixed here.

use async_trait::async_trait;
use wow_core::eventsourcing::{EventStoreError, StreamQueries, TenantStreams};
use wow_core::query::{DocumentQuery, Filter};
use wow_core::DomainEventStream;

use super::stream_row::{decode_stream, stream_columns};
use super::PostgresStore;
use crate::query::{Param, Translation};

/// The columns [`decode_stream`] reads, in its order.
const STREAM_COLUMNS: &str = stream_columns!();

/// The appended streams of one aggregate type in one tenant (`$1`, `$2`), each with `doc`: the
/// JSONB document Wow's event stream queries filter (see `StreamQueries::query_streams`).
const STREAM_DOCUMENTS: &str = "SELECT *, jsonb_build_object('id', stream_id, 'requestId', request_id, 'commandId', command_id, 'contextName', context_name, 'aggregateName', aggregate_name, 'aggregateId', aggregate_id, 'tenantId', tenant_id, 'ownerId', COALESCE(header->>'owner_id', ''), 'spaceId', COALESCE(header->>'space_id', ''), 'version', version, 'createTime', create_time, 'header', header, 'body', body) AS doc FROM event_stream WHERE tenant_id = $1 AND aggregate_name = $2 AND version > 0";

/// The last `ORDER BY` term of a query: streams in a stable order whatever the sort.
const TIE_BREAK: &str = "aggregate_id COLLATE \"C\", version";

/// The parameters of [`STREAM_DOCUMENTS`]'s scope.
fn stream_scope(streams: TenantStreams<'_>) -> Vec<Param> {
    vec![
        Box::new(streams.tenant_id.to_owned()),
        Box::new(streams.named.aggregate_name.clone()),
    ]
}

#[async_trait]
impl StreamQueries for PostgresStore {
    async fn query_streams(
        &self,
        streams: TenantStreams<'_>,
        query: &DocumentQuery,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        let mut sql = Translation::new("doc", stream_scope(streams));
        let select = format!("SELECT {STREAM_COLUMNS} FROM ({STREAM_DOCUMENTS}) AS s");
        let text = sql.page_sql(&select, "", query, TIE_BREAK);
        let rows = self
            .queries
            .rows(streams.tenant_id, &text, &sql.params)
            .await?;
        rows.iter().map(decode_stream).collect()
    }

    async fn count_streams(
        &self,
        streams: TenantStreams<'_>,
        filter: &Filter,
    ) -> Result<u64, EventStoreError> {
        let mut sql = Translation::new("doc", stream_scope(streams));
        let text = sql.count_sql(&format!("({STREAM_DOCUMENTS}) AS s"), "", filter);
        Ok(self
            .queries
            .count(streams.tenant_id, &text, &sql.params)
            .await?)
    }
}
