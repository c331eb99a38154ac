//! The downstream conformance suite: consumer positions, the effect journal (SPEC DS-2) and
//! compensation records (SPEC DS-4). Run every case with
//! [`downstream_tck!`](crate::downstream_tck).

use std::sync::Arc;

use futures::future::BoxFuture;
use wow_core::compensation::{
    CompensationStore, ExecutionFailedStatus, FailedExecution, FailureQuery, RecordEdit,
    RecoverableType, RetrySpec,
};
use wow_core::event::{
    ConsumerError, ConsumerPositions, EffectJournal, EffectState, ParkedStreams, PositionRun,
};
use wow_core::eventsourcing::{EventStore, GlobalPosition};
use wow_core::{AggregateId, CommandStage, ErrorCode};

/// Opens the positions again on the same database: a new handle, as a restarted process has.
pub type Reopen = Arc<dyn Fn() -> BoxFuture<'static, Arc<dyn ConsumerPositions>> + Send + Sync>;

/// The downstream stores of one backend, and the history the runtime cases read.
#[derive(Clone)]
pub struct Stores {
    /// Compensation records.
    pub compensation: Arc<dyn CompensationStore>,
    /// Consumer positions.
    pub positions: Arc<dyn ConsumerPositions>,
    /// The effect journal.
    pub effects: Arc<dyn EffectJournal>,
    /// The lanes of parked streams (SPEC DS-5).
    pub parked: Arc<dyn ParkedStreams>,
    /// The history the runtime cases dispatch, retry and catch up from.
    pub events: Arc<dyn EventStore>,
    /// Opens the positions again on the same database; `None` for a store that lives in
    /// memory only (the cases then go on with the same handle).
    pub reopen: Option<Reopen>,
    /// Whatever must live as long as the stores (a test schema's guard, say).
    pub owner: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores")
            .field("positions", &self.positions)
            .field("reopens", &self.reopen.is_some())
            .finish_non_exhaustive()
    }
}

impl Stores {
    /// The stores of a backend that implements them all, history included, on one type.
    pub fn of<T>(store: Arc<T>) -> Self
    where
        T: CompensationStore
            + ConsumerPositions
            + EffectJournal
            + ParkedStreams
            + EventStore
            + 'static,
    {
        Self {
            compensation: store.clone(),
            positions: store.clone(),
            effects: store.clone(),
            parked: store.clone(),
            events: store,
            reopen: None,
            owner: None,
        }
    }

    /// These stores, keeping `owner` alive as long as they are.
    pub fn keeping(mut self, owner: Arc<dyn std::any::Any + Send + Sync>) -> Self {
        self.owner = Some(owner);
        self
    }

    /// These stores, their positions opened again on the same database by `reopen`.
    pub fn reopening(mut self, reopen: Reopen) -> Self {
        self.reopen = Some(reopen);
        self
    }

    /// The positions as a restarted process sees them: a new handle on the same database
    /// (the same handle for a store in memory).
    pub async fn reopened_positions(&self) -> Arc<dyn ConsumerPositions> {
        match &self.reopen {
            Some(reopen) => reopen().await,
            None => self.positions.clone(),
        }
    }
}

pub use crate::downstream_runtime::{
    a_consumer_failing_once_ends_at_the_head_and_a_restart_replays_nothing,
    positions_written_late_by_a_processor_that_lost_the_partition_are_not_lost,
};

/// The stores under test.
pub type Store = Stores;

fn account(id: &str) -> AggregateId {
    AggregateId::new("tck", "account", id, "tenant-a")
}

fn failure(consumer: &str, id: &str, version: u64, message: &str) -> FailedExecution {
    FailedExecution {
        consumer: consumer.to_owned(),
        stage: CommandStage::Projected,
        aggregate_id: account(id),
        version,
        stream_id: format!("stream-{id}-{version}"),
        event_ids: vec![
            format!("event-{id}-{version}-a"),
            format!("event-{id}-{version}-b"),
        ],
        error: ConsumerError::new(ErrorCode::ServiceUnavailable, message),
    }
}

const SPEC: RetrySpec = RetrySpec {
    max_attempts: 3,
    initial_backoff_ms: 1_000,
    max_backoff_ms: 60_000,
};

