//! Table `external_effect`: the effect journal (`EffectJournal`), one row per (consumer,
//! effect key), so that an effect cut off after it started is confirmed by its key rather
//! than repeated.

use async_trait::async_trait;
use tokio_postgres::Row;
use wow_core::event::{ConsumerStoreError, EffectJournal, EffectState};

use crate::error::consumer_store_error as db_error;
use crate::PostgresStore;

/// Starts effect `$2` of consumer `$1` at `$3`, or counts one more attempt of a started one;
/// a done effect stays done. Returns the effect's status, attempts and first start.
const START_EFFECT: &str = "INSERT INTO external_effect (consumer, effect_key, status, attempts, first_started) VALUES ($1, $2, 'STARTED', 1, $3)
                 ON CONFLICT (consumer, effect_key) DO UPDATE SET attempts = external_effect.attempts + CASE WHEN external_effect.status = 'STARTED' THEN 1 ELSE 0 END
                 RETURNING status, attempts, first_started";

/// Marks effect `$2` of consumer `$1` done at `$3`, started or not.
const FINISH_EFFECT: &str = "INSERT INTO external_effect (consumer, effect_key, status, attempts, first_started, done_time) VALUES ($1, $2, 'DONE', 1, $3, $3)
                 ON CONFLICT (consumer, effect_key) DO UPDATE SET status = 'DONE', done_time = $3";

/// The status, attempts and first start of effect `$2` of consumer `$1`, if it started.
const EFFECT_STATE: &str = "SELECT status, attempts, first_started FROM external_effect WHERE consumer = $1 AND effect_key = $2";

/// Decodes `status, attempts, first_started`.
fn effect_state(row: &Row) -> EffectState {
    if row.get::<_, String>(0) == "DONE" {
        EffectState::Done
    } else {
        EffectState::Started {
            attempts: u32::try_from(row.get::<_, i32>(1)).unwrap_or(0),
            first_started: row.get(2),
        }
    }
}

#[async_trait]
impl EffectJournal for PostgresStore {
    async fn start(
        &self,
        consumer: &str,
        key: &str,
        now: i64,
    ) -> Result<EffectState, ConsumerStoreError> {
        self.within(async {
            let client = self.downstream_client().await?;
            let row = client
                .query_one(START_EFFECT, &[&consumer, &key, &now])
                .await
                .map_err(db_error)?;
            Ok(effect_state(&row))
        })
        .await
    }

    async fn finish(&self, consumer: &str, key: &str, now: i64) -> Result<(), ConsumerStoreError> {
        self.within(async {
            let client = self.downstream_client().await?;
            client
                .execute(FINISH_EFFECT, &[&consumer, &key, &now])
                .await
                .map_err(db_error)?;
            Ok(())
        })
        .await
    }

    async fn state(
        &self,
        consumer: &str,
        key: &str,
    ) -> Result<Option<EffectState>, ConsumerStoreError> {
        self.within(async {
            let client = self.downstream_client().await?;
            let row = client
                .query_opt(EFFECT_STATE, &[&consumer, &key])
                .await
                .map_err(db_error)?;
            Ok(row.as_ref().map(effect_state))
        })
        .await
    }
}
