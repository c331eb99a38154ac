//! Partition leases against a real NATS server (`WOW_TEST_NATS_URL`, default
//! `nats://127.0.0.1:4222`). Without a reachable server a test says `SKIPPED` on stderr and
//! passes, unless `WOW_REQUIRE_BACKENDS=1`. Each test uses its own bucket and deletes it at the end.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_nats::jetstream;
use tokio::sync::watch;
use tokio::time::{timeout, timeout_at, Instant};
use wow_nats::{Fence, LeaseConfig, LeaseError, OwnedPartitions, PartitionLeases};

/// A JetStream context, or `None` (after a `SKIPPED` line on stderr) when NATS is unreachable
/// and not required.
async fn jetstream() -> Option<jetstream::Context> {
    let url = std::env::var("WOW_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    match async_nats::connect(&url).await {
        Ok(client) => Some(jetstream::new(client)),
        Err(error) => {
            wow_tck::skip::unavailable(
                wow_tck::skip::Requirement::Backends,
                &format!("no NATS at {url} ({error}); start it or point WOW_TEST_NATS_URL at one"),
            );
            None
        }
    }
}

/// A bucket name no other test (or run) uses.
fn unique_bucket(test: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "lease_{test}_{}_{nanos}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn config(node: &str, bucket: &str, partitions: u32, ttl: Duration) -> LeaseConfig {
    LeaseConfig::new(node, partitions).bucket(bucket).ttl(ttl)
}

fn all(partitions: u32) -> BTreeSet<u32> {
    (0..partitions).collect()
}

fn keys(owned: &OwnedPartitions) -> BTreeSet<u32> {
    owned.keys().copied().collect()
}

/// Waits until `owned` satisfies `condition`, failing the test at `deadline`.
async fn wait_for(
    owned: &mut watch::Receiver<OwnedPartitions>,
    deadline: Instant,
    what: &str,
    condition: impl FnMut(&OwnedPartitions) -> bool,
) -> OwnedPartitions {
    let result = match timeout_at(deadline, owned.wait_for(condition)).await {
        Ok(Ok(owned)) => Ok(owned.clone()),
        Ok(Err(_)) => Err(true),
        Err(_) => Err(false),
    };
    match result {
        Ok(owned) => owned,
        Err(true) => panic!("the keeper ended while waiting until {what}"),
        Err(false) => panic!(
            "timed out waiting until {what}; owned {:?}",
            keys(&owned.borrow())
        ),
    }
}

async fn delete_bucket(js: &jetstream::Context, bucket: &str) {
    let _ = js.delete_key_value(bucket).await;
}

#[test]
fn public_handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<PartitionLeases>();
    send_sync::<Fence>();
    send_sync::<LeaseConfig>();
    send_sync::<LeaseError>();
}

#[tokio::test]
async fn rejects_configurations_that_cannot_fence() {
    // Never connects: the configuration is refused before any request.
    let client = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect("nats://127.0.0.1:1")
        .await
        .unwrap();
    let js = jetstream::new(client);
    let ttl = Duration::from_secs(2);
    let refused = [
        LeaseConfig::new("a", 0),
        LeaseConfig::new("a.b", 4),
        LeaseConfig::new("", 4),
        LeaseConfig::new("a", 4).ttl(Duration::from_millis(50)),
        LeaseConfig::new("a", 4).ttl(ttl).margin(ttl / 3),
        LeaseConfig::new("a", 4).ttl(ttl).margin(Duration::ZERO),
    ];
    for config in refused {
        let started = PartitionLeases::start(&js, config.clone()).await;
        assert!(
            matches!(started, Err(LeaseError::InvalidConfig(_))),
            "{config:?} gave {started:?}"
        );
    }
}

#[tokio::test]
async fn a_lone_node_acquires_every_partition() {
    let Some(js) = jetstream().await else { return };
    let bucket = unique_bucket("alone");
    let ttl = Duration::from_secs(2);
    let a = PartitionLeases::start(&js, config("a", &bucket, 8, ttl))
        .await
        .unwrap();
    let mut owned = a.owned();
    let owned = wait_for(&mut owned, Instant::now() + ttl * 3, "a owns all", |o| {
        keys(o) == all(8)
    })
    .await;
    assert!(owned.values().all(Fence::is_valid));
    assert!(owned.iter().all(|(p, fence)| fence.partition() == *p));
    a.stop().await.unwrap();
    delete_bucket(&js, &bucket).await;
}