/// The position of `consumer` on `aggregate`, if it has one.
async fn position(
    positions: &dyn ConsumerPositions,
    consumer: &str,
    aggregate: &AggregateId,
) -> Option<u64> {
    positions
        .positions(consumer, std::slice::from_ref(aggregate))
        .await
        .unwrap()
        .get(aggregate)
        .copied()
}

/// Positions start absent, never move past a gap (a version handled past it is kept until
/// the gap is filled), never move back, and are kept per consumer and aggregate.
pub async fn positions_move_only_to_the_next_version(stores: Store) {
    let positions = stores.positions.as_ref();
    let (a, b) = (account("a"), account("b"));
    assert_eq!(position(positions, "view", &a).await, None);
    positions.advance("view", &a, 2).await.unwrap();
    assert_eq!(
        position(positions, "view", &a).await,
        None,
        "version 2 without version 1 is a gap"
    );
    for version in [1, 2, 2, 4, 1] {
        positions.advance("view", &a, version).await.unwrap();
    }
    positions.advance("view", &b, 1).await.unwrap();
    for version in 1..=9 {
        positions.advance("other", &a, version).await.unwrap();
    }
    let found = positions
        .positions("view", &[a.clone(), b.clone(), account("c")])
        .await
        .unwrap();
    assert_eq!(
        found.get(&account("a")),
        Some(&2),
        "4 waits for 3; 1 does not move it back"
    );
    assert_eq!(found.get(&account("b")), Some(&1));
    assert_eq!(found.get(&account("c")), None);
    positions.advance("view", &a, 3).await.unwrap();
    assert_eq!(
        position(positions, "view", &a).await,
        Some(4),
        "3 fills the gap; 4, handled past it, was kept"
    );
    assert_eq!(position(positions, "other", &a).await, Some(9));
}

/// A run of versions moves a position as advancing each version in turn would: to the run's
/// end from anywhere inside it (created by a run from 1), never past a gap, never back; a
/// run past a gap is kept, and taken in once the gap is filled.
pub async fn position_runs_move_as_their_versions_would(stores: Store) {
    let positions = stores.positions.as_ref();
    let (a, b, c) = (account("ra"), account("rb"), account("rc"));
    let run = |aggregate, from, to| PositionRun {
        consumer: "view",
        aggregate,
        from,
        to,
    };
    positions
        .advance_runs(&[
            run(&a, 1, 3),
            run(&a, 6, 7),
            run(&b, 2, 4),
            run(&c, 1, 1),
            run(&c, 1, 2),
        ])
        .await
        .unwrap();
    assert_eq!(
        position(positions, "view", &a).await,
        Some(3),
        "6..=7 is past a gap"
    );
    assert_eq!(position(positions, "view", &b).await, None, "no run from 1");
    assert_eq!(
        position(positions, "view", &c).await,
        Some(2),
        "the second run goes on from the first"
    );
    positions
        .advance_runs(&[run(&a, 2, 5), run(&a, 1, 2), run(&a, 6, 7)])
        .await
        .unwrap();
    assert_eq!(
        position(positions, "view", &a).await,
        Some(7),
        "2..=5 overlaps 3; 1..=2 does not move it back; 6..=7 follows"
    );
}

/// A failure at version 4 splits what the consumer handled into runs on both sides of it;
/// once the retry reports 4, the position moves to the highest version handled, the runs
/// written past the gap before the retry included, and later runs go on from there.
pub async fn a_retry_that_fills_a_gap_moves_the_position_over_the_runs_past_it(stores: Store) {
    let positions = stores.positions.as_ref();
    let a = account("gap");
    let run = |from, to| PositionRun {
        consumer: "saga",
        aggregate: &a,
        from,
        to,
    };
    positions
        .advance_runs(&[run(1, 3), run(5, 9)])
        .await
        .unwrap();
    positions.advance_runs(&[run(10, 12)]).await.unwrap();
    assert_eq!(
        position(positions, "saga", &a).await,
        Some(3),
        "version 4 failed: the position waits before it"
    );
    positions.advance("saga", &a, 4).await.unwrap();
    assert_eq!(
        position(positions, "saga", &a).await,
        Some(12),
        "the retry fills the gap: every version up to 12 was handled"
    );
    positions.advance_runs(&[run(13, 13)]).await.unwrap();
    assert_eq!(position(positions, "saga", &a).await, Some(13));
}

