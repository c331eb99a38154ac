//! Table `external_effect`: the effect journal (`EffectJournal`), one row per (consumer,
//! effect key), so that an effect cut off after it started is confirmed by its key rather
//! than repeated.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};
use wow_core::event::{ConsumerStoreError, EffectJournal, EffectState};

use crate::SqliteStore;

/// Starts effect `?2` of consumer `?1` at `?3`, or counts one more attempt of a started one;
/// a done effect stays done. Returns the effect's status, attempts and first start.
const START_EFFECT: &str = "INSERT INTO external_effect (consumer, effect_key, status, attempts, first_started) VALUES (?1, ?2, 'STARTED', 1, ?3)
    ON CONFLICT (consumer, effect_key) DO UPDATE SET attempts = attempts + (status = 'STARTED')
    RETURNING status, attempts, first_started";

/// Marks effect `?2` of consumer `?1` done at `?3`, started or not.
const FINISH_EFFECT: &str = "INSERT INTO external_effect (consumer, effect_key, status, attempts, first_started, done_time) VALUES (?1, ?2, 'DONE', 1, ?3, ?3)
    ON CONFLICT (consumer, effect_key) DO UPDATE SET status = 'DONE', done_time = ?3";

/// The status, attempts and first start of effect `?2` of consumer `?1`, if it started.
const EFFECT_STATE: &str = "SELECT status, attempts, first_started FROM external_effect WHERE consumer = ?1 AND effect_key = ?2";

/// The state of an effect from its `status, attempts, first_started`.
fn effect_state(status: &str, attempts: i64, first_started: i64) -> EffectState {
    if status == "DONE" {
        EffectState::Done
    } else {
        EffectState::Started {
            attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
            first_started,
        }
    }
}

#[async_trait]
impl EffectJournal for SqliteStore {
    async fn start(
        &self,
        consumer: &str,
        key: &str,
        now: i64,
    ) -> Result<EffectState, ConsumerStoreError> {
        let (consumer, key) = (consumer.to_owned(), key.to_owned());
        self.write(move |connection| {
            let (status, attempts, first_started): (String, i64, i64) =
                connection.query_row(START_EFFECT, params![consumer, key, now], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })?;
            Ok(effect_state(&status, attempts, first_started))
        })
        .await
    }

    async fn finish(&self, consumer: &str, key: &str, now: i64) -> Result<(), ConsumerStoreError> {
        let (consumer, key) = (consumer.to_owned(), key.to_owned());
        self.write(move |connection| {
            connection.execute(FINISH_EFFECT, params![consumer, key, now])?;
            Ok(())
        })
        .await
    }

    async fn state(
        &self,
        consumer: &str,
        key: &str,
    ) -> Result<Option<EffectState>, ConsumerStoreError> {
        let (consumer, key) = (consumer.to_owned(), key.to_owned());
        self.read_rows(move |connection| {
            connection
                .query_row(EFFECT_STATE, params![consumer, key], |row| {
                    Ok(effect_state(
                        &row.get::<_, String>(0)?,
                        row.get(1)?,
                        row.get(2)?,
                    ))
                })
                .optional()
        })
        .await
    }
}
