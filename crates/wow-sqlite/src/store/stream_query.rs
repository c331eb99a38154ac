//! Wow's event stream queries (`StreamQueries::query_streams`, `count_streams`): a query DSL
//! filter over each appended stream as a JSON document, on the query connections.
//!
//! Why on the query connections and not the read pool: a query's cost is the caller's to
//! choose, so it runs within its tenant's share and its time budget ([`crate::bounded`]) and
//! never takes a connection from the reads of history. The filter's SQL is built at run time
//! by [`Translation`]; the statement around it is fixed here.

use async_trait::async_trait;
use rusqlite::params_from_iter;
use wow_core::eventsourcing::{EventStoreError, StreamQueries, TenantStreams};
use wow_core::query::{DocumentQuery, Filter};
use wow_core::DomainEventStream;

use super::stream_row::{decode_stream, stream_columns};
use super::SqliteStore;
use crate::query::Translation;

/// The columns [`decode_stream`] reads, in its order.
const STREAM_COLUMNS: &str = stream_columns!();

/// The appended streams of one aggregate type in one tenant (`?1`, `?2`), each with `doc`: the
/// JSON document Wow's event stream queries filter (see `StreamQueries::query_streams`).
const STREAM_DOCUMENTS: &str = "SELECT *, json_object('id', stream_id, 'requestId', request_id, 'commandId', command_id, 'contextName', context_name, 'aggregateName', aggregate_name, 'aggregateId', aggregate_id, 'tenantId', tenant_id, 'ownerId', COALESCE(json_extract(header, '$.owner_id'), ''), 'spaceId', COALESCE(json_extract(header, '$.space_id'), ''), 'version', version, 'createTime', create_time, 'header', json(header), 'body', json(body)) AS doc FROM event_stream WHERE tenant_id = ?1 AND aggregate_name = ?2 AND version > 0";

/// The last `ORDER BY` term of a query: streams in a stable order whatever the sort.
const TIE_BREAK: &str = "aggregate_id, version";

/// The values of [`STREAM_DOCUMENTS`]'s scope.
fn stream_scope(streams: TenantStreams<'_>) -> Vec<rusqlite::types::Value> {
    vec![
        rusqlite::types::Value::Text(streams.tenant_id.to_owned()),
        rusqlite::types::Value::Text(streams.named.aggregate_name.clone()),
    ]
}

#[async_trait]
impl StreamQueries for SqliteStore {
    async fn query_streams(
        &self,
        streams: TenantStreams<'_>,
        query: &DocumentQuery,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        let mut sql = Translation::new("doc", stream_scope(streams));
        let select = format!("SELECT {STREAM_COLUMNS} FROM ({STREAM_DOCUMENTS})");
        let text = sql.page_sql(&select, "", query, TIE_BREAK);
        let values = sql.values;
        Ok(self
            .queries
            .read(streams.tenant_id, move |connection| {
                let mut statement = connection.prepare(&text)?;
                let rows = statement.query_map(params_from_iter(values), decode_stream)?;
                rows.collect()
            })
            .await?)
    }

    async fn count_streams(
        &self,
        streams: TenantStreams<'_>,
        filter: &Filter,
    ) -> Result<u64, EventStoreError> {
        let mut sql = Translation::new("doc", stream_scope(streams));
        let text = sql.count_sql(&format!("({STREAM_DOCUMENTS})"), "", filter);
        Ok(self
            .queries
            .count(streams.tenant_id, text, sql.values)
            .await?)
    }
}