/// Runs written in any order — reversed, overlapping, spanning a gap, from two writers at
/// once — reach the same position: the highest version with no gap below it.
pub async fn runs_written_out_of_order_reach_the_highest_version_without_a_gap(stores: Store) {
    let positions = stores.positions.clone();
    let (a, b) = (account("order-a"), account("order-b"));
    let run = |aggregate, from, to| PositionRun {
        consumer: "view",
        aggregate,
        from,
        to,
    };
    positions
        .advance_runs(&[run(&a, 8, 9), run(&a, 4, 6), run(&a, 3, 7), run(&a, 11, 11)])
        .await
        .unwrap();
    assert_eq!(position(positions.as_ref(), "view", &a).await, None);
    positions.advance_runs(&[run(&a, 1, 2)]).await.unwrap();
    assert_eq!(
        position(positions.as_ref(), "view", &a).await,
        Some(9),
        "1..=2 joins 3..=7 and 8..=9; 11 waits for 10"
    );
    positions
        .advance_runs(&[run(&a, 5, 10), run(&a, 1, 1)])
        .await
        .unwrap();
    assert_eq!(
        position(positions.as_ref(), "view", &a).await,
        Some(11),
        "a run spanning the gap and what was kept past it"
    );

    // Two writers (a node that lost a partition and the one that took it), each in its own
    // transaction, one version per write, the later versions first.
    let writer = |versions: Vec<u64>| {
        let positions = positions.clone();
        let b = b.clone();
        tokio::spawn(async move {
            for version in versions {
                positions.advance("view", &b, version).await.unwrap();
            }
        })
    };
    let later = writer((21..=40).rev().collect());
    let earlier = writer((1..=20).rev().collect());
    later.await.unwrap();
    earlier.await.unwrap();
    assert_eq!(position(positions.as_ref(), "view", &b).await, Some(40));
}

/// The runs past a gap are durable: a new handle on the same database (a restarted
/// process) keeps them, and the retry it runs moves the position over them.
pub async fn runs_past_a_gap_survive_a_restart(stores: Store) {
    let a = account("restart");
    let run = |from, to| PositionRun {
        consumer: "saga",
        aggregate: &a,
        from,
        to,
    };
    stores
        .positions
        .advance_runs(&[run(1, 3), run(5, 9), run(12, 14)])
        .await
        .unwrap();
    let restarted = stores.reopened_positions().await;
    assert_eq!(position(restarted.as_ref(), "saga", &a).await, Some(3));
    restarted.advance("saga", &a, 4).await.unwrap();
    assert_eq!(position(restarted.as_ref(), "saga", &a).await, Some(9));
    restarted.advance_runs(&[run(10, 11)]).await.unwrap();
    let again = stores.reopened_positions().await;
    assert_eq!(
        position(again.as_ref(), "saga", &a).await,
        Some(14),
        "12..=14 was kept across both restarts"
    );
}

/// A feed reader's cursor starts at the start, is saved durably per reader, and never moves
/// back: an earlier position saved later (a slower instance) changes nothing.
pub async fn feed_cursors_are_per_reader_and_never_move_back(stores: Store) {
    let positions = stores.positions.as_ref();
    let cursor = |reader: &'static str| async move {
        positions
            .feed_cursor(reader)
            .await
            .expect("a cursor is read")
    };
    let save = |reader: &'static str, (transaction, sequence): (u64, u64)| async move {
        positions
            .save_feed_cursor(reader, GlobalPosition::new(transaction, sequence))
            .await
            .expect("a cursor is saved")
    };
    assert_eq!(cursor("feed:a").await, GlobalPosition::START);
    save("feed:a", (7, 40)).await;
    save("feed:b", (0, 3)).await;
    assert_eq!(cursor("feed:a").await, GlobalPosition::new(7, 40));
    // (7, 40) < (8, 2): the transaction orders first.
    save("feed:a", (8, 2)).await;
    save("feed:a", (7, 99)).await;
    assert_eq!(
        cursor("feed:a").await,
        GlobalPosition::new(8, 2),
        "never back"
    );
    assert_eq!(cursor("feed:b").await, GlobalPosition::new(0, 3));
}

