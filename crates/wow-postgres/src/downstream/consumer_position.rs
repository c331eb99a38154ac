//! Table `consumer_position`: how far each consumer got in each aggregate's history, the
//! `ConsumerPositions` implementation (whose global feed cursors are in
//! [`super::feed_cursor`]).
//!
//! A position is the version before the first gap in what the consumer handled; versions
//! handled past a gap are kept ahead (column `ahead`, a multirange) until the gap fills, so
//! runs written in any order (a batch's runs, two nodes around a partition move) never move a
//! position past a version that was not handled.

use std::collections::HashMap;

use async_trait::async_trait;
use wow_core::event::{ConsumerPositions, ConsumerStoreError, PositionRun};
use wow_core::eventsourcing::GlobalPosition;
use wow_core::AggregateId;

use super::feed_cursor;
use crate::error::consumer_store_error as db_error;
use crate::store::clamp;
use crate::PostgresStore;

/// The positions of consumer `$1` in the aggregates of type `$2` whose (tenant, id) pairs are
/// `$3` and `$4` (two arrays of one length), those past version 0 only.
const POSITIONS: &str = "SELECT p.tenant_id, p.aggregate_id, p.version FROM consumer_position p
                 JOIN UNNEST($3::TEXT[], $4::TEXT[]) AS a(tenant_id, aggregate_id)
                   ON p.tenant_id = a.tenant_id AND p.aggregate_id = a.aggregate_id
                 WHERE p.consumer = $1 AND p.aggregate_name = $2 AND p.version > 0";

/// Records that consumer `$1` handled versions `$6` to `$5` of aggregate (`$2` tenant, `$3`
/// name, `$4` id). Order-free: what was handled (every version up to the position, with 0
/// standing for "before version 1", and the runs kept ahead) joined with the run; the
/// position is the version before the first gap, the rest is kept ahead. A row is created
/// at version 0 by a run past a gap. A run already handled writes nothing.
const ADVANCE_RUN: &str = "INSERT INTO consumer_position AS p (consumer, tenant_id, aggregate_name, aggregate_id, version, ahead)
                 VALUES ($1, $2, $3, $4,
                         CASE WHEN $6::BIGINT <= 1 THEN $5::BIGINT ELSE 0 END,
                         CASE WHEN $6::BIGINT <= 1 THEN '{}'::INT8MULTIRANGE ELSE INT8MULTIRANGE(INT8RANGE($6::BIGINT, $5::BIGINT + 1)) END)
                 ON CONFLICT (consumer, tenant_id, aggregate_name, aggregate_id) DO UPDATE SET (version, ahead) = (
                     SELECT LOWER(gaps) - 1, handled - INT8MULTIRANGE(INT8RANGE(0, LOWER(gaps)))
                     FROM (SELECT handled, '{[0,)}'::INT8MULTIRANGE - handled AS gaps
                           FROM (SELECT INT8MULTIRANGE(INT8RANGE(0, p.version + 1)) + p.ahead
                                        + INT8MULTIRANGE(INT8RANGE(GREATEST($6::BIGINT, 1), $5::BIGINT + 1)) AS handled) AS h) AS g)
                 WHERE NOT (INT8MULTIRANGE(INT8RANGE(0, p.version + 1)) + p.ahead) @> INT8RANGE(GREATEST($6::BIGINT, 1), $5::BIGINT + 1)";

/// Forgets every position of consumer `$1`.
const RESET: &str = "DELETE FROM consumer_position WHERE consumer = $1";

/// A parameter of [`ADVANCE_RUN`].
type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

/// The runs to write, in key order, so that two writers (two nodes around a partition move)
/// lock the rows they share in the same order and never deadlock. Empty runs are left out.
fn in_key_order<'r, 'a>(runs: &'r [PositionRun<'a>]) -> Vec<&'r PositionRun<'a>> {
    let mut runs: Vec<&PositionRun<'_>> = runs.iter().filter(|run| run.from <= run.to).collect();
    runs.sort_by(|a, b| (a.aggregate, a.consumer).cmp(&(b.aggregate, b.consumer)));
    runs
}

/// The parameters of [`ADVANCE_RUN`] for `run`, whose versions are `span` (from, to).
fn run_params<'a>(run: &'a PositionRun<'_>, (from, to): &'a (i64, i64)) -> [Param<'a>; 6] {
    let aggregate = &run.aggregate;
    [
        &run.consumer as Param<'_>,
        &aggregate.tenant_id,
        &aggregate.aggregate_name,
        &aggregate.id,
        to,
        from,
    ]
}

#[async_trait]
impl ConsumerPositions for PostgresStore {
    async fn positions(
        &self,
        consumer: &str,
        aggregates: &[AggregateId],
    ) -> Result<HashMap<AggregateId, u64>, ConsumerStoreError> {
        self.within(async {
            let Some(first) = aggregates.first() else {
                return Ok(HashMap::new());
            };
            let ids: Vec<&str> = aggregates.iter().map(|a| a.id.as_str()).collect();
            let tenants: Vec<&str> = aggregates.iter().map(|a| a.tenant_id.as_str()).collect();
            let client = self.downstream_client().await?;
            let rows = client
                .query(
                    POSITIONS,
                    &[&consumer, &first.aggregate_name, &tenants, &ids],
                )
                .await
                .map_err(db_error)?;
            // Every aggregate of one call is of one type (the trait's contract).
            Ok(rows
                .iter()
                .map(|row| {
                    let mut aggregate = first.clone();
                    aggregate.tenant_id = row.get::<_, String>(0);
                    aggregate.id = row.get::<_, String>(1);
                    (aggregate, u64::try_from(row.get::<_, i64>(2)).unwrap_or(0))
                })
                .collect())
        })
        .await
    }

    async fn advance_runs(&self, runs: &[PositionRun<'_>]) -> Result<(), ConsumerStoreError> {
        self.within(async {
            let mut client = self.downstream_client().await?;
            let transaction = client.transaction().await.map_err(db_error)?;
            let statement = transaction
                .prepare_cached(ADVANCE_RUN)
                .await
                .map_err(db_error)?;
            let runs = in_key_order(runs);
            let spans: Vec<(i64, i64)> = runs
                .iter()
                .map(|run| (clamp(run.from), clamp(run.to)))
                .collect();
            let params: Vec<[Param<'_>; 6]> = runs
                .iter()
                .zip(&spans)
                .map(|(run, span)| run_params(run, span))
                .collect();
            // Every run is sent at once (pipelined): one round trip for the batch.
            futures::future::try_join_all(
                params.iter().map(|p| transaction.execute(&statement, p)),
            )
            .await
            .map_err(db_error)?;
            transaction.commit().await.map_err(db_error)
        })
        .await
    }

    async fn reset(&self, consumer: &str) -> Result<(), ConsumerStoreError> {
        self.within(async {
            let client = self.downstream_client().await?;
            client
                .execute(RESET, &[&consumer])
                .await
                .map_err(db_error)?;
            Ok(())
        })
        .await
    }

    async fn feed_cursor(&self, reader: &str) -> Result<GlobalPosition, ConsumerStoreError> {
        self.within(async { feed_cursor::load(self, reader).await })
            .await
    }

    async fn save_feed_cursor(
        &self,
        reader: &str,
        position: GlobalPosition,
    ) -> Result<(), ConsumerStoreError> {
        self.within(async { feed_cursor::save(self, reader, position).await })
            .await
    }
}
