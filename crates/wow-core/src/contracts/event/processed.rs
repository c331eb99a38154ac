//! Processed-message records: a consumer's effect and the record that it happened commit
//! together, so a redelivered message finds the record and changes nothing (SPEC DS-2).

use std::collections::HashSet;
use std::sync::Mutex;

use crate::model::error::BoxError;

/// What [`process_once`](InMemoryProcessedMessages::process_once) did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Processed {
    /// The work ran and its record was written, in one transaction.
    Applied,
    /// The record was there: the message was processed before; the work did not run.
    AlreadyProcessed,
}

/// Why a message was not processed. In every case nothing of it was written: neither the
/// work's writes nor the record, so a later delivery runs it again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError {
    /// The consumer's work failed (or panicked).
    #[error("the consumer's work failed: {0}")]
    Work(#[source] BoxError),
    /// The store could not be reached or failed.
    #[error("the store failed: {0}")]
    Store(#[source] BoxError),
}

/// Processed-message records in memory, with the consumer's own state beside them under one
/// lock: the reference for the durable versions, which keep both in one database.
///
/// The work runs on a copy of the state; the copy replaces the state together with the
/// record only when the work succeeds, so a failure leaves both as they were.
#[derive(Debug, Default)]
pub struct InMemoryProcessedMessages<S> {
    inner: Mutex<(HashSet<(String, String)>, S)>,
}

impl<S: Clone> InMemoryProcessedMessages<S> {
    /// Records kept with `state`.
    pub fn new(state: S) -> Self {
        Self {
            inner: Mutex::new((HashSet::new(), state)),
        }
    }

    /// Runs `work` on the state once per (`consumer`, `message_id`).
    pub fn process_once(
        &self,
        consumer: &str,
        message_id: &str,
        work: impl FnOnce(&mut S) -> Result<(), BoxError>,
    ) -> Result<Processed, ProcessError> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let key = (consumer.to_owned(), message_id.to_owned());
        if inner.0.contains(&key) {
            return Ok(Processed::AlreadyProcessed);
        }
        let mut draft = inner.1.clone();
        work(&mut draft).map_err(ProcessError::Work)?;
        inner.1 = draft;
        inner.0.insert(key);
        Ok(Processed::Applied)
    }

    /// Forgets every record of `consumer` and lets `clear` empty its part of the state, in
    /// one step (a rebuild).
    pub fn forget(&self, consumer: &str, clear: impl FnOnce(&mut S)) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.0.retain(|(name, _)| name != consumer);
        clear(&mut inner.1);
    }

    /// Reads the state.
    pub fn read<T>(&self, read: impl FnOnce(&S) -> T) -> T {
        read(&self.inner.lock().unwrap_or_else(|p| p.into_inner()).1)
    }
}
