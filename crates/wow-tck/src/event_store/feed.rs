//! The cases of the global feed (docs/distributed.md): every appended stream of every tenant and
//! aggregate in one order, read in pages after a position, never with a gap filled in later.
//!
//! A store may show an acknowledged append in its feed a little late (PostgreSQL holds the
//! feed below the oldest transaction in flight anywhere in its cluster, and other tests share
//! that cluster), so the cases wait, up to [`SETTLE`], for the streams they appended to show.
//! What they assert once shown is exact.

use std::collections::HashSet;
use std::time::Duration;

use wow_core::eventsourcing::{EventStore, FeedEntry, GlobalPosition};
use wow_core::{id, AggregateId, DomainEventStream, ErrorCode};

use super::decisions::rejection;
use super::{append_ok, Store};
use crate::fixtures::{aggregate, stream, CONTEXT};

/// How long a case waits for appended streams to show in the feed.
pub const SETTLE: Duration = Duration::from_secs(30);

/// Every entry after `after`, read in pages of 100.
pub(crate) async fn read_all(store: &dyn EventStore, after: GlobalPosition) -> Vec<FeedEntry> {
    let mut entries: Vec<FeedEntry> = Vec::new();
    loop {
        let from = entries.last().map_or(after, |entry| entry.position);
        let page = store
            .read_feed(from, 100)
            .await
            .expect("reading the feed succeeds");
        if page.is_empty() {
            return entries;
        }
        entries.extend(page);
    }
}

