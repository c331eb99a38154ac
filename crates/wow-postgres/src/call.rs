//! Every store call within a deadline, and what the store's failures say about its
//! connections.
//!
//! A call of the command path or of a background loop ([`PostgresStore::within`]) that is
//! not answered within the deadline fails `Unavailable`: its outcome is unknown, the request
//! look-up decides it later. Dropping the call drops its work at whatever `await` it
//! waited on, so nothing of it is answered twice.
//!
//! A call that timed out, or failed because the server could not be reached, refused the
//! work as read-only (a standby, SQLSTATE 25006) or is shutting down, puts the store **in
//! doubt**: every pooled connection made before the call started is discarded at its next
//! checkout rather than handed out (the pool's `pre_recycle` hook asks
//! [`Watch::made_before_doubt`]). Why all of them and not only the failed one: after a
//! failover or a freeze, every connection to the old primary is in the same state, and each
//! would cost a caller a whole deadline to discover it. Connections made while the call ran
//! are kept: other calls made them on the store as it is now, and discarding them too would
//! have concurrent failures undo each other's reconnections. New connections walk the URL's hosts
//! again ([`crate::connect`]), so they find the new primary.
//!
//! The watch also logs the store's state for operators: one warning when calls start
//! failing (the store is lost, with the reason and its SQLSTATE), one line when a call is
//! answered again (the store is back, with how long it was lost).

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use wow_core::event::ConsumerStoreError;
use wow_core::eventsourcing::{EventStoreError, SnapshotStoreError};
use wow_core::view::ViewStoreError;

use crate::PostgresStore;

/// The call deadline, when the store was last in doubt, and whether it is lost now.
#[derive(Debug)]
pub(crate) struct Watch {
    deadline: Duration,
    state: Mutex<WatchState>,
}

/// What a [`Watch`] remembers.
#[derive(Debug, Default)]
struct WatchState {
    /// The last moment the store was in doubt: connections made before it are not used.
    doubted_at: Option<Instant>,
    /// Since when calls fail, if they do.
    lost_since: Option<Instant>,
}

impl Watch {
    /// A watch of calls bounded by `deadline`.
    pub(crate) fn new(deadline: Duration) -> Self {
        Self {
            deadline,
            state: Mutex::new(WatchState::default()),
        }
    }

    /// The deadline of one call.
    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Whether a connection made at `created` was made before the store's last doubt.
    pub(crate) fn made_before_doubt(&self, created: Instant) -> bool {
        self.lock()
            .doubted_at
            .is_some_and(|doubted| created < doubted)
    }

    /// Since when calls fail, `None` while they are answered.
    pub(crate) fn lost_since(&self) -> Option<Instant> {
        self.lock().lost_since
    }

    /// A call that started at `since` failed for `reason` in a way that puts the store in
    /// doubt: the connections made before `since` are not handed out again (those made
    /// since, by other calls, found the store as it is now), and the first failure after
    /// answers is logged.
    pub(crate) fn doubt(&self, since: Instant, reason: &dyn std::fmt::Display) {
        let now = Instant::now();
        let first = {
            let mut state = self.lock();
            state.doubted_at = Some(state.doubted_at.map_or(since, |at| at.max(since)));
            let first = state.lost_since.is_none();
            if first {
                state.lost_since = Some(now);
            }
            first
        };
        if first {
            tracing::warn!(
                reason = %reason,
                "PostgreSQL store lost: calls answer unavailable (503, outcome unknown) \
                 and connections are made afresh until it answers again"
            );
        }
    }

    /// A call was answered (a refusal is an answer too): the store is back if it was lost.
    pub(crate) fn answered(&self) {
        let lost = self.lock().lost_since.take();
        if let Some(since) = lost {
            tracing::warn!(
                lost_ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX),
                "PostgreSQL store back: calls are answered again"
            );
        }
    }

    /// The state, whatever a panicking holder left (it holds two instants).
    fn lock(&self) -> std::sync::MutexGuard<'_, WatchState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A store error a call can fail with: it can say that the call ran past its deadline, and
/// whether it puts the store in doubt.
pub(crate) trait CallError: std::fmt::Display + Sized {
    /// The call did not end within `deadline`; its outcome is unknown.
    fn past_deadline(deadline: Duration) -> Self;
    /// Whether this failure means the store could not be reached or used (rather than that
    /// it answered with a refusal).
    fn is_unavailable(&self) -> bool;
}

/// The error a deadline ends a call with, the source of each store's `Unavailable`.
#[derive(Debug, thiserror::Error)]
#[error("no answer from PostgreSQL within the call deadline of {} ms: the outcome is unknown", .0.as_millis())]
pub(crate) struct PastDeadline(pub(crate) Duration);

impl CallError for EventStoreError {
    fn past_deadline(deadline: Duration) -> Self {
        EventStoreError::Unavailable(Box::new(PastDeadline(deadline)))
    }

    fn is_unavailable(&self) -> bool {
        matches!(self, EventStoreError::Unavailable(_))
    }
}

impl CallError for SnapshotStoreError {
    fn past_deadline(deadline: Duration) -> Self {
        SnapshotStoreError::Unavailable(Box::new(PastDeadline(deadline)))
    }

    fn is_unavailable(&self) -> bool {
        matches!(self, SnapshotStoreError::Unavailable(_))
    }
}

impl CallError for ViewStoreError {
    fn past_deadline(deadline: Duration) -> Self {
        ViewStoreError::Unavailable(Box::new(PastDeadline(deadline)))
    }

    fn is_unavailable(&self) -> bool {
        matches!(self, ViewStoreError::Unavailable(_))
    }
}

impl CallError for ConsumerStoreError {
    fn past_deadline(deadline: Duration) -> Self {
        ConsumerStoreError::Unavailable(Box::new(PastDeadline(deadline)))
    }

    fn is_unavailable(&self) -> bool {
        matches!(self, ConsumerStoreError::Unavailable(_))
    }
}

impl PostgresStore {
    /// Runs `call` within the call deadline: its answer, or `Unavailable` past the deadline
    /// (the call dropped where it waited). Failures that put the store in doubt, and answers
    /// after them, go to the [`Watch`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future drops `call` where it waited, as the deadline does.
    pub(crate) async fn within<T, E: CallError>(
        &self,
        call: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let watch = &self.watch;
        let started = Instant::now();
        match tokio::time::timeout(watch.deadline(), call).await {
            Ok(Ok(answer)) => {
                watch.answered();
                Ok(answer)
            }
            Ok(Err(error)) => {
                if error.is_unavailable() {
                    watch.doubt(started, &error);
                } else {
                    watch.answered();
                }
                Err(error)
            }
            Err(_) => {
                let error = E::past_deadline(watch.deadline());
                watch.doubt(started, &error);
                Err(error)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_made_before_a_doubt_are_not_handed_out() {
        let watch = Watch::new(Duration::from_secs(1));
        let before = Instant::now();
        let call = before + Duration::from_millis(5);
        let during = call + Duration::from_millis(5);
        assert!(!watch.made_before_doubt(before));
        watch.doubt(call, &"SQLSTATE 25006");
        assert!(watch.made_before_doubt(before));
        assert!(!watch.made_before_doubt(during), "made while the call ran");
        assert!(watch.lost_since().is_some());
        // An older call's failure moves nothing back.
        watch.doubt(before, &"SQLSTATE 57P01");
        assert!(watch.made_before_doubt(call - Duration::from_millis(1)));
        watch.answered();
        assert!(watch.lost_since().is_none());
    }
}