#[tokio::test]
async fn two_nodes_split_the_partitions_without_overlap() {
    let Some(js) = jetstream().await else { return };
    let bucket = unique_bucket("split");
    let ttl = Duration::from_secs(1);
    let partitions = 7;
    let a = PartitionLeases::start(&js, config("a", &bucket, partitions, ttl))
        .await
        .unwrap();
    let mut a_owned = a.owned();
    wait_for(&mut a_owned, Instant::now() + ttl * 3, "a owns all", |o| {
        keys(o) == all(partitions)
    })
    .await;

    let b = PartitionLeases::start(&js, config("b", &bucket, partitions, ttl))
        .await
        .unwrap();
    let mut b_owned = b.owned();
    let split = |a: &BTreeSet<u32>, b: &BTreeSet<u32>| {
        a.len() + b.len() == partitions as usize && a.len().abs_diff(b.len()) <= 1
    };
    // Every state either side publishes is checked against the other side's latest.
    let deadline = Instant::now() + ttl * 15;
    let mut observations = 0;
    loop {
        let (a_now, b_now) = (
            keys(&a_owned.borrow_and_update()),
            keys(&b_owned.borrow_and_update()),
        );
        observations += 1;
        assert!(
            a_now.is_disjoint(&b_now),
            "both own {:?}",
            a_now.intersection(&b_now)
        );
        if split(&a_now, &b_now) {
            break;
        }
        let changed = timeout_at(deadline, async {
            tokio::select! {
                r = a_owned.changed() => r,
                r = b_owned.changed() => r,
            }
        });
        match changed.await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => panic!("a keeper ended"),
            Err(_) => panic!("no split by the deadline: a {a_now:?}, b {b_now:?}"),
        }
    }
    // Converged: two more rounds change nothing.
    let calm = timeout(ttl, async {
        tokio::select! {
            r = a_owned.changed() => r,
            r = b_owned.changed() => r,
        }
    })
    .await;
    assert!(calm.is_err(), "the split changed after converging");
    eprintln!(
        "split a {:?} b {:?} after {observations} observations",
        keys(&a_owned.borrow()),
        keys(&b_owned.borrow())
    );
    a.stop().await.unwrap();
    b.stop().await.unwrap();
    delete_bucket(&js, &bucket).await;
}

/// With `ceil(N / L)` for every node, 4 partitions held 2 + 2 would leave a third node
/// at zero; the shares sum to `N`, so it gets one.
#[tokio::test]
async fn a_third_node_gets_a_share_of_four_partitions() {
    let Some(js) = jetstream().await else { return };
    let bucket = unique_bucket("three");
    let ttl = Duration::from_secs(1);
    let start = |node| PartitionLeases::start(&js, config(node, &bucket, 4, ttl));
    let a = start("a").await.unwrap();
    let b = start("b").await.unwrap();
    let (mut a_owned, mut b_owned) = (a.owned(), b.owned());
    let deadline = Instant::now() + ttl * 10;
    wait_for(&mut a_owned, deadline, "a holds 2", |o| o.len() == 2).await;
    wait_for(&mut b_owned, deadline, "b holds 2", |o| o.len() == 2).await;

    let c = start("c").await.unwrap();
    let mut c_owned = c.owned();
    let deadline = Instant::now() + ttl * 10;
    wait_for(&mut c_owned, deadline, "c holds 1", |o| o.len() == 1).await;
    wait_for(&mut b_owned, deadline, "b holds 1", |o| o.len() == 1).await;
    assert_eq!(a_owned.borrow().len(), 2);
    for node in [a, b, c] {
        node.stop().await.unwrap();
    }
    delete_bucket(&js, &bucket).await;
}

