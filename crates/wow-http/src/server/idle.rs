//! The connections waiting for a request, so that at the connection limit a new connection
//! takes the place of the one that has waited longest instead of being refused while silent
//! sockets hold every place (SPEC TN-1: one peer's 1,100 idle sockets must not lock everyone
//! else out).
//!
//! A connection is idle from its accept until its first request, and again from the end of
//! each answer (its body dropped by hyper) until its next request. Only a connection idle for
//! at least [`EVICT_AFTER`] is given up: a client that connects sends its request at once, so
//! such a connection holds no request but a silent client's. Closing it is what the header
//! timeout does to it a little later anyway.

use std::collections::BTreeSet;

use foldhash::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Context;
use std::time::Duration;

use axum::BoxError;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::watched::Watch;

/// How long a connection must have waited for a request before a new connection may take its
/// place.
pub(crate) const EVICT_AFTER: Duration = Duration::from_secs(1);

/// The served connections, and since when each has waited for a request.
#[derive(Debug, Clone, Default)]
pub(crate) struct IdleConnections {
    registry: Arc<Mutex<Registry>>,
}

#[derive(Debug, Default)]
struct Registry {
    next_id: u64,
    /// The idle connections, longest idle first.
    waiting: BTreeSet<(Instant, u64)>,
    /// Every connection: where it stands, and how to tell it to close.
    connections: HashMap<u64, (State, Arc<Notify>)>,
    /// Every connection's peer, and how many connections each peer holds.
    peers: HashMap<u64, IpAddr>,
    held: HashMap<IpAddr, usize>,
}

/// Where a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for a request since then.
    Idle(Instant),
    /// In a request: its head read, its answer not yet written in full.
    Busy,
    /// Told to close, to give its place to a new connection.
    Evicted,
}

impl Registry {
    /// Moves `id` to `state`, keeping `waiting` in step.
    fn set(&mut self, id: u64, state: State) {
        let Some((old, _)) = self.connections.get_mut(&id) else {
            return;
        };
        let old = std::mem::replace(old, state);
        if let State::Idle(since) = old {
            self.waiting.remove(&(since, id));
        }
        if let State::Idle(since) = state {
            self.waiting.insert((since, id));
        }
    }
}

impl IdleConnections {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A new connection from `peer`, idle from now until its first request.
    pub(crate) fn track(&self, peer: IpAddr) -> Tracked {
        let mut registry = self.registry();
        let id = registry.next_id;
        registry.next_id += 1;
        registry.peers.insert(id, peer);
        *registry.held.entry(peer).or_default() += 1;
        let evicted = Arc::new(Notify::new());
        registry
            .connections
            .insert(id, (State::Busy, evicted.clone()));
        registry.set(id, State::Idle(Instant::now()));
        Tracked(Arc::new(TrackedInner {
            id,
            connections: self.clone(),
            evicted,
        }))
    }

    /// Tells the connection that has waited longest for a request, at least `after`, to
    /// close: `true` when there was one (its place frees once its task ends).
    pub(crate) fn evict_longest_idle(&self, after: Duration) -> bool {
        self.evict_first_idle(after, |_| true)
    }

    /// Tells `peer`'s connection that has waited longest for a request, at least `after`, to
    /// close: `true` when there was one.
    pub(crate) fn evict_longest_idle_of(&self, peer: IpAddr, after: Duration) -> bool {
        self.evict_first_idle(after, |of| of == Some(peer))
    }

    /// How many connections `peer` holds now.
    pub(crate) fn held_by(&self, peer: IpAddr) -> usize {
        self.registry().held.get(&peer).copied().unwrap_or(0)
    }

    fn evict_first_idle(&self, after: Duration, of: impl Fn(Option<IpAddr>) -> bool) -> bool {
        let mut registry = self.registry();
        let Some((since, id)) = registry
            .waiting
            .iter()
            .copied()
            .find(|(_, id)| of(registry.peers.get(id).copied()))
        else {
            return false;
        };
        if since.elapsed() < after {
            return false;
        }
        registry.set(id, State::Evicted);
        if let Some((_, evicted)) = registry.connections.get(&id) {
            evicted.notify_one();
        }
        true
    }

    /// How many connections wait for a request now.
    #[cfg(test)]
    pub(crate) fn idle(&self) -> usize {
        self.registry().waiting.len()
    }

    fn set(&self, id: u64, state: State) {
        self.registry().set(id, state);
    }

    fn in_request(&self, id: u64) -> bool {
        self.registry()
            .connections
            .get(&id)
            .is_some_and(|(state, _)| *state == State::Busy)
    }

