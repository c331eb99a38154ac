//! The fence of one lease: the local deadline a partition worker obeys.
//!
//! A fence is valid while its lease is neither ended (released, lost to a writer, expired)
//! nor past its local deadline. It enforces the deadline by itself, by reading the clock: a
//! worker whose keeper has crashed, hung or lost its connection still sees the fence go
//! invalid at the deadline, because nothing has to happen for time to pass.
//!
//! Once invalid, a fence stays invalid: a renewal that arrives after the deadline does not
//! revive it (the keeper opens a new lease, with a new fence, if it wins the key again).

use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

/// What a fence's holders see: the current deadline and whether the lease has ended.
#[derive(Debug, Clone, Copy)]
struct FenceState {
    valid_until: Instant,
    ended: bool,
}

/// The fence of one partition lease held by this node.
///
/// Clones share one lease. A partition worker checks [`Fence::is_valid`] before each effect
/// it produces for the partition (an append, a publish) and stops when [`Fence::lost`]
/// resolves. It is the worker's part of the fencing rule: the keeper guarantees that no other
/// node can acquire the partition until the configured margin after this fence went invalid.
/// The one exception is a foreign write on the key, which the keeper cannot prevent and ends
/// the fence as soon as it sees it (see [`PartitionLeases`](crate::PartitionLeases)).
///
/// Two fences are equal when they are clones of the same lease.
#[derive(Debug, Clone)]
pub struct Fence {
    partition: u32,
    acquired_at: Instant,
    state: Arc<watch::Sender<FenceState>>,
}

impl PartialEq for Fence {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }
}

impl Eq for Fence {}

impl Fence {
    /// A fence for a lease whose acquire request was sent at `acquired_at`, valid until
    /// `valid_until`.
    pub(crate) fn new(partition: u32, acquired_at: Instant, valid_until: Instant) -> Self {
        let (state, _) = watch::channel(FenceState {
            valid_until,
            ended: false,
        });
        Self {
            partition,
            acquired_at,
            state: Arc::new(state),
        }
    }

    /// The partition this lease is for.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The local instant the successful acquire request was sent: the lease cannot have begun
    /// on the server before it.
    pub fn acquired_at(&self) -> Instant {
        self.acquired_at
    }

    /// The local instant this lease stops being valid unless renewed; each successful renewal
    /// moves it later, never earlier.
    pub fn valid_until(&self) -> Instant {
        self.state.borrow().valid_until
    }

    /// Whether the partition may still be handled: the lease has not ended and its deadline
    /// has not passed. Once false, it stays false.
    pub fn is_valid(&self) -> bool {
        let state = *self.state.borrow();
        !state.ended && Instant::now() < state.valid_until
    }

    /// Resolves once the fence is invalid: at once if it already is, else at the deadline
    /// (unless renewed by then) or when the keeper ends the lease, whichever comes first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads the fence.
    pub async fn lost(&self) {
        let mut changes = self.state.subscribe();
        loop {
            let state = *changes.borrow_and_update();
            if state.ended || Instant::now() >= state.valid_until {
                self.end();
                return;
            }
            tokio::select! {
                _ = changes.changed() => {}
                _ = sleep_until(state.valid_until) => {}
            }
        }
    }

    /// Moves the deadline to `valid_until` if the fence is still valid; returns whether it was.
    /// A fence found past its deadline is ended here, so it never comes back.
    pub(crate) fn extend(&self, valid_until: Instant) -> bool {
        let now = Instant::now();
        let mut valid = false;
        self.state.send_if_modified(|state| {
            if state.ended {
                false
            } else if now >= state.valid_until {
                state.ended = true;
                true
            } else {
                valid = true;
                if valid_until > state.valid_until {
                    state.valid_until = valid_until;
                    true
                } else {
                    false
                }
            }
        });
        valid
    }

    /// Ends the lease now: the fence is invalid from here on and [`Fence::lost`] resolves.
    pub(crate) fn end(&self) {
        self.state
            .send_if_modified(|state| !std::mem::replace(&mut state.ended, true));
    }
}