#[tokio::test]
async fn a_crashed_nodes_partitions_are_taken_over_after_the_ttl() {
    let Some(js) = jetstream().await else { return };
    let bucket = unique_bucket("takeover");
    let ttl = Duration::from_secs(2);
    let partitions = 4;
    let a = PartitionLeases::start(&js, config("a", &bucket, partitions, ttl))
        .await
        .unwrap();
    let mut a_owned = a.owned();
    let a_fences = wait_for(&mut a_owned, Instant::now() + ttl * 3, "a owns all", |o| {
        keys(o) == all(partitions)
    })
    .await;

    a.abort();
    let crashed = Instant::now();
    let b = PartitionLeases::start(&js, config("b", &bucket, partitions, ttl))
        .await
        .unwrap();
    let mut b_owned = b.owned();
    let b_fences = wait_for(&mut b_owned, crashed + ttl * 3, "b owns all", |o| {
        keys(o) == all(partitions)
    })
    .await;
    let took = crashed.elapsed();
    eprintln!("takeover took {took:?} (ttl {ttl:?}, round {:?})", ttl / 3);
    assert!(
        took <= ttl + ttl / 3 + Duration::from_millis(500),
        "took {took:?}"
    );
    for (partition, b_fence) in &b_fences {
        assert!(a_fences[partition].valid_until() <= b_fence.acquired_at());
    }
    b.stop().await.unwrap();
    delete_bucket(&js, &bucket).await;
}

#[tokio::test]
async fn a_crashed_nodes_partitions_go_to_the_surviving_node() {
    let Some(js) = jetstream().await else { return };
    let bucket = unique_bucket("survivor");
    let ttl = Duration::from_secs(2);
    let partitions = 4;
    let start = |node| PartitionLeases::start(&js, config(node, &bucket, partitions, ttl));
    let a = start("a").await.unwrap();
    let b = start("b").await.unwrap();
    let (mut a_owned, mut b_owned) = (a.owned(), b.owned());
    let deadline = Instant::now() + ttl * 10;
    wait_for(&mut a_owned, deadline, "a holds 2", |o| o.len() == 2).await;
    wait_for(&mut b_owned, deadline, "b holds 2", |o| o.len() == 2).await;

    a.abort();
    let crashed = Instant::now();
    wait_for(&mut b_owned, crashed + ttl * 3, "b owns all", |o| {
        keys(o) == all(partitions)
    })
    .await;
    let took = crashed.elapsed();
    eprintln!(
        "survivor takeover took {took:?} (ttl {ttl:?}, round {:?})",
        ttl / 3
    );
    assert!(
        took <= ttl + ttl / 3 + Duration::from_millis(500),
        "took {took:?}"
    );
    b.stop().await.unwrap();
    delete_bucket(&js, &bucket).await;
}

/// Waits until `fence` is lost; returns when.
/// Node `a` alone on a bucket of one partition, once it holds it: its handle, its owned set
/// and the partition's fence.
async fn holder_of_partition_0(
    js: &jetstream::Context,
    bucket: &str,
    ttl: Duration,
) -> (PartitionLeases, watch::Receiver<OwnedPartitions>, Fence) {
    let a = PartitionLeases::start(js, config("a", bucket, 1, ttl))
        .await
        .unwrap();
    let mut a_owned = a.owned();
    let a_fence = wait_for(&mut a_owned, Instant::now() + ttl * 3, "a owns 0", |o| {
        o.contains_key(&0)
    })
    .await[&0]
        .clone();
    (a, a_owned, a_fence)
}

/// Node `a` holds partition 0, then another writer puts `value` into its key: `a`'s handle,
/// owned set and fence, the bucket, when the write was made and when the fence was lost.
async fn overwritten(
    js: &jetstream::Context,
    bucket: &str,
    ttl: Duration,
    value: &'static str,
) -> (
    PartitionLeases,
    watch::Receiver<OwnedPartitions>,
    Fence,
    jetstream::kv::Store,
    Instant,
    Instant,
) {
    let (a, a_owned, a_fence) = holder_of_partition_0(js, bucket, ttl).await;
    let kv = js.get_key_value(bucket).await.unwrap();
    let written = Instant::now();
    kv.put("partition.0", value.into()).await.unwrap();
    let stopped = lost_at(&a_fence, written + ttl).await;
    (a, a_owned, a_fence, kv, written, stopped)
}

