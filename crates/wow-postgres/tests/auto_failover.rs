//! Failovers under load on a pg_auto_failover formation of the test's own (a monitor, a
//! primary and its synchronous standby, on ports of their own): a switchover, and a primary
//! frozen whole (as a hung machine). Eight writers append through the multi-host URL and
//! resolve every unknown outcome as the docs tell a caller to (look the request up; resend
//! it, with its request id, only when no decision is recorded).
//!
//! Asserted: nothing acknowledged is lost or doubled (each aggregate's history is exactly its
//! acknowledged streams, versions without a gap), no look-up answers `APPENDED` for a stream
//! the failover lost, and the store serves again within 2 s of the new primary taking writes
//! (frozen: within the call deadline and 2 s). Each test prints the seconds without
//! acknowledgements. Skips loudly without pg_auto_failover (fails under
//! `WOW_REQUIRE_BACKENDS=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wow_core::eventsourcing::{EventStoreError, History, RequestDecision, RequestLog};

use support::formation::Formation;
use wow_core::AggregateId;
use wow_postgres::{PostgresOptions, PostgresStore};
use wow_tck::fixtures::{aggregate, stream};

const WRITERS: usize = 8;
const DEADLINE: Duration = Duration::from_secs(3);

/// The acknowledgements: when, and which (aggregate id, version, request id).
type Acks = Arc<Mutex<Vec<(Instant, String, u64, String)>>>;

/// Appends stream after stream to `aggregate` until `stop`, each acknowledged only when
/// appended or looked up as appended; an unknown outcome is looked up until the look-up
/// answers, and resent with its request id only on "no decision".
async fn write(store: PostgresStore, aggregate: AggregateId, stop: Arc<AtomicBool>, acks: Acks) {
    let mut version = 1;
    while !stop.load(Ordering::Relaxed) {
        let request_id = format!("{}-{version}", aggregate.id);
        let appended_at = loop {
            match store
                .append(&stream(&aggregate, version, &request_id))
                .await
            {
                Ok(()) => break version,
                Err(EventStoreError::Unavailable(_) | EventStoreError::DuplicateRequestId(_)) => {}
                Err(other) => panic!("append {request_id}: {other:?}"),
            }
            // The outcome is unknown (or decided before): the look-up decides.
            let decided = loop {
                match store.find_decision(&aggregate, &request_id).await {
                    Ok(Some(RequestDecision::Appended(record))) => break Some(record.version),
                    Ok(None) => break None,
                    Ok(Some(other)) => panic!("{request_id} decided as {other:?}"),
                    Err(EventStoreError::Unavailable(_)) => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(other) => panic!("look-up of {request_id}: {other:?}"),
                }
            };
            if let Some(at) = decided {
                break at;
            }
        };
        assert_eq!(appended_at, version, "{request_id} appended elsewhere");
        acks.lock()
            .unwrap()
            .push((Instant::now(), aggregate.id.clone(), version, request_id));
        version += 1;
    }
}

/// The writers and what they acknowledged.
struct Load {
    stop: Arc<AtomicBool>,
    acks: Acks,
    writers: Vec<tokio::task::JoinHandle<()>>,
    aggregates: Vec<AggregateId>,
}

impl Load {
    fn start(store: &PostgresStore) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let acks = Acks::default();
        let aggregates: Vec<_> = (0..WRITERS).map(|_| aggregate()).collect();
        let writers = aggregates
            .iter()
            .map(|aggregate| {
                tokio::spawn(write(
                    store.clone(),
                    aggregate.clone(),
                    stop.clone(),
                    acks.clone(),
                ))
            })
            .collect();
        Self {
            stop,
            acks,
            writers,
            aggregates,
        }
    }

    /// How many acknowledgements so far.
    fn count(&self) -> usize {
        self.acks.lock().unwrap().len()
    }

    /// Stops the writers (each resolves what it sent) and checks every history against
    /// the acknowledgements. The acknowledgements, in time order.
    async fn finish(self, store: &PostgresStore) -> Vec<(Instant, String, u64, String)> {
        self.stop.store(true, Ordering::Relaxed);
        for writer in self.writers {
            tokio::time::timeout(Duration::from_secs(20), writer)
                .await
                .expect("every writer resolves its last stream")
                .expect("no writer failed");
        }
        let acks = self.acks.lock().unwrap().clone();
        let mut acknowledged: BTreeMap<&str, Vec<(u64, &str)>> = BTreeMap::new();
        for (_, id, version, request_id) in &acks {
            acknowledged
                .entry(id.as_str())
                .or_default()
                .push((*version, request_id.as_str()));
        }
        for aggregate in &self.aggregates {
            let history = store.load(aggregate, 1, u64::MAX).await.unwrap();
            let found: Vec<_> = history
                .iter()
                .map(|s| (s.version, s.request_id.as_str()))
                .collect();
            let expected = acknowledged
                .remove(aggregate.id.as_str())
                .unwrap_or_default();
            assert_eq!(
                found, expected,
                "the history of {} is exactly its acknowledged streams",
                aggregate.id
            );
        }
        acks
    }
}