/// A reset forgets one consumer's positions and keeps the others'.
pub async fn reset_forgets_one_consumer(stores: Store) {
    let positions = stores.positions.as_ref();
    let a = account("a");
    for version in 1..=4 {
        positions.advance("view", &a, version).await.unwrap();
    }
    for version in 1..=7 {
        positions.advance("other", &a, version).await.unwrap();
    }
    positions.reset("view").await.unwrap();
    assert_eq!(position(positions, "view", &a).await, None);
    assert_eq!(position(positions, "other", &a).await, Some(7));
}

/// An effect is started, counted on every unfinished restart, and once done stays done.
pub async fn an_effect_is_started_then_done_once(stores: Store) {
    let effects = stores.effects;
    assert_eq!(effects.state("mailer", "k-1").await.unwrap(), None);
    assert_eq!(
        effects.start("mailer", "k-1", 100).await.unwrap(),
        EffectState::Started {
            attempts: 1,
            first_started: 100
        }
    );
    assert_eq!(
        effects.start("mailer", "k-1", 200).await.unwrap(),
        EffectState::Started {
            attempts: 2,
            first_started: 100
        },
        "a restart after a crash sees the earlier start"
    );
    effects.finish("mailer", "k-1", 300).await.unwrap();
    assert_eq!(
        effects.start("mailer", "k-1", 400).await.unwrap(),
        EffectState::Done
    );
    assert_eq!(
        effects.state("mailer", "k-1").await.unwrap(),
        Some(EffectState::Done)
    );
    assert_eq!(
        effects.start("other", "k-1", 500).await.unwrap(),
        EffectState::Started {
            attempts: 1,
            first_started: 500
        },
        "another consumer's effect under the same key is its own"
    );
}

/// A first failure makes a `FAILED` record with every field; a second failure of the same
/// consumer on the same stream adds an attempt to it and backs off further.
pub async fn records_failures_and_counts_attempts(stores: Store) {
    let store = stores.compensation;
    let first = store
        .record_failure(&failure("view", "a", 2, "down"), &SPEC, 10_000)
        .await
        .unwrap();
    assert_eq!(first.attempts, 1);
    assert_eq!(first.status, ExecutionFailedStatus::Failed);
    assert_eq!(first.next_retry_at, Some(11_000));
    assert_eq!(first.aggregate_id, account("a"));
    assert_eq!(first.version, 2);
    assert_eq!(first.stream_id, "stream-a-2");
    assert_eq!(first.event_ids, vec!["event-a-2-a", "event-a-2-b"]);
    assert_eq!(first.stage, CommandStage::Projected);
    assert_eq!(first.error_code, ErrorCode::ServiceUnavailable);
    assert_eq!(first.error_message, "down");
    assert_eq!(store.get(&first.id).await.unwrap(), Some(first.clone()));

    let second = store
        .record_failure(&failure("view", "a", 2, "still down"), &SPEC, 12_000)
        .await
        .unwrap();
    assert_eq!(second.id, first.id, "one record per consumer and stream");
    assert_eq!(second.attempts, 2);
    assert_eq!(second.next_retry_at, Some(14_000));
    assert_eq!(second.error_message, "still down");
    assert_eq!(second.created_at, 10_000);
    assert_eq!(second.updated_at, 12_000);

    let other = store
        .record_failure(&failure("mailer", "a", 2, "down"), &SPEC, 12_000)
        .await
        .unwrap();
    assert_ne!(other.id, first.id, "another consumer has its own record");
}

/// After `max_attempts` failures a record is `EXHAUSTED` and no longer due.
pub async fn exhausts_after_max_attempts(stores: Store) {
    let store = stores.compensation;
    let mut record = None;
    for attempt in 0..3 {
        record = Some(
            store
                .record_failure(&failure("view", "a", 1, "down"), &SPEC, 1_000 * attempt)
                .await
                .unwrap(),
        );
    }
    let record = record.unwrap();
    assert_eq!(record.attempts, 3);
    assert_eq!(record.status, ExecutionFailedStatus::Exhausted);
    assert_eq!(record.next_retry_at, None);
    assert!(store.due(i64::MAX, 10).await.unwrap().is_empty());
}