async fn lost_at(fence: &Fence, deadline: Instant) -> Instant {
    timeout_at(deadline, fence.lost())
        .await
        .expect("the fence never went invalid");
    Instant::now()
}

#[tokio::test]
async fn a_crashed_nodes_fence_stops_before_another_node_acquires() {
    let Some(js) = jetstream().await else { return };
    let bucket = unique_bucket("fence_crash");
    let ttl = Duration::from_secs(1);
    let (a, _a_owned, a_fence) = holder_of_partition_0(&js, &bucket, ttl).await;

    a.abort();
    let b = PartitionLeases::start(&js, config("b", &bucket, 1, ttl))
        .await
        .unwrap();
    let mut b_owned = b.owned();
    let deadline = Instant::now() + ttl * 4;
    let (a_stopped, b_owned_now) = tokio::join!(
        lost_at(&a_fence, deadline),
        wait_for(&mut b_owned, deadline, "b owns 0", |o| o.contains_key(&0)),
    );
    let b_acquired = b_owned_now[&0].acquired_at();
    eprintln!(
        "a stopped {:?} before b's acquire was sent",
        b_acquired.saturating_duration_since(a_stopped)
    );
    assert!(a_stopped <= b_acquired);
    assert!(!a_fence.is_valid());
    b.stop().await.unwrap();
    delete_bucket(&js, &bucket).await;
}

