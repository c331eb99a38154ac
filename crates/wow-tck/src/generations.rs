//! The view-generations conformance suite (SPEC DS-6's rebuild): a view rebuilt beside the
//! live one over a backend's view store and history. Readers read the active generation
//! throughout (never an empty or partial row), live streams reach both generations, one
//! write swaps them, the old one is dropped; a changed definition is rebuilt, a stopped
//! rebuild resumes, a failing one leaves readers where they were. Run every case with
//! [`generations_tck!`](crate::generations_tck).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use wow_core::aggregate::Aggregate;
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::eventsourcing::EventStore;
use wow_core::testing_example::{Added, Counter, CounterEvent};
use wow_core::view::{View, ViewKey, ViewStore};
use wow_core::{id, AggregateId, DomainEvent, DomainEventStream, NamedAggregate};
use wow_runtime::view::{
    generation_name, GenerationalViews, RebuildError, RebuildState, RebuildableView,
    ViewGenerations, ViewProjection, ViewRebuilds,
};

/// The stores a rebuild runs over: views and history, on one backend.
#[derive(Debug)]
pub struct Stores {
    /// Where the generations are stored.
    pub views: Arc<dyn ViewStore>,
    /// The history a rebuild folds.
    pub events: Arc<dyn EventStore>,
    /// Whatever must live as long as the stores (a test schema's guard, say).
    pub owner: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl Stores {
    /// The views and history of a backend that keeps both on one type.
    pub fn of<T: ViewStore + EventStore + 'static>(store: Arc<T>) -> Self {
        Self {
            views: store.clone(),
            events: store,
            owner: None,
        }
    }

    /// These stores, keeping `owner` alive as long as they are.
    pub fn keeping(mut self, owner: Arc<dyn std::any::Any + Send + Sync>) -> Self {
        self.owner = Some(owner);
        self
    }
}

/// The stores under test.
pub type Store = Stores;

/// A counter's row: the sum of what was added, as the definition counts it.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sum {
    /// What was added (doubled by the second definition).
    pub sum: u64,
}

const VIEW: &str = "tck_counter_sum";

/// The view's first definition: adds what was added.
#[derive(Debug)]
struct SumV0;

impl View for SumV0 {
    type Aggregate = Counter;
    type State = Sum;
    const NAME: &'static str = VIEW;

    fn apply(state: &mut Sum, event: &CounterEvent) {
        if let CounterEvent::Added(added) = event {
            state.sum += added.by;
        }
    }
}

/// The view's second definition (version 1): doubles it.
#[derive(Debug)]
struct SumV1;

impl View for SumV1 {
    type Aggregate = Counter;
    type State = Sum;
    const NAME: &'static str = VIEW;
    const VERSION: u32 = 1;

    fn apply(state: &mut Sum, event: &CounterEvent) {
        if let CounterEvent::Added(added) = event {
            state.sum += 2 * added.by;
        }
    }
}

/// A third definition (version 2) whose apply panics on an addition of 13.
#[derive(Debug)]
struct SumBroken;

impl View for SumBroken {
    type Aggregate = Counter;
    type State = Sum;
    const NAME: &'static str = VIEW;
    const VERSION: u32 = 2;

    fn apply(state: &mut Sum, event: &CounterEvent) {
        if let CounterEvent::Added(added) = event {
            assert!(added.by != 13, "a definition that cannot fold 13");
            state.sum += added.by;
        }
    }
}

/// One process's view of the generations: its registry, the store its readers read, its
/// live projection of `V`, and its rebuilds of `V`.
struct Process<V: View> {
    readers: Arc<dyn ViewStore>,
    live: ViewProjection<V>,
    rebuilds: ViewRebuilds,
}