/// `due` returns the `FAILED` records whose time has come, in aggregate and version order;
/// a record marked succeeded is no longer due.
pub async fn due_records_come_in_version_order(stores: Store) {
    let store = stores.compensation;
    let late = store
        .record_failure(&failure("view", "a", 3, "down"), &SPEC, 0)
        .await
        .unwrap();
    let early = store
        .record_failure(&failure("view", "a", 2, "down"), &SPEC, 500)
        .await
        .unwrap();
    let other = store
        .record_failure(&failure("view", "b", 1, "down"), &SPEC, 0)
        .await
        .unwrap();
    let not_yet = store
        .record_failure(&failure("view", "c", 1, "down"), &SPEC, 50_000)
        .await
        .unwrap();
    let due: Vec<_> = store
        .due(2_000, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        due,
        vec![early.id.clone(), late.id.clone(), other.id.clone()]
    );
    assert_eq!(store.due(2_000, 1).await.unwrap().len(), 1);

    let done = store
        .mark_succeeded(&early.id, 3_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.status, ExecutionFailedStatus::Succeeded);
    assert_eq!(done.next_retry_at, None);
    assert_eq!(done.attempts, 1);
    let due: Vec<_> = store
        .due(100_000, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(due, vec![late.id, other.id, not_yet.id]);
    assert_eq!(store.mark_succeeded("no-such-id", 0).await.unwrap(), None);
}

/// `list` filters by status and consumer and pages by id.
pub async fn lists_by_status_and_consumer_in_pages(stores: Store) {
    let store = stores.compensation;
    let mut ids = Vec::new();
    for version in 1..=5 {
        let record = store
            .record_failure(&failure("view", "a", version, "down"), &SPEC, 0)
            .await
            .unwrap();
        ids.push(record.id);
    }
    store
        .record_failure(&failure("mailer", "a", 1, "down"), &SPEC, 0)
        .await
        .unwrap();
    store.mark_succeeded(&ids[0], 1).await.unwrap();

    let view = |status, after_id, limit| FailureQuery {
        status,
        consumer: Some("view".to_owned()),
        after_id,
        limit,
        ..FailureQuery::default()
    };
    let all = store.list(&FailureQuery::default()).await.unwrap();
    assert_eq!(all.len(), 6);
    let failed = store
        .list(&view(Some(ExecutionFailedStatus::Failed), None, 100))
        .await
        .unwrap();
    assert_eq!(
        failed.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        ids[1..].to_vec()
    );
    let page = store.list(&view(None, None, 2)).await.unwrap();
    assert_eq!(page.len(), 2);
    let next = store
        .list(&view(None, page.last().map(|r| r.id.clone()), 10))
        .await
        .unwrap();
    assert_eq!(next.len(), 3);
    assert!(next.iter().all(|r| r.id > page[1].id));

    let mut elsewhere = failure("view", "z", 1, "down");
    elsewhere.aggregate_id.tenant_id = "tenant-b".to_owned();
    let theirs = store.record_failure(&elsewhere, &SPEC, 0).await.unwrap();
    let by_tenant = |tenant: &str| FailureQuery {
        tenant_id: Some(tenant.to_owned()),
        ..FailureQuery::default()
    };
    assert_eq!(store.list(&by_tenant("tenant-a")).await.unwrap().len(), 6);
    assert_eq!(
        store.list(&by_tenant("tenant-b")).await.unwrap(),
        vec![theirs],
        "a tenant sees its own records"
    );
}

/// `list` filters by aggregate (its id, with or without its type) besides status, consumer
/// and tenant; `count` counts what the filters select, whatever the page.
pub async fn filters_by_aggregate_and_counts_the_matches(stores: Store) {
    let store = stores.compensation;
    let mut a = Vec::new();
    for version in 1..=3 {
        let record = store
            .record_failure(&failure("view", "a", version, "down"), &SPEC, 0)
            .await
            .unwrap();
        a.push(record.id);
    }
    store
        .record_failure(&failure("mailer", "a", 1, "down"), &SPEC, 0)
        .await
        .unwrap();
    store
        .record_failure(&failure("view", "b", 1, "down"), &SPEC, 0)
        .await
        .unwrap();
    let mut order = failure("view", "a", 1, "down");
    order.aggregate_id.aggregate_name = "order".to_owned();
    order.stream_id = "order-stream-a-1".to_owned();
    let order = store.record_failure(&order, &SPEC, 0).await.unwrap();
    store.mark_succeeded(&a[0], 1).await.unwrap();

    let of = |name: Option<&str>, id: &str| FailureQuery {
        aggregate_name: name.map(str::to_owned),
        aggregate_id: Some(id.to_owned()),
        ..FailureQuery::default()
    };
    assert_eq!(store.count(&FailureQuery::default()).await.unwrap(), 6);
    assert_eq!(store.count(&of(None, "a")).await.unwrap(), 5, "every type");
    assert_eq!(store.count(&of(Some("account"), "a")).await.unwrap(), 4);
    assert_eq!(
        store.list(&of(Some("order"), "a")).await.unwrap(),
        vec![order],
        "one type's aggregate"
    );
    assert_eq!(store.count(&of(Some("account"), "z")).await.unwrap(), 0);
    let failed_views = FailureQuery {
        status: Some(ExecutionFailedStatus::Failed),
        consumer: Some("view".to_owned()),
        ..of(Some("account"), "a")
    };
    let listed: Vec<_> = store
        .list(&failed_views)
        .await
        .unwrap()
        .into_iter()
        .map(|record| record.id)
        .collect();
    assert_eq!(listed, a[1..].to_vec());
    assert_eq!(store.count(&failed_views).await.unwrap(), 2);

    let page = FailureQuery {
        after_id: Some(a[1].clone()),
        limit: 1,
        ..failed_views.clone()
    };
    assert_eq!(store.list(&page).await.unwrap().len(), 1);
    assert_eq!(
        store.count(&page).await.unwrap(),
        2,
        "the total is the filters', whatever the page"
    );
    let elsewhere = FailureQuery {
        tenant_id: Some("tenant-b".to_owned()),
        ..of(None, "a")
    };
    assert_eq!(store.count(&elsewhere).await.unwrap(), 0, "per tenant");
}

/// An operator's retry spec is the record's own: kept, shown with who set it, judged at once
/// (a limit already reached exhausts the record, a higher one retries it again) and followed
/// by the next failure's backoff instead of the service's spec.
pub async fn an_operators_retry_spec_is_the_records_own(stores: Store) {
    let store = stores.compensation;
    let record = store
        .record_failure(&failure("view", "a", 1, "down"), &SPEC, 0)
        .await
        .unwrap();
    assert_eq!((record.retry_spec, record.updated_by.clone()), (None, None));
    let fast = RetrySpec {
        max_attempts: 5,
        initial_backoff_ms: 10,
        max_backoff_ms: 20,
    };
    let edited = store
        .edit(&record.id, &RecordEdit::RetrySpec(fast), "operator:x", 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(edited.retry_spec, Some(fast));
    assert_eq!(edited.updated_by.as_deref(), Some("operator:x"));
    assert_eq!(edited.updated_at, 100);
    assert_eq!(
        (edited.status, edited.next_retry_at),
        (ExecutionFailedStatus::Failed, Some(110)),
        "the new backoff after one attempt, from the edit"
    );
    assert_eq!(store.get(&record.id).await.unwrap(), Some(edited.clone()));

    let again = store
        .record_failure(&failure("view", "a", 1, "down"), &SPEC, 200)
        .await
        .unwrap();
    assert_eq!(again.attempts, 2);
    assert_eq!(
        again.next_retry_at,
        Some(220),
        "the record's spec, not the service's"
    );
    assert_eq!(again.retry_spec, Some(fast), "kept by a failure");

    let two = RetrySpec {
        max_attempts: 2,
        ..fast
    };
    let exhausted = store
        .edit(&record.id, &RecordEdit::RetrySpec(two), "operator:y", 300)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (exhausted.status, exhausted.next_retry_at),
        (ExecutionFailedStatus::Exhausted, None)
    );
    assert!(store.due(i64::MAX, 10).await.unwrap().is_empty());
    let more = store
        .edit(&record.id, &RecordEdit::RetrySpec(fast), "operator:y", 400)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (more.status, more.next_retry_at),
        (ExecutionFailedStatus::Failed, Some(420)),
        "a higher limit retries an exhausted record again"
    );
    assert_eq!(store.due(420, 10).await.unwrap(), vec![more]);

    store.mark_succeeded(&record.id, 500).await.unwrap();
    let settled = store
        .edit(&record.id, &RecordEdit::RetrySpec(two), "operator:z", 600)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(settled.status, ExecutionFailedStatus::Succeeded);
    assert_eq!(settled.retry_spec, Some(two));
    assert_eq!(
        store
            .edit("no-such-id", &RecordEdit::RetrySpec(two), "operator:z", 600)
            .await
            .unwrap(),
        None
    );
}