#[tokio::test]
async fn a_node_cut_off_from_nats_stops_before_another_node_acquires() {
    let Some(js) = jetstream().await else { return };
    let url = std::env::var("WOW_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let a_client = async_nats::connect(&url).await.unwrap();
    let a_js = jetstream::new(a_client.clone());
    let bucket = unique_bucket("fence_cut");
    let ttl = Duration::from_secs(1);
    let (a, mut a_owned, a_fence) = holder_of_partition_0(&a_js, &bucket, ttl).await;

    // A's keeper runs on, but none of its requests reach the server any more.
    a_client.drain().await.unwrap();
    let b = PartitionLeases::start(&js, config("b", &bucket, 1, ttl))
        .await
        .unwrap();
    let mut b_owned = b.owned();
    let deadline = Instant::now() + ttl * 4;
    let a_dropped = async {
        wait_for(&mut a_owned, deadline, "a drops 0", |o| !o.contains_key(&0)).await;
        Instant::now()
    };
    let (a_stopped, a_dropped, b_owned_now) = tokio::join!(
        lost_at(&a_fence, deadline),
        a_dropped,
        wait_for(&mut b_owned, deadline, "b owns 0", |o| o.contains_key(&0)),
    );
    let b_acquired = b_owned_now[&0].acquired_at();
    eprintln!(
        "cut-off a stopped {:?} and unpublished {:?} before b's acquire was sent",
        b_acquired.saturating_duration_since(a_stopped),
        b_acquired.saturating_duration_since(a_dropped)
    );
    assert!(a_stopped <= b_acquired);
    assert!(a_dropped <= b_acquired);
    let _ = a.stop().await;
    b.stop().await.unwrap();
    delete_bucket(&js, &bucket).await;
}

#[tokio::test]
async fn a_stopped_nodes_partitions_are_taken_well_before_the_ttl() {
    let Some(js) = jetstream().await else { return };
    let bucket = unique_bucket("graceful");
    let ttl = Duration::from_secs(3);
    let partitions = 4;
    let with_margin =
        |node| config(node, &bucket, partitions, ttl).margin(Duration::from_millis(200));
    let a = PartitionLeases::start(&js, with_margin("a")).await.unwrap();
    let mut a_owned = a.owned();
    wait_for(&mut a_owned, Instant::now() + ttl * 3, "a owns all", |o| {
        keys(o) == all(partitions)
    })
    .await;
    let b = PartitionLeases::start(&js, with_margin("b")).await.unwrap();
    let mut b_owned = b.owned();
    wait_for(
        &mut b_owned,
        Instant::now() + ttl * 5,
        "b owns its half",
        |o| o.len() == partitions as usize / 2,
    )
    .await;

    let stopping = Instant::now();
    a.stop().await.unwrap();
    wait_for(&mut b_owned, stopping + ttl * 3, "b owns all", |o| {
        keys(o) == all(partitions)
    })
    .await;
    let took = stopping.elapsed();
    eprintln!("handover after a graceful stop took {took:?} (ttl {ttl:?})");
    assert!(took < ttl / 4, "took {took:?}");
    b.stop().await.unwrap();
    delete_bucket(&js, &bucket).await;
}

#[tokio::test]
async fn dropping_the_handle_releases_in_the_background() {
    let Some(js) = jetstream().await else { return };
    let bucket = unique_bucket("drop");
    let ttl = Duration::from_secs(3);
    let partitions = 2;
    let a = PartitionLeases::start(&js, config("a", &bucket, partitions, ttl))
        .await
        .unwrap();
    let mut a_owned = a.owned();
    wait_for(&mut a_owned, Instant::now() + ttl * 3, "a owns all", |o| {
        keys(o) == all(partitions)
    })
    .await;

    let dropped = Instant::now();
    drop(a);
    let b = PartitionLeases::start(&js, config("b", &bucket, partitions, ttl))
        .await
        .unwrap();
    let mut b_owned = b.owned();
    wait_for(&mut b_owned, dropped + ttl * 3, "b owns all", |o| {
        keys(o) == all(partitions)
    })
    .await;
    let took = dropped.elapsed();
    eprintln!("handover after dropping the handle took {took:?} (ttl {ttl:?})");
    assert!(took < ttl / 2, "took {took:?}");
    let a_ended = timeout(ttl, async { while a_owned.changed().await.is_ok() {} }).await;
    assert!(a_ended.is_ok(), "a's keeper still runs");
    b.stop().await.unwrap();
    delete_bucket(&js, &bucket).await;
}

#[tokio::test]
async fn a_lease_overwritten_by_another_writer_ends_at_once() {
    let Some(js) = jetstream().await else { return };
    let bucket = unique_bucket("cas");
    let ttl = Duration::from_secs(2);
    let (a, mut a_owned, a_fence, kv, written, stopped) =
        overwritten(&js, &bucket, ttl, "intruder").await;
    eprintln!(
        "lease ended {:?} after the foreign write",
        stopped - written
    );
    // Ended on seeing the write (or at the latest when the next renewal fails), not by
    // running out its deadline.
    assert!(
        stopped < a_fence.valid_until(),
        "ended only at the deadline"
    );
    assert!(
        stopped - written < ttl / 4,
        "ended {:?} after the write",
        stopped - written
    );
    wait_for(&mut a_owned, written + ttl, "a drops 0", |o| o.is_empty()).await;
    a.stop().await.unwrap();
    assert_eq!(
        kv.get("partition.0").await.unwrap().as_deref(),
        Some(&b"intruder"[..])
    );
    delete_bucket(&js, &bucket).await;
}

/// A write that carries the holder's own id (a second node misconfigured with the same id)
/// is not told apart by the watch; the next renewal's compare-and-set fails and ends it.
#[tokio::test]
async fn a_lease_overwritten_with_the_holders_id_ends_at_the_next_renewal() {
    let Some(js) = jetstream().await else { return };
    let bucket = unique_bucket("cas_same_id");
    let ttl = Duration::from_secs(2);
    let (a, _a_owned, a_fence, _kv, written, stopped) = overwritten(&js, &bucket, ttl, "a").await;
    eprintln!(
        "lease ended {:?} after the same-id write",
        stopped - written
    );
    assert!(
        stopped < a_fence.valid_until(),
        "ended only at the deadline"
    );
    assert!(stopped - written <= ttl / 3 + Duration::from_millis(300));
    a.stop().await.unwrap();
    delete_bucket(&js, &bucket).await;
}

#[tokio::test]
async fn a_bucket_with_another_ttl_is_refused() {
    let Some(js) = jetstream().await else { return };
    let bucket = unique_bucket("ttl");
    let a = PartitionLeases::start(&js, config("a", &bucket, 1, Duration::from_secs(2)))
        .await
        .unwrap();
    let b = PartitionLeases::start(&js, config("b", &bucket, 1, Duration::from_secs(3))).await;
    assert!(matches!(b, Err(LeaseError::TtlMismatch { .. })), "{b:?}");
    a.stop().await.unwrap();
    delete_bucket(&js, &bucket).await;
}
