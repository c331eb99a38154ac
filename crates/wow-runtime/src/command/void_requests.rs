//! The gateway's exact record of the void commands it sent (SPEC RQ-12, ID-3).
//!
//! A void command leaves nothing in history, so only the gateway can tell its resend from a
//! fresh command, and the Bloom filter's "maybe seen" is no proof: a false positive would drop
//! a command never sent. So the gateway drops a void command only when this record holds its
//! exact (aggregate, request id), sent less than one window ago (the filter's TTL).
//!
//! The record is bounded: at most `capacity` entries; when full the oldest is forgotten, and
//! an entry is forgotten once its window has passed. Forgetting never drops anything: a
//! resend of a forgotten entry is delivered again (at least once), which is what void commands
//! promise anyway. A send that failed is forgotten too, so its retry goes out.
//!
//! Concurrency: one std mutex, held for a map look-up and insert, never across an await. Two
//! sends of one (aggregate, request id) at once may both be delivered (the gateway's check
//! comes before either is recorded), never both dropped.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use wow_core::AggregateId;

/// One void command: the aggregate it names and its request id, compared exactly.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Key {
    aggregate: AggregateId,
    request_id: String,
}

/// When an entry was sent, and which push onto the order queue made it (an older queue entry
/// of the same key must not evict a newer record).
#[derive(Debug, Clone, Copy)]
struct Sent {
    at: i64,
    seq: u64,
}

#[derive(Debug, Default)]
struct State {
    sent: HashMap<Arc<Key>, Sent>,
    /// Every record in the order it was made; its length bounds `sent`'s.
    order: VecDeque<(Arc<Key>, Sent)>,
    next_seq: u64,
}

impl State {
    /// Pops the front of the queue, removing its record unless a newer one replaced it.
    fn pop_oldest(&mut self) {
        if let Some((key, popped)) = self.order.pop_front() {
            if self
                .sent
                .get(&key)
                .is_some_and(|sent| sent.seq == popped.seq)
            {
                self.sent.remove(&key);
            }
        }
    }
}

/// The exact, bounded, time-windowed record of the void commands a gateway sent.
#[derive(Debug)]
pub(crate) struct VoidRequests {
    window: Duration,
    window_millis: i64,
    capacity: usize,
    state: Mutex<State>,
}

impl VoidRequests {
    /// A record that remembers each void command for `window`, and at most `capacity` of them.
    pub(crate) fn new(window: Duration, capacity: usize) -> Self {
        Self {
            window,
            window_millis: i64::try_from(window.as_millis()).unwrap_or(i64::MAX),
            capacity,
            state: Mutex::new(State::default()),
        }
    }

    /// How long after its send a void command's resend is dropped.
    pub(crate) fn window(&self) -> Duration {
        self.window
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether the void command of `request_id` on `aggregate` goes out at `now` (in
    /// milliseconds): `false` only when `maybe_seen` (the filter and history could not rule a
    /// resend out) and this record holds the same (aggregate, request id) sent less than a
    /// window before `now`. A command that goes out is recorded at `now`; a dropped one leaves
    /// the record as it was (the window runs from the send that was delivered).
    pub(crate) fn admit(
        &self,
        aggregate: &AggregateId,
        request_id: &str,
        now: i64,
        maybe_seen: bool,
    ) -> bool {
        let key = Arc::new(Key {
            aggregate: aggregate.clone(),
            request_id: request_id.to_owned(),
        });
        let mut state = self.state();
        while state
            .order
            .front()
            .is_some_and(|(_, sent)| now.saturating_sub(sent.at) >= self.window_millis)
        {
            state.pop_oldest();
        }
        let within_window = state
            .sent
            .get(&key)
            .is_some_and(|sent| now.saturating_sub(sent.at) < self.window_millis);
        if maybe_seen && within_window {
            return false;
        }
        let sent = Sent {
            at: now,
            seq: state.next_seq,
        };
        state.next_seq = state.next_seq.wrapping_add(1);
        state.sent.insert(key.clone(), sent);
        state.order.push_back((key, sent));
        while state.order.len() > self.capacity {
            state.pop_oldest();
        }
        true
    }

    /// Forgets the void command of `request_id` on `aggregate` (its send failed): its next
    /// send goes out.
    pub(crate) fn forget(&self, aggregate: &AggregateId, request_id: &str) {
        let key = Key {
            aggregate: aggregate.clone(),
            request_id: request_id.to_owned(),
        };
        self.state().sent.remove(&key);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.state().sent.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aggregate(id: &str) -> AggregateId {
        AggregateId::new("bank", "audit", id, "t")
    }

    fn record(capacity: usize) -> VoidRequests {
        VoidRequests::new(Duration::from_secs(60), capacity)
    }

    #[test]
    fn a_resend_within_the_window_is_dropped_only_when_the_filter_may_have_seen_it() {
        let record = record(8);
        assert!(record.admit(&aggregate("n1"), "r", 0, true), "never sent");
        assert!(!record.admit(&aggregate("n1"), "r", 59_999, true));
        assert!(
            record.admit(&aggregate("n1"), "r", 59_999, false),
            "the filter says new: sent"
        );
    }

    #[test]
    fn the_same_request_id_on_another_aggregate_goes_out() {
        let record = record(8);
        assert!(record.admit(&aggregate("n1"), "r", 0, true));
        assert!(record.admit(&aggregate("n2"), "r", 1, true));
        let mut other_tenant = aggregate("n1");
        other_tenant.tenant_id = "t2".into();
        assert!(record.admit(&other_tenant, "r", 2, true));
        assert!(!record.admit(&aggregate("n2"), "r", 3, true));
    }

    #[test]
    fn a_resend_after_the_window_goes_out_and_starts_a_new_one() {
        let record = record(8);
        assert!(record.admit(&aggregate("n1"), "r", 0, true));
        assert!(!record.admit(&aggregate("n1"), "r", 30_000, true));
        assert!(
            record.admit(&aggregate("n1"), "r", 60_000, true),
            "a dropped resend does not extend the window"
        );
        assert!(!record.admit(&aggregate("n1"), "r", 119_999, true));
        assert!(record.admit(&aggregate("n1"), "r", 120_000, true));
    }

    #[test]
    fn a_full_record_forgets_its_oldest_entry_which_then_goes_out_again() {
        let record = record(2);
        assert!(record.admit(&aggregate("a"), "r", 0, true));
        assert!(record.admit(&aggregate("b"), "r", 1, true));
        assert!(record.admit(&aggregate("c"), "r", 2, true));
        assert_eq!(record.len(), 2);
        assert!(
            record.admit(&aggregate("a"), "r", 3, true),
            "evicted: delivered again"
        );
        assert!(!record.admit(&aggregate("c"), "r", 4, true));
        assert!(record.len() <= 2);
    }

    #[test]
    fn expired_entries_leave_the_record() {
        let record = record(8);
        for id in ["a", "b", "c"] {
            assert!(record.admit(&aggregate(id), "r", 0, true));
        }
        assert!(record.admit(&aggregate("d"), "r", 60_000, true));
        assert_eq!(record.len(), 1);
    }

    #[test]
    fn a_forgotten_send_goes_out_again() {
        let record = record(8);
        assert!(record.admit(&aggregate("n1"), "r", 0, true));
        record.forget(&aggregate("n1"), "r");
        assert!(record.admit(&aggregate("n1"), "r", 1, true));
    }

    #[test]
    fn a_record_of_no_capacity_drops_nothing() {
        let record = record(0);
        assert!(record.admit(&aggregate("n1"), "r", 0, true));
        assert!(record.admit(&aggregate("n1"), "r", 1, true));
    }
}