    fn forget(&self, id: u64) {
        let mut registry = self.registry();
        registry.set(id, State::Busy);
        registry.connections.remove(&id);
        if let Some(peer) = registry.peers.remove(&id) {
            if let Some(held) = registry.held.get_mut(&peer) {
                *held = held.saturating_sub(1);
                if *held == 0 {
                    registry.held.remove(&peer);
                }
            }
        }
    }
}

/// One served connection's place in [`IdleConnections`]; forgotten when dropped.
#[derive(Debug, Clone)]
pub(crate) struct Tracked(Arc<TrackedInner>);

#[derive(Debug)]
struct TrackedInner {
    id: u64,
    connections: IdleConnections,
    evicted: Arc<Notify>,
}

impl Drop for TrackedInner {
    fn drop(&mut self) {
        self.connections.forget(self.id);
    }
}

impl Tracked {
    /// A request begins: the connection is busy until the returned guard is dropped (with
    /// the answer's body, once hyper has written it).
    pub(crate) fn busy(&self) -> Busy {
        self.0.connections.set(self.0.id, State::Busy);
        Busy(self.clone())
    }

    /// Notified when a new connection takes this one's place.
    pub(crate) fn evicted(&self) -> Arc<Notify> {
        self.0.evicted.clone()
    }

    /// Whether the connection is in a request now (checked again on eviction: a request that
    /// began meanwhile is never cut off).
    pub(crate) fn in_request(&self) -> bool {
        self.0.connections.in_request(self.0.id)
    }
}

/// A connection in a request; idle again when dropped.
#[derive(Debug)]
pub(crate) struct Busy(Tracked);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0
             .0
            .connections
            .set(self.0 .0.id, State::Idle(Instant::now()));
    }
}

/// An answer's body `Watched` by its [`Busy`] holds its connection busy until hyper has
/// written it (or dropped it).
impl Watch for Busy {
    /// Never: the body is only held, as it is, so that the connection stays busy.
    fn poll_stop(&mut self, _: &mut Context<'_>) -> Option<BoxError> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[tokio::test(start_paused = true)]
    async fn the_connection_idle_longest_gives_its_place_and_one_in_a_request_never_does() {
        let connections = IdleConnections::default();
        let first = connections.track(LOCAL);
        tokio::time::advance(Duration::from_millis(10)).await;
        let second = connections.track(LOCAL);
        assert!(
            !connections.evict_longest_idle(EVICT_AFTER),
            "no connection has been idle long enough"
        );
        tokio::time::advance(EVICT_AFTER).await;
        let busy = first.busy();
        assert!(connections.evict_longest_idle(EVICT_AFTER), "the second");
        assert!(!second.in_request());
        assert!(first.in_request());
        assert_eq!(connections.idle(), 0, "the first is in a request");
        assert!(
            !connections.evict_longest_idle(EVICT_AFTER),
            "an evicted connection is not picked twice, a busy one never"
        );
        drop(busy);
        assert_eq!(
            connections.idle(),
            1,
            "its answer written, the first waits again"
        );
        tokio::time::advance(EVICT_AFTER).await;
        assert!(connections.evict_longest_idle(EVICT_AFTER));
        drop(first);
        drop(second);
        assert_eq!(connections.idle(), 0);
        assert!(connections.registry().connections.is_empty(), "forgotten");
        assert_eq!(connections.held_by(LOCAL), 0, "forgotten");
    }

    const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    const OTHER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

    #[tokio::test(start_paused = true)]
    async fn a_peer_gives_up_only_its_own_idle_connection() {
        let connections = IdleConnections::default();
        let other = connections.track(OTHER);
        let _local = connections.track(LOCAL);
        let _also_local = connections.track(LOCAL);
        assert_eq!(
            (connections.held_by(LOCAL), connections.held_by(OTHER)),
            (2, 1)
        );
        tokio::time::advance(EVICT_AFTER).await;
        assert!(connections.evict_longest_idle_of(LOCAL, EVICT_AFTER));
        assert!(!other.in_request());
        assert_eq!(
            connections.idle(),
            2,
            "the other peer's connection still waits"
        );
        assert!(connections.evict_longest_idle_of(LOCAL, EVICT_AFTER));
        assert!(
            !connections.evict_longest_idle_of(LOCAL, EVICT_AFTER),
            "none of its own left to give up"
        );
        drop(other);
        assert_eq!(connections.held_by(OTHER), 0);
    }
}