/// Every entry after `after`, once at least `count` show (a poll: the store decides when
/// they show; the case only bounds the wait).
pub(crate) async fn read_settled(
    store: &dyn EventStore,
    after: GlobalPosition,
    count: usize,
) -> Vec<FeedEntry> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let entries = read_all(store, after).await;
        if entries.len() >= count {
            return entries;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the feed shows {} of {count} appended streams after {SETTLE:?}: is a transaction held open?",
            entries.len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn streams(entries: &[FeedEntry]) -> Vec<DomainEventStream> {
    entries.iter().map(|entry| entry.stream.clone()).collect()
}

#[track_caller]
fn assert_ascending(entries: &[FeedEntry], after: GlobalPosition) {
    let mut last = after;
    for entry in entries {
        assert!(
            entry.position > last,
            "position {} follows {last}",
            entry.position
        );
        last = entry.position;
    }
}

/// The feed of an empty store is empty, from the start or from any position; `limit` 0
/// reads nothing.
pub async fn the_feed_of_an_empty_store_is_empty(store: Store) {
    assert!(store
        .read_feed(GlobalPosition::START, 100)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .read_feed(GlobalPosition::new(7, 3), 100)
        .await
        .unwrap()
        .is_empty());
    append_ok(&store, &stream(&aggregate(), 1, "r-1")).await;
    read_settled(&*store, GlobalPosition::START, 1).await;
    assert!(store
        .read_feed(GlobalPosition::START, 0)
        .await
        .unwrap()
        .is_empty());
}

/// Streams of several aggregates, of two aggregate types and two tenants, show in the order
/// they were appended, each once and whole, at ascending positions.
pub async fn the_feed_lists_appended_streams_in_append_order(store: Store) {
    let order = aggregate();
    let other = aggregate();
    let elsewhere = AggregateId::new(CONTEXT, "order", order.id.clone(), "tenant-b");
    let cart = AggregateId::new(CONTEXT, "cart", id::new_id(), "tenant-b");
    let appended = vec![
        stream(&order, 1, "r-1"),
        stream(&elsewhere, 1, "r-1"),
        stream(&other, 1, "r-1"),
        stream(&order, 2, "r-2"),
        stream(&cart, 1, "r-1"),
        stream(&elsewhere, 2, "r-2"),
        stream(&order, 3, "r-3"),
    ];
    for s in &appended {
        append_ok(&store, s).await;
    }
    let entries = read_settled(&*store, GlobalPosition::START, appended.len()).await;
    assert_eq!(streams(&entries), appended);
    assert_ascending(&entries, GlobalPosition::START);
}

/// A read after a position returns only the streams after it: after the last one read,
/// only those appended since, then nothing.
pub async fn the_feed_resumes_after_a_position(store: Store) {
    let order = aggregate();
    let first: Vec<_> = (1..=3)
        .map(|v| stream(&order, v, &format!("r-{v}")))
        .collect();
    for s in &first {
        append_ok(&store, s).await;
    }
    let read = read_settled(&*store, GlobalPosition::START, first.len()).await;
    assert_eq!(streams(&read), first);
    let kept = read.last().unwrap().position;
    assert!(store.read_feed(kept, 100).await.unwrap().is_empty());

    let later: Vec<_> = (4..=5)
        .map(|v| stream(&order, v, &format!("r-{v}")))
        .collect();
    for s in &later {
        append_ok(&store, s).await;
    }
    let resumed = read_settled(&*store, kept, later.len()).await;
    assert_eq!(streams(&resumed), later);
    assert_ascending(&resumed, kept);
    let middle = read[1].position;
    assert_eq!(
        streams(&read_all(&*store, middle).await),
        [&first[2..], &later[..]].concat(),
        "a read after an earlier position returns the rest, in order"
    );
    let end = resumed.last().unwrap().position;
    assert!(store.read_feed(end, 100).await.unwrap().is_empty());
}

/// `limit` bounds a page; pages read after each other's last position add up to the whole
/// feed, each stream once.
pub async fn the_feed_pages_by_limit(store: Store) {
    let appended: Vec<_> = (0..5)
        .map(|index| stream(&aggregate(), 1, &format!("r-{index}")))
        .collect();
    for s in &appended {
        append_ok(&store, s).await;
    }
    let whole = read_settled(&*store, GlobalPosition::START, appended.len()).await;
    assert_eq!(streams(&whole), appended);
    let mut paged: Vec<FeedEntry> = Vec::new();
    let mut sizes = Vec::new();
    loop {
        let from = paged.last().map_or(GlobalPosition::START, |e| e.position);
        let page = store.read_feed(from, 2).await.unwrap();
        sizes.push(page.len());
        if page.is_empty() {
            break;
        }
        paged.extend(page);
    }
    assert_eq!(sizes, vec![2, 2, 1, 0]);
    assert_eq!(paged, whole);
    assert_eq!(
        store.read_feed(GlobalPosition::START, 1).await.unwrap(),
        whole[..1]
    );
}

/// Recorded rejections (SPEC ID-6) are decisions, not streams: the feed holds the appended
/// streams only, in order around them.
pub async fn rejections_are_not_in_the_feed(store: Store) {
    let order = aggregate();
    let other = aggregate();
    let first = stream(&order, 1, "r-1");
    append_ok(&store, &first).await;
    store
        .record_rejection(
            &order,
            "r-2",
            &rejection(ErrorCode::domain("InsufficientBalance"), 1),
        )
        .await
        .unwrap();
    store
        .record_rejection(&other, "r-1", &rejection(ErrorCode::NotFound, 0))
        .await
        .unwrap();
    let second = stream(&order, 2, "r-3");
    append_ok(&store, &second).await;
    let entries = read_settled(&*store, GlobalPosition::START, 2).await;
    assert_eq!(streams(&entries), vec![first, second]);
}

/// A reader that pages through the feed while 8 writers append 200 streams at once sees
/// every stream exactly once, at ascending positions, and what it read in passing is the
/// whole feed read afterwards: no stream with a lower position showed after the reader had
/// moved past it. Each aggregate's streams show in version order.
pub async fn a_feed_reader_racing_appenders_skips_nothing(store: Store) {
    const WRITERS: usize = 8;
    const VERSIONS: u64 = 25;
    let total = WRITERS * VERSIONS as usize;
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let order = aggregate();
                let mut appended = Vec::new();
                for version in 1..=VERSIONS {
                    let s = stream(&order, version, &format!("r-{version}"));
                    append_ok(&store, &s).await;
                    appended.push(s.id);
                }
                appended
            })
        })
        .collect();
    let reader = {
        let store = store.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + SETTLE;
            let mut seen: Vec<FeedEntry> = Vec::new();
            while seen.len() < total {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the reader saw {} of {total} streams after {SETTLE:?}: is a transaction held open?",
                    seen.len()
                );
                let from = seen.last().map_or(GlobalPosition::START, |e| e.position);
                let page = store.read_feed(from, 16).await.unwrap();
                if page.is_empty() {
                    // Streams at or before `from` that the reader never got showed late.
                    let passed = read_all(&*store, GlobalPosition::START)
                        .await
                        .into_iter()
                        .filter(|entry| entry.position <= from)
                        .count();
                    assert_eq!(
                        passed,
                        seen.len(),
                        "streams showed at positions the reader had already passed (up to {from}): a gap was filled in later"
                    );
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                seen.extend(page);
            }
            seen
        })
    };
    let mut appended = HashSet::new();
    for writer in writers {
        appended.extend(writer.await.expect("the writer runs"));
    }
    let seen = reader.await.expect("the reader runs");
    assert_ascending(&seen, GlobalPosition::START);
    let seen_ids: HashSet<_> = seen.iter().map(|e| e.stream.id.clone()).collect();
    assert_eq!(seen_ids.len(), total, "each stream was read once");
    assert_eq!(seen_ids, appended);
    let afterwards = read_all(&*store, GlobalPosition::START).await;
    assert_eq!(
        afterwards, seen,
        "the feed read afterwards is what the racing reader read"
    );
    let mut last_version = std::collections::HashMap::new();
    for entry in &seen {
        let previous =
            last_version.insert(entry.stream.aggregate_id.id.clone(), entry.stream.version);
        assert_eq!(
            previous.unwrap_or(0) + 1,
            entry.stream.version,
            "an aggregate's streams show in version order"
        );
    }
}
