//! Table `parked_lane`: the open lanes of parked streams (`ParkedStreams`, SPEC DS-5), one
//! row per (consumer, aggregate) held back, with its failed version and the highest version
//! parked behind it.
//!
//! Every change is one statement, so a `park` and a `release` of the same lane are ordered
//! by the row's lock: a release closes the lane only when nothing was parked past what it
//! delivered.

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
use wow_core::event::{ConsumerStoreError, ParkedLane, ParkedStreams};
use wow_core::AggregateId;

use crate::error::consumer_store_error as db_error;
use crate::store::clamp;
use crate::PostgresStore;

/// The columns of a lane, in the order [`decode_lane`] reads them.
macro_rules! lane_columns {
    () => {
        "consumer, tenant_id, context_name, aggregate_name, aggregate_id, head_version, parked_through, since"
    };
}

/// Opens the lane of consumer `$1` on aggregate (`$2` tenant, `$3` context, `$4` name, `$5`
/// id) at version `$6`, since `$7`, and returns it; an open lane takes `$6` as its head and
/// keeps what is parked behind it.
const HOLD: &str = concat!(
    "INSERT INTO parked_lane (consumer, tenant_id, context_name, aggregate_name, aggregate_id, head_version, parked_through, since)
    VALUES ($1, $2, $3, $4, $5, $6, $6, $7)
    ON CONFLICT (consumer, tenant_id, context_name, aggregate_name, aggregate_id)
    DO UPDATE SET head_version = EXCLUDED.head_version, parked_through = GREATEST(parked_lane.parked_through, EXCLUDED.head_version)
    RETURNING ",
    lane_columns!()
);

/// Parks version `$6` behind the open lane of consumer `$1` on aggregate (`$2` to `$5`): one
/// row changed when a lane is open, none otherwise.
const PARK: &str = "UPDATE parked_lane SET parked_through = GREATEST(parked_through, $6) WHERE consumer = $1 AND tenant_id = $2 AND context_name = $3 AND aggregate_name = $4 AND aggregate_id = $5";

/// Closes the lane of consumer `$1` on aggregate (`$2` to `$5`) when nothing is parked past
/// `$6`: one row deleted then, none otherwise.
const RELEASE: &str = "DELETE FROM parked_lane WHERE consumer = $1 AND tenant_id = $2 AND context_name = $3 AND aggregate_name = $4 AND aggregate_id = $5 AND parked_through <= $6";

/// The lane of consumer `$1` on aggregate (`$2` to `$5`), if one is open.
const LANE: &str = concat!(
    "SELECT ",
    lane_columns!(),
    " FROM parked_lane WHERE consumer = $1 AND tenant_id = $2 AND context_name = $3 AND aggregate_name = $4 AND aggregate_id = $5"
);

/// Every open lane, of consumer `$1` when not NULL, oldest first.
const LANES: &str = concat!(
    "SELECT ",
    lane_columns!(),
    " FROM parked_lane WHERE ($1::TEXT IS NULL OR consumer = $1) ORDER BY since, consumer, tenant_id, aggregate_name, aggregate_id"
);

/// Decodes the columns of [`lane_columns`].
fn decode_lane(row: &Row) -> ParkedLane {
    ParkedLane {
        consumer: row.get(0),
        aggregate_id: AggregateId {
            tenant_id: row.get(1),
            context_name: row.get(2),
            aggregate_name: row.get(3),
            id: row.get(4),
        },
        head_version: u64::try_from(row.get::<_, i64>(5)).unwrap_or(0),
        parked_through: u64::try_from(row.get::<_, i64>(6)).unwrap_or(0),
        since: row.get(7),
    }
}

impl PostgresStore {
    /// Runs `statement` (one of [`PARK`], [`RELEASE`]) on the lane of `consumer` on
    /// `aggregate` with `version` and says whether it changed a row.
    async fn change_lane(
        &self,
        statement: &str,
        consumer: &str,
        aggregate: &AggregateId,
        version: u64,
    ) -> Result<bool, ConsumerStoreError> {
        self.within(async {
            let client = self.downstream_client().await?;
            let changed = client
                .execute(
                    statement,
                    &[
                        &consumer,
                        &aggregate.tenant_id,
                        &aggregate.context_name,
                        &aggregate.aggregate_name,
                        &aggregate.id,
                        &clamp(version),
                    ],
                )
                .await
                .map_err(db_error)?;
            Ok(changed > 0)
        })
        .await
    }

    /// The lanes `sql` (one of [`LANE`], [`LANES`]) reads with `values`.
    async fn select_lanes(
        &self,
        sql: &str,
        values: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<ParkedLane>, ConsumerStoreError> {
        self.within(async {
            let client = self.downstream_client().await?;
            let rows = client.query(sql, values).await.map_err(db_error)?;
            Ok(rows.iter().map(decode_lane).collect())
        })
        .await
    }
}

#[async_trait]
impl ParkedStreams for PostgresStore {
    async fn hold(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
        version: u64,
        now: i64,
    ) -> Result<ParkedLane, ConsumerStoreError> {
        self.within(async {
            let client = self.downstream_client().await?;
            let row = client
                .query_one(
                    HOLD,
                    &[
                        &consumer,
                        &aggregate.tenant_id,
                        &aggregate.context_name,
                        &aggregate.aggregate_name,
                        &aggregate.id,
                        &clamp(version),
                        &now,
                    ],
                )
                .await
                .map_err(db_error)?;
            Ok(decode_lane(&row))
        })
        .await
    }

    async fn park(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
        version: u64,
    ) -> Result<bool, ConsumerStoreError> {
        self.change_lane(PARK, consumer, aggregate, version).await
    }

    async fn release(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
        through: u64,
    ) -> Result<bool, ConsumerStoreError> {
        self.change_lane(RELEASE, consumer, aggregate, through)
            .await
    }

    async fn lane(
        &self,
        consumer: &str,
        aggregate: &AggregateId,
    ) -> Result<Option<ParkedLane>, ConsumerStoreError> {
        let mut found = self
            .select_lanes(
                LANE,
                &[
                    &consumer,
                    &aggregate.tenant_id,
                    &aggregate.context_name,
                    &aggregate.aggregate_name,
                    &aggregate.id,
                ],
            )
            .await?;
        Ok(found.pop())
    }

    async fn lanes(&self, consumer: Option<&str>) -> Result<Vec<ParkedLane>, ConsumerStoreError> {
        self.select_lanes(LANES, &[&consumer]).await
    }
}
