//! The downstream stores in the same schema as history, one module per table: consumer
//! positions and the global feed's cursors (`ConsumerPositions`), the effect journal
//! (`EffectJournal`), compensation records (`CompensationStore`) and the lanes of parked
//! streams (`ParkedStreams`).
//!
//! Why in the same schema as history: one URL opens everything a node needs, and a
//! consumer's position can be written in the transaction of the work it records.

mod consumer_position;
mod execution_failed;
mod external_effect;
mod feed_cursor;
mod parked_lane;

use wow_core::event::ConsumerStoreError;

use crate::error::consumer_store_error as db_error;
use crate::PostgresStore;

/// `error` of ours (a row this build cannot read, a value it cannot write), as
/// [`ConsumerStoreError::Internal`].
fn internal(error: impl Into<wow_core::eventsourcing::BoxError>) -> ConsumerStoreError {
    ConsumerStoreError::Internal(error.into())
}

impl PostgresStore {
    /// A connection of the pool, its failure a [`ConsumerStoreError`].
    async fn downstream_client(&self) -> Result<deadpool_postgres::Object, ConsumerStoreError> {
        self.pool().get().await.map_err(|error| match error {
            deadpool_postgres::PoolError::Backend(error) => db_error(error),
            other => ConsumerStoreError::Unavailable(Box::new(other)),
        })
    }
}