/// An operator's judgement of a record is kept (by later failures too) and filterable; an
/// `UNRECOVERABLE` record is never due, and is again once marked otherwise.
pub async fn an_unrecoverable_record_is_never_due(stores: Store) {
    let store = stores.compensation;
    let record = store
        .record_failure(&failure("view", "a", 1, "down"), &SPEC, 0)
        .await
        .unwrap();
    let other = store
        .record_failure(&failure("view", "b", 1, "down"), &SPEC, 0)
        .await
        .unwrap();
    assert_eq!(record.recoverable, RecoverableType::Unknown);
    let mark = |kind| RecordEdit::Recoverable(kind);
    let marked = store
        .edit(&record.id, &mark(RecoverableType::Unrecoverable), "op", 50)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(marked.recoverable, RecoverableType::Unrecoverable);
    assert_eq!(
        (marked.status, marked.next_retry_at, marked.attempts),
        (record.status, record.next_retry_at, record.attempts),
        "nothing else changes"
    );
    assert_eq!(
        (marked.updated_by.as_deref(), marked.updated_at),
        (Some("op"), 50)
    );
    assert_eq!(store.get(&record.id).await.unwrap(), Some(marked.clone()));
    let due: Vec<_> = store
        .due(i64::MAX, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|record| record.id)
        .collect();
    assert_eq!(due, vec![other.id.clone()], "never due");

    let again = store
        .record_failure(&failure("view", "a", 1, "down"), &SPEC, 60)
        .await
        .unwrap();
    assert_eq!(again.recoverable, RecoverableType::Unrecoverable, "kept");
    let judged = |kind| FailureQuery {
        recoverable: Some(kind),
        ..FailureQuery::default()
    };
    assert_eq!(
        store
            .list(&judged(RecoverableType::Unrecoverable))
            .await
            .unwrap(),
        vec![again]
    );
    assert_eq!(
        store
            .count(&judged(RecoverableType::Unknown))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .count(&judged(RecoverableType::Recoverable))
            .await
            .unwrap(),
        0
    );

    store
        .edit(&record.id, &mark(RecoverableType::Recoverable), "op", 70)
        .await
        .unwrap();
    assert_eq!(store.due(i64::MAX, 10).await.unwrap().len(), 2, "due again");
}

/// Concurrent failures of one consumer on one stream make one record that counts them all.
pub async fn concurrent_failures_make_one_record(stores: Store) {
    let store = stores.compensation;
    let spec = RetrySpec {
        max_attempts: 100,
        ..SPEC
    };
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .record_failure(&failure("view", "a", 1, "down"), &spec, 0)
                    .await
                    .unwrap()
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let records = store.list(&FailureQuery::default()).await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].attempts, 16);
}

/// Two tenants' aggregates with one id have a position each (SPEC TN-1), also when asked in
/// one call.
pub async fn positions_are_per_tenant(stores: Store) {
    let positions = stores.positions.as_ref();
    let a = account("same");
    let mut b = a.clone();
    b.tenant_id = "tenant-b".to_owned();
    positions.advance("view", &a, 1).await.unwrap();
    positions.advance("view", &a, 2).await.unwrap();
    assert_eq!(
        position(positions, "view", &b).await,
        None,
        "a's position is not b's"
    );
    positions.advance("view", &b, 1).await.unwrap();
    let both = positions
        .positions("view", &[a.clone(), b.clone()])
        .await
        .unwrap();
    assert_eq!(both.get(&a), Some(&2));
    assert_eq!(both.get(&b), Some(&1));
}