/// The longest time without an acknowledgement from `from` on, and the first
/// acknowledgement after `writable` (how long after it).
fn gaps(
    acks: &[(Instant, String, u64, String)],
    from: Instant,
    writable: Instant,
) -> (Duration, Duration) {
    let times: Vec<_> = acks.iter().map(|a| a.0).filter(|t| *t >= from).collect();
    let longest = std::iter::once(from)
        .chain(times.iter().copied())
        .zip(times.iter().copied())
        .map(|(a, b)| b.saturating_duration_since(a))
        .max()
        .unwrap_or_default();
    let after = times
        .iter()
        .find(|t| **t >= writable)
        .map(|t| t.saturating_duration_since(writable))
        .unwrap_or(Duration::MAX);
    (longest, after)
}

/// When the node at `url` first commits a write (polled every 20 ms, each try bounded by
/// 500 ms), within `patience`: out of recovery is not enough, since a commit there still
/// waits for a synchronous standby until the formation stops asking for one.
async fn writable(url: &str, patience: Duration) -> Instant {
    let deadline = Instant::now() + patience;
    loop {
        let answer = tokio::time::timeout(Duration::from_millis(500), async {
            let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .ok()?;
            let task = tokio::spawn(connection);
            let committed = client
                .batch_execute(
                    "CREATE TABLE IF NOT EXISTS wow_probe (at BIGINT); \
                     INSERT INTO wow_probe VALUES (1)",
                )
                .await
                .is_ok();
            drop(client);
            let _ = task.await;
            Some(committed)
        })
        .await;
        if let Ok(Some(true)) = answer {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "{url} never took writes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn open(formation: &Formation) -> PostgresStore {
    // Each host has 1 s to set up a connection, well inside the call deadline, so that a
    // walk past a frozen host ends within one call.
    let url = format!("{}&connect_timeout=1", formation.url());
    PostgresStore::open(
        url.parse::<PostgresOptions>()
            .unwrap()
            .schema("failover_load")
            .max_connections(WRITERS + 4)
            .call_timeout(DEADLINE),
    )
    .await
    .expect("the store opens on the formation")
}

/// Waits until the writers acknowledged `more` streams more than now.
async fn until_acknowledged(load: &Load, more: usize) {
    let target = load.count() + more;
    let deadline = Instant::now() + Duration::from_secs(20);
    while load.count() < target {
        assert!(Instant::now() < deadline, "the writers stalled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switchover_under_load_loses_and_doubles_nothing_and_serves_again_within_2_s() {
    let Some(formation) = Formation::start().await else {
        return;
    };
    let store = open(&formation).await;
    let load = Load::start(&store);
    until_acknowledged(&load, 200).await;

    let started = Instant::now();
    let node_2 = formation.node_url(2);
    let promoted = tokio::spawn(async move { writable(&node_2, Duration::from_secs(30)).await });
    let formation = tokio::task::spawn_blocking(move || {
        formation.switchover();
        formation
    })
    .await
    .unwrap();
    let writable_at = promoted.await.unwrap();
    until_acknowledged(&load, 200).await;
    let acks = load.finish(&store).await;

    let (longest, after) = gaps(&acks, started, writable_at);
    println!(
        "switchover: {} acknowledged; longest time without acknowledgements {:.2} s; \
         first acknowledgement {:.2} s after the new primary took writes",
        acks.len(),
        longest.as_secs_f64(),
        after.as_secs_f64()
    );
    assert!(
        after < Duration::from_secs(2),
        "served again {after:?} after the new primary took writes"
    );
    drop(formation);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_primary_under_load_loses_and_doubles_nothing_and_serves_again_past_the_deadline()
{
    let Some(formation) = Formation::start().await else {
        return;
    };
    let store = open(&formation).await;
    let load = Load::start(&store);
    until_acknowledged(&load, 200).await;

    let started = Instant::now();
    formation.freeze(1);
    let writable_at = writable(&formation.node_url(2), Duration::from_secs(40)).await;
    until_acknowledged(&load, 200).await;
    // Checked on the new primary while the old one is still frozen.
    let acks = load.finish(&store).await;
    formation.thaw(1);

    let (longest, after) = gaps(&acks, started, writable_at);
    println!(
        "frozen primary: {} acknowledged; longest time without acknowledgements {:.2} s \
         (the new primary took writes {:.2} s after the freeze); first acknowledgement \
         {:.2} s after it took writes",
        acks.len(),
        longest.as_secs_f64(),
        writable_at.saturating_duration_since(started).as_secs_f64(),
        after.as_secs_f64()
    );
    assert!(
        after < DEADLINE + Duration::from_secs(2),
        "served again {after:?} after the new primary took writes"
    );
}
