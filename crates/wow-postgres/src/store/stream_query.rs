//! Wow's event stream queries (`StreamQueries::query_streams`, `count_streams`): a query DSL
//! filter over each appended stream as a JSONB document, on the query connections.
//!
//! Why on the query connections and not the pool: a query's cost is the caller's to choose,
//! so it runs within its tenant's share and its time budget ([`crate::bounded`]) and never
//! takes a connection from the command path. The filter's SQL is built at run time by
//! [`Translation`]; the statement around it is fixed here.

use async_trait::async_trait;
use wow_core::eventsourcing::{EventStoreError, StreamQueries};
use wow_core::query::{DocumentQuery, Filter};
use wow_core::{DomainEventStream, NamedAggregate};

use super::stream_row::{decode_stream, stream_columns};
use super::{clamp, PostgresStore};
use crate::query::{Param, Translation};

/// The columns [`decode_stream`] reads, in its order.
const STREAM_COLUMNS: &str = stream_columns!();

/// The appended streams of one aggregate type in one tenant (`$1`, `$2`), each with `doc`: the
/// JSONB document Wow's event stream queries filter (see `StreamQueries::query_streams`).
const STREAM_DOCUMENTS: &str = "SELECT *, jsonb_build_object('id', stream_id, 'requestId', request_id, 'commandId', command_id, 'contextName', context_name, 'aggregateName', aggregate_name, 'aggregateId', aggregate_id, 'tenantId', tenant_id, 'ownerId', COALESCE(header->>'owner_id', ''), 'spaceId', COALESCE(header->>'space_id', ''), 'version', version, 'createTime', create_time, 'header', header, 'body', body) AS doc FROM event_stream WHERE tenant_id = $1 AND aggregate_name = $2 AND version > 0";

/// The last `ORDER BY` term of a query: streams in a stable order whatever the sort.
const TIE_BREAK: &str = "aggregate_id COLLATE \"C\", version";

/// The streams of [`STREAM_DOCUMENTS`] where `condition` holds, in `order`, from the
/// placeholders `limit` and `offset`.
fn query_sql(condition: &str, order: &[String], limit: &str, offset: &str) -> String {
    format!(
        "SELECT {STREAM_COLUMNS} FROM ({STREAM_DOCUMENTS}) AS s WHERE {condition} ORDER BY {} LIMIT {limit} OFFSET {offset}",
        order.join(", ")
    )
}

/// How many streams of [`STREAM_DOCUMENTS`] `condition` holds for.
fn count_sql(condition: &str) -> String {
    format!("SELECT COUNT(*) FROM ({STREAM_DOCUMENTS}) AS s WHERE {condition}")
}

/// The parameters of [`STREAM_DOCUMENTS`]'s scope.
fn stream_scope(named: &NamedAggregate, tenant_id: &str) -> Vec<Param> {
    vec![
        Box::new(tenant_id.to_owned()),
        Box::new(named.aggregate_name.clone()),
    ]
}

#[async_trait]
impl StreamQueries for PostgresStore {
    async fn query_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        let mut sql = Translation::new("doc", stream_scope(named, tenant_id));
        let condition = sql.condition(&query.filter);
        let mut order = sql.order(&query.sort);
        order.push(TIE_BREAK.to_owned());
        let limit = sql.bind(Box::new(clamp(query.limit)));
        let offset = sql.bind(Box::new(clamp(query.offset)));
        let text = query_sql(&condition, &order, &limit, &offset);
        let bounded = self.queries.client(tenant_id).await?;
        let rows = bounded
            .client
            .query(&text, &sql.param_refs())
            .await
            .map_err(|e| self.queries.failed(e))?;
        rows.iter().map(decode_stream).collect()
    }

    async fn count_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, EventStoreError> {
        let mut sql = Translation::new("doc", stream_scope(named, tenant_id));
        let condition = sql.condition(filter);
        let text = count_sql(&condition);
        let bounded = self.queries.client(tenant_id).await?;
        let count: i64 = bounded
            .client
            .query_one(&text, &sql.param_refs())
            .await
            .map_err(|e| self.queries.failed(e))?
            .get(0);
        Ok(u64::try_from(count).unwrap_or(0))
    }
}