impl<V: View> Process<V> {
    /// A process starting on `stores`: it reads the generations before anything else.
    async fn start(stores: &Stores, pause: Option<Arc<Pause>>) -> (Self, Vec<&'static str>) {
        let generations = Arc::new(ViewGenerations::new());
        let readers: Arc<dyn ViewStore> = Arc::new(GenerationalViews::new(
            stores.views.clone(),
            generations.clone(),
        ));
        let folding: Arc<dyn RebuildableView> =
            Arc::new(ViewProjection::<V>::new(readers.clone()).with_history(stores.events.clone()));
        let folding = match pause {
            Some(pause) => Arc::new(Paused {
                inner: folding,
                pause,
            }) as Arc<dyn RebuildableView>,
            None => folding,
        };
        let rebuilds = ViewRebuilds::new(
            stores.views.clone(),
            stores.events.clone(),
            generations.clone(),
            [folding],
        )
        .with_settle(Duration::ZERO);
        let outdated = rebuilds.outdated().await.unwrap();
        let live = ViewProjection::<V>::new(readers.clone())
            .with_history(stores.events.clone())
            .with_generations(generations);
        (
            Self {
                readers,
                live,
                rebuilds,
            },
            outdated,
        )
    }

    /// Appends `stream` and delivers it live, as the dispatcher would.
    async fn append(&self, stores: &Stores, stream: &DomainEventStream) {
        stores.events.append(stream).await.unwrap();
        self.live.handle(stream).await.unwrap();
    }

    /// Every counter's row as readers see it: each must be there, at `version` at least,
    /// and hold the fold of its history by `fold` (never a partial row).
    async fn read_all(&self, counters: &[AggregateId], version: u64, fold: fn(u64) -> u64) {
        for counter in counters {
            let key = ViewKey::new(VIEW, counter.tenant_id.clone(), counter.id.clone());
            let row = self.readers.load(&key).await.unwrap();
            let row = row.unwrap_or_else(|| panic!("{counter}: readers found no row"));
            assert!(row.version >= version, "{counter}: at {}", row.version);
            let sum: Sum = serde_json::from_value(row.state).unwrap();
            assert_eq!(sum.sum, fold(row.version), "{counter} at {}", row.version);
            assert_eq!(row.key.view, VIEW, "rows come back under the view's name");
        }
    }
}

/// Added at version `v` (from 2 on): `v - 1`, so a counter at version `n` holds
/// `1 + ... + (n - 1)` by the first definition.
fn first(version: u64) -> u64 {
    version * version.saturating_sub(1) / 2
}

fn doubled(version: u64) -> u64 {
    2 * first(version)
}

fn stream(counter: &AggregateId, version: u64) -> DomainEventStream {
    let event = if version == 1 {
        CounterEvent::Started
    } else {
        CounterEvent::Added(Added { by: version - 1 })
    };
    DomainEventStream {
        id: id::new_id(),
        request_id: id::new_id(),
        command_id: id::new_id(),
        aggregate_id: counter.clone(),
        version,
        create_time: id::now_millis(),
        fingerprint: String::new(),
        header: Default::default(),
        body: vec![DomainEvent::of(&event).unwrap()],
    }
}

/// `count` counters over two tenants, each at `versions`, delivered live to `process`.
async fn counters<V: View>(
    stores: &Stores,
    process: &Process<V>,
    count: usize,
    versions: u64,
) -> Vec<AggregateId> {
    let named: NamedAggregate = Counter::named_aggregate();
    let mut made = Vec::new();
    for n in 0..count {
        let tenant = if n % 2 == 0 { "tenant-a" } else { "tenant-b" };
        let counter = named.aggregate_id(format!("c-{n:03}"), tenant);
        for version in 1..=versions {
            process.append(stores, &stream(&counter, version)).await;
        }
        made.push(counter);
    }
    made
}

/// Where a rebuild's fill stops until told to go on: at its `at`-th aggregate, and every
/// aggregate it starts after that one.
struct Pause {
    at: usize,
    seen: std::sync::Mutex<Vec<AggregateId>>,
    reached: Notify,
    resume: tokio::sync::watch::Sender<bool>,
}

impl Pause {
    fn at(at: usize) -> Arc<Self> {
        Arc::new(Self {
            at,
            seen: std::sync::Mutex::default(),
            reached: Notify::new(),
            resume: tokio::sync::watch::Sender::new(false),
        })
    }

    fn go_on(&self) {
        self.resume.send_replace(true);
    }
}

