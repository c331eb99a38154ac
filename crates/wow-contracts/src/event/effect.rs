//! Effects outside the database (SPEC DS-2): a side effect that cannot join the consumer's
//! transaction (an e-mail, a payment provider's API) is made recoverable instead.
//!
//! The pattern: record "started" under an idempotency key derived from the event id, call
//! the effect passing that key, record "done". A crash between the two leaves "started";
//! the next delivery of the event gets the same key and the [`EffectAttempt::resumed`]
//! state, so the effect can be confirmed with the outside system (by the key) or repeated
//! safely (the outside system deduplicates by the key). A "done" effect never runs again.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::event::ConsumerStoreError;
use wow_model::error::BoxError;

/// The state of one external effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectState {
    /// Started `attempts` times and never recorded done: the effect may or may not have
    /// happened.
    Started {
        /// How many times the effect was started, this time included.
        attempts: u32,
        /// When it was first started, in milliseconds since the Unix epoch.
        first_started: i64,
    },
    /// Done: it must not run again.
    Done,
}

/// The durable record of external effects, by consumer and idempotency key.
#[async_trait]
pub trait EffectJournal: Send + Sync + std::fmt::Debug {
    /// Records that `consumer` starts the effect `key` at `now`, and returns the state it
    /// is in now: `Started { attempts: 1 }` the first time, a higher count when an earlier
    /// start was never recorded done, or `Done` (the record is then unchanged).
    async fn start(
        &self,
        consumer: &str,
        key: &str,
        now: i64,
    ) -> Result<EffectState, ConsumerStoreError>;

    /// Records that the effect `key` of `consumer` is done.
    async fn finish(&self, consumer: &str, key: &str, now: i64) -> Result<(), ConsumerStoreError>;

    /// The state of the effect `key` of `consumer`, if it was ever started.
    async fn state(
        &self,
        consumer: &str,
        key: &str,
    ) -> Result<Option<EffectState>, ConsumerStoreError>;
}

/// The idempotency key of the effect `consumer` makes for the event `event_id`: the same on
/// every delivery, and different for every consumer.
pub fn effect_key(consumer: &str, event_id: &str) -> String {
    format!("{consumer}:{event_id}")
}

/// What the effect is told when it is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectAttempt {
    /// The idempotency key to pass to the outside system.
    pub key: String,
    /// `Some` when an earlier attempt started and was never recorded done (a crash, or an
    /// error): the effect may have happened, so confirm it by the key or repeat it with the
    /// key. `None` on the first attempt.
    pub resumed: Option<ResumedEffect>,
}

/// An earlier, unfinished attempt of the same effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumedEffect {
    /// How many attempts started before this one.
    pub earlier_attempts: u32,
    /// When the first one started, in milliseconds since the Unix epoch.
    pub first_started: i64,
}

/// What [`run_external_effect`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EffectOutcome<T> {
    /// The effect ran (or was confirmed) now and is recorded done.
    Done(T),
    /// An earlier delivery recorded it done; it did not run.
    AlreadyDone,
}

/// Why [`run_external_effect`] failed. The effect stays "started", so the next delivery
/// resumes it with the same key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EffectError {
    /// The effect failed.
    #[error("the external effect failed: {0}")]
    Effect(#[source] BoxError),
    /// The journal could not record the start or the end.
    #[error(transparent)]
    Journal(#[from] ConsumerStoreError),
}

/// Runs the external effect of `consumer` for the event `event_id` at most once to
/// completion: records it started, calls `effect` with its key (and the earlier attempt, if
/// one was left unfinished), and records it done when `effect` succeeds. A done effect does
/// not run again.
pub async fn run_external_effect<T, F, Fut>(
    journal: &dyn EffectJournal,
    consumer: &str,
    event_id: &str,
    now: i64,
    effect: F,
) -> Result<EffectOutcome<T>, EffectError>
where
    F: FnOnce(EffectAttempt) -> Fut,
    Fut: Future<Output = Result<T, BoxError>>,
{
    let key = effect_key(consumer, event_id);
    let resumed = match journal.start(consumer, &key, now).await? {
        EffectState::Done => return Ok(EffectOutcome::AlreadyDone),
        EffectState::Started { attempts: 1, .. } => None,
        EffectState::Started {
            attempts,
            first_started,
        } => Some(ResumedEffect {
            earlier_attempts: attempts - 1,
            first_started,
        }),
    };
    let value = effect(EffectAttempt {
        key: key.clone(),
        resumed,
    })
    .await
    .map_err(EffectError::Effect)?;
    journal.finish(consumer, &key, now).await?;
    Ok(EffectOutcome::Done(value))
}

/// The effect journal in memory: the reference for the durable versions.
#[derive(Debug, Default)]
pub struct InMemoryEffectJournal {
    effects: Mutex<HashMap<(String, String), EffectState>>,
}

impl InMemoryEffectJournal {
    /// An empty journal.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl EffectJournal for InMemoryEffectJournal {
    async fn start(
        &self,
        consumer: &str,
        key: &str,
        now: i64,
    ) -> Result<EffectState, ConsumerStoreError> {
        let mut effects = self.effects.lock().unwrap_or_else(|p| p.into_inner());
        let state = effects
            .entry((consumer.to_owned(), key.to_owned()))
            .and_modify(|state| {
                if let EffectState::Started { attempts, .. } = state {
                    *attempts += 1;
                }
            })
            .or_insert(EffectState::Started {
                attempts: 1,
                first_started: now,
            });
        Ok(*state)
    }

    async fn finish(&self, consumer: &str, key: &str, _now: i64) -> Result<(), ConsumerStoreError> {
        self.effects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((consumer.to_owned(), key.to_owned()), EffectState::Done);
        Ok(())
    }

    async fn state(
        &self,
        consumer: &str,
        key: &str,
    ) -> Result<Option<EffectState>, ConsumerStoreError> {
        Ok(self
            .effects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(consumer.to_owned(), key.to_owned()))
            .copied())
    }
}
