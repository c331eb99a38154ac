//! The downstream stores in the same file as history, one module per table: consumer
//! positions and the global feed's cursors (`ConsumerPositions`), the effect journal
//! (`EffectJournal`), compensation records (`CompensationStore`) and the lanes of parked
//! streams (`ParkedStreams`).
//!
//! Why in the same file as history: one path opens everything a node needs, and a consumer's
//! position can be written in the writer's transaction of the work it records. Writes go
//! through the writer, reads run on the read pool.

mod consumer_position;
mod execution_failed;
mod external_effect;
mod feed_cursor;
mod parked_lane;

use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use wow_core::event::{ConsumerStoreError, ProcessError};
use wow_core::eventsourcing::BoxError;

use crate::SqliteStore;

/// `error` of ours (a row this build cannot read, a value it cannot write), as
/// [`ConsumerStoreError::Internal`].
fn internal(error: impl Into<BoxError>) -> ConsumerStoreError {
    ConsumerStoreError::Internal(error.into())
}

impl SqliteStore {
    /// Runs `work` in the writer's transaction and returns what it made.
    async fn write<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, BoxError> + Send + 'static,
    ) -> Result<T, ConsumerStoreError> {
        let made = Arc::new(Mutex::new(None));
        let slot = made.clone();
        self.transact(move |connection| {
            let value = work(connection)?;
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
            Ok(())
        })
        .await
        .map_err(|error| match error {
            ProcessError::Store(error) => ConsumerStoreError::Unavailable(error),
            other => internal(other),
        })?;
        let value = made.lock().unwrap_or_else(|p| p.into_inner()).take();
        value.ok_or_else(|| internal("the writer ran no work"))
    }

    /// Runs `read` on a read-only connection of the pool.
    async fn read_rows<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, ConsumerStoreError> {
        self.read(read).await.map_err(ConsumerStoreError::Internal)
    }
}