/// A view whose fill pauses at one aggregate.
#[derive(Debug)]
struct Paused {
    inner: Arc<dyn RebuildableView>,
    pause: Arc<Pause>,
}

impl std::fmt::Debug for Pause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pause").field("at", &self.at).finish()
    }
}

#[async_trait]
impl RebuildableView for Paused {
    fn view_name(&self) -> &'static str {
        self.inner.view_name()
    }

    fn version(&self) -> u32 {
        self.inner.version()
    }

    fn aggregates(&self) -> Vec<NamedAggregate> {
        self.inner.aggregates()
    }

    async fn fold_into(
        &self,
        generation: &str,
        stream: &DomainEventStream,
    ) -> Result<(), ConsumerError> {
        let visit = {
            let mut seen = self.pause.seen.lock().unwrap();
            let new = !seen.contains(&stream.aggregate_id);
            if new {
                seen.push(stream.aggregate_id.clone());
            }
            new.then_some(seen.len())
        };
        if visit.is_some_and(|nth| nth >= self.pause.at) {
            if visit == Some(self.pause.at) {
                self.pause.reached.notify_one();
            }
            let mut resume = self.pause.resume.subscribe();
            let _ = resume.wait_for(|go| *go).await;
        }
        self.inner.fold_into(generation, stream).await
    }
}

/// A rebuild beside the live view: while it fills the new generation, readers read every
/// row whole from the old one, live streams (of aggregates it folded already and of those it
/// has not reached) land in both, and after the swap readers read the new generation, whole
/// and current, and the old one is gone.
pub async fn a_rebuild_swaps_to_a_whole_generation_and_readers_never_see_less(stores: Store) {
    let pause = Pause::at(9);
    let (process, _) = Process::<SumV0>::start(&stores, Some(pause.clone())).await;
    let counters = counters(&stores, &process, 24, 3).await;
    process.read_all(&counters, 3, first).await;

    let rebuilds = process.rebuilds.clone();
    let running = tokio::spawn(async move {
        let mut unseen = |_: &wow_runtime::view::RebuildProgress| {};
        rebuilds.run(VIEW, &mut unseen).await
    });
    pause.reached.notified().await;
    let during = process.rebuilds.progress(VIEW).unwrap();
    assert_eq!(
        (during.state, during.generation),
        (RebuildState::Running, 1)
    );
    process.read_all(&counters, 3, first).await;
    for counter in &counters {
        process.append(&stores, &stream(counter, 4)).await;
    }
    process.read_all(&counters, 4, first).await;
    pause.go_on();

    let done = running.await.unwrap().unwrap();
    assert_eq!((done.state, done.generation), (RebuildState::Swapped, 1));
    assert_eq!(done.aggregates_done, 24);
    process.read_all(&counters, 4, first).await;
    for counter in &counters {
        let old = ViewKey::new(VIEW, counter.tenant_id.clone(), counter.id.clone());
        assert_eq!(
            stores.views.load(&old).await.unwrap(),
            None,
            "generation 0 dropped"
        );
        let kept = ViewKey::new(
            generation_name(VIEW, 1),
            counter.tenant_id.clone(),
            counter.id.clone(),
        );
        assert_eq!(stores.views.load(&kept).await.unwrap().unwrap().version, 4);
    }
    for counter in &counters {
        process.append(&stores, &stream(counter, 5)).await;
    }
    process.read_all(&counters, 5, first).await;
}

