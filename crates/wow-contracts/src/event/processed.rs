//! Processed-message records: a consumer's effect and the record that it happened commit
//! together, so a redelivered message finds the record and changes nothing (SPEC DS-2).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use wow_model::error::BoxError;

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
/// A failure leaves both as they were: [`process_once`](Self::process_once) runs the work on
/// a copy of the state (for small states), [`process_once_staged`](Self::process_once_staged)
/// lets the work read the state and prepare a change that an infallible commit applies (for
/// states that grow with the data: its cost does not).
#[derive(Debug, Default)]
pub struct InMemoryProcessedMessages<S> {
    inner: Mutex<Records<S>>,
}

#[derive(Debug, Default)]
struct Records<S> {
    /// Message ids processed, by consumer.
    processed: HashMap<String, HashSet<String>>,
    state: S,
}

impl<S> Records<S> {
    fn contains(&self, consumer: &str, message_id: &str) -> bool {
        self.processed
            .get(consumer)
            .is_some_and(|ids| ids.contains(message_id))
    }

    fn record(&mut self, consumer: &str, message_id: &str) {
        match self.processed.get_mut(consumer) {
            Some(ids) => {
                ids.insert(message_id.to_owned());
            }
            None => {
                self.processed
                    .insert(consumer.to_owned(), HashSet::from([message_id.to_owned()]));
            }
        }
    }
}

impl<S: Clone> InMemoryProcessedMessages<S> {
    /// Records kept with `state`.
    pub fn new(state: S) -> Self {
        Self {
            inner: Mutex::new(Records {
                processed: HashMap::new(),
                state,
            }),
        }
    }

    /// Runs `work` on the state once per (`consumer`, `message_id`). The work runs on a copy
    /// of the whole state, which replaces it only when the work succeeds: use it for small
    /// states, and [`process_once_staged`](Self::process_once_staged) for the rest.
    pub fn process_once(
        &self,
        consumer: &str,
        message_id: &str,
        work: impl FnOnce(&mut S) -> Result<(), BoxError>,
    ) -> Result<Processed, ProcessError> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.contains(consumer, message_id) {
            return Ok(Processed::AlreadyProcessed);
        }
        let mut draft = inner.state.clone();
        work(&mut draft).map_err(ProcessError::Work)?;
        inner.state = draft;
        inner.record(consumer, message_id);
        Ok(Processed::Applied)
    }
}

impl<S> InMemoryProcessedMessages<S> {
    /// Once per (`consumer`, `message_id`): `stage` reads the state and prepares a change (or
    /// fails, and nothing is written), then `commit` applies it together with the record. No
    /// copy of the state is made, so the cost does not grow with the state's size.
    pub fn process_once_staged<C>(
        &self,
        consumer: &str,
        message_id: &str,
        stage: impl FnOnce(&S) -> Result<C, BoxError>,
        commit: impl FnOnce(&mut S, C),
    ) -> Result<Processed, ProcessError> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.contains(consumer, message_id) {
            return Ok(Processed::AlreadyProcessed);
        }
        let change = stage(&inner.state).map_err(ProcessError::Work)?;
        commit(&mut inner.state, change);
        inner.record(consumer, message_id);
        Ok(Processed::Applied)
    }

    /// Forgets every record of `consumer` and lets `clear` empty its part of the state, in
    /// one step (a rebuild).
    pub fn forget(&self, consumer: &str, clear: impl FnOnce(&mut S)) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.processed.remove(consumer);
        clear(&mut inner.state);
    }

    /// Reads the state.
    pub fn read<T>(&self, read: impl FnOnce(&S) -> T) -> T {
        read(&self.inner.lock().unwrap_or_else(|p| p.into_inner()).state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staged_change_is_applied_once_and_a_failed_stage_writes_nothing() {
        let store = InMemoryProcessedMessages::new(Vec::<u32>::new());
        let failed =
            store.process_once_staged("c", "m1", |_| Err::<u32, _>("no".into()), |s, n| s.push(n));
        assert!(matches!(failed, Err(ProcessError::Work(_))));
        assert_eq!(store.read(Vec::len), 0);
        let add = |s: &Vec<u32>| Ok(s.len() as u32 + 1);
        assert_eq!(
            store
                .process_once_staged("c", "m1", add, |s, n| s.push(n))
                .ok(),
            Some(Processed::Applied)
        );
        assert_eq!(
            store
                .process_once_staged("c", "m1", add, |s, n| s.push(n))
                .ok(),
            Some(Processed::AlreadyProcessed)
        );
        assert_eq!(
            store
                .process_once_staged("other", "m1", add, |s, n| s.push(n))
                .ok(),
            Some(Processed::Applied)
        );
        assert_eq!(store.read(Vec::clone), vec![1, 2]);
        store.forget("c", |_| {});
        assert_eq!(
            store
                .process_once_staged("c", "m1", add, |s, n| s.push(n))
                .ok(),
            Some(Processed::Applied)
        );
    }
}