/// A changed definition (a higher `VERSION`) is found outdated at start and rebuilt beside
/// the rows of the old one, which readers read until the swap; a rebuild stopped halfway (a
/// process killed) is resumed by the next start, into the same generation.
pub async fn a_changed_definition_is_rebuilt_and_a_stopped_rebuild_resumes(stores: Store) {
    let (old, outdated) = Process::<SumV0>::start(&stores, None).await;
    assert!(outdated.is_empty(), "a view never rebuilt is at version 0");
    let counters = counters(&stores, &old, 12, 4).await;
    drop(old);

    let pause = Pause::at(5);
    let (stopped, outdated) = Process::<SumV1>::start(&stores, Some(pause.clone())).await;
    assert_eq!(
        outdated,
        vec![VIEW],
        "version 1 is not what the rows were folded by"
    );
    let mut unseen = |_: &wow_runtime::view::RebuildProgress| {};
    tokio::select! {
        outcome = stopped.rebuilds.run(VIEW, &mut unseen) => panic!("the fill pauses: {outcome:?}"),
        () = pause.reached.notified() => {}
    }
    stopped.read_all(&counters, 4, first).await;
    drop(stopped);

    let (next, outdated) = Process::<SumV1>::start(&stores, None).await;
    assert_eq!(
        outdated,
        vec![VIEW],
        "the stopped rebuild is still to finish"
    );
    next.read_all(&counters, 4, first).await;
    let done = next.rebuilds.run(VIEW, &mut |_| {}).await.unwrap();
    assert_eq!(
        (done.state, done.generation, done.version),
        (RebuildState::Swapped, 1, 1)
    );
    next.read_all(&counters, 4, doubled).await;
    for counter in &counters {
        next.append(&stores, &stream(counter, 5)).await;
    }
    next.read_all(&counters, 5, doubled).await;

    let (restarted, outdated) = Process::<SumV1>::start(&stores, None).await;
    assert!(outdated.is_empty(), "rebuilt for version 1: {outdated:?}");
    restarted.read_all(&counters, 5, doubled).await;
}

/// A rebuild whose fold fails stops, says why, and leaves readers on the old generation;
/// the fixed definition's rebuild starts that generation over and swaps.
pub async fn a_failing_rebuild_leaves_readers_on_the_old_generation(stores: Store) {
    let (old, _) = Process::<SumV0>::start(&stores, None).await;
    let counters = counters(&stores, &old, 6, 15).await;
    drop(old);

    let (broken, outdated) = Process::<SumBroken>::start(&stores, None).await;
    assert_eq!(outdated, vec![VIEW]);
    let error = broken.rebuilds.run(VIEW, &mut |_| {}).await.unwrap_err();
    assert!(matches!(error, RebuildError::Fold { .. }), "{error}");
    let failed = broken.rebuilds.progress(VIEW).unwrap();
    assert_eq!(failed.state, RebuildState::Failed);
    assert!(failed.error.unwrap().contains("did not fold"));
    broken.read_all(&counters, 15, first).await;
    drop(broken);

    let (fixed, outdated) = Process::<SumV1>::start(&stores, None).await;
    assert_eq!(outdated, vec![VIEW]);
    fixed.read_all(&counters, 15, first).await;
    let done = fixed.rebuilds.run(VIEW, &mut |_| {}).await.unwrap();
    assert_eq!(
        (done.state, done.generation, done.version),
        (RebuildState::Swapped, 1, 1)
    );
    fixed.read_all(&counters, 15, doubled).await;
}

/// Two processes rebuilding the same view at once (two processors started on a changed
/// definition, say) fill the same generation, one of them swaps, and both report it swapped;
/// readers read it whole.
pub async fn two_rebuilds_at_once_swap_once(stores: Store) {
    let (old, _) = Process::<SumV0>::start(&stores, None).await;
    let counters = counters(&stores, &old, 10, 5).await;
    drop(old);
    let (one, _) = Process::<SumV1>::start(&stores, None).await;
    let (two, _) = Process::<SumV1>::start(&stores, None).await;
    let (mut quiet_one, mut quiet_two) = (
        |_: &wow_runtime::view::RebuildProgress| {},
        |_: &wow_runtime::view::RebuildProgress| {},
    );
    let (first, second) = tokio::join!(
        one.rebuilds.run(VIEW, &mut quiet_one),
        two.rebuilds.run(VIEW, &mut quiet_two)
    );
    for done in [first.unwrap(), second.unwrap()] {
        assert_eq!((done.state, done.generation), (RebuildState::Swapped, 1));
    }
    let (after, outdated) = Process::<SumV1>::start(&stores, None).await;
    assert!(outdated.is_empty(), "{outdated:?}");
    after.read_all(&counters, 5, doubled).await;
}
