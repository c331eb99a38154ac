//! Rebuilds beside the live view (SPEC DS-6): a new generation is filled from history while
//! the active one goes on serving and receiving live streams, then one write makes the new
//! generation the one readers read, and the old one is dropped.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use serde::Serialize;

use super::generation::{generation_name, Generation, ViewGenerations, REFRESH_EVERY};
use crate::event::IdPages;
use wow_core::event::{ConsumerError, DomainEventStream, ProcessError};
use wow_core::eventsourcing::{EventStore, EventStoreError};
use wow_core::view::{ViewStore, ViewStoreError};
use wow_core::{AggregateId, NamedAggregate};

/// A view a rebuild can fill a generation of: [`ViewProjection`](super::ViewProjection) and
/// [`MultiStreamProjection`](super::MultiStreamProjection) are.
#[async_trait]
pub trait RebuildableView: Send + Sync + fmt::Debug {
    /// The view's name.
    fn view_name(&self) -> &'static str;

    /// The version of the view's definition its rows are folded by.
    fn version(&self) -> u32;

    /// The aggregate types whose history the view folds.
    fn aggregates(&self) -> Vec<NamedAggregate>;

    /// Folds `stream` into the rows stored under `generation` (a
    /// [`generation_name`]), once: a stream already folded into that generation changes
    /// nothing.
    async fn fold_into(
        &self,
        generation: &str,
        stream: &DomainEventStream,
    ) -> Result<(), ConsumerError>;
}

/// Where a rebuild is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RebuildState {
    /// The new generation is announced; the rebuild waits until every process writes it.
    Announced,
    /// History is being folded into the new generation.
    Running,
    /// Readers read the new generation; the old one is dropped.
    Swapped,
    /// The rebuild stopped (`error` says why); readers go on reading the old generation.
    Failed,
}

/// How far a rebuild has come: what `GET /rebuilds/{view}` answers and a progress bar shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RebuildProgress {
    /// The view.
    pub view: String,
    /// The generation being filled (the active one once swapped).
    pub generation: u32,
    /// The definition's version the generation is folded by.
    pub version: u32,
    /// Where the rebuild is.
    pub state: RebuildState,
    /// Aggregates of the view's types, counted before the fill starts.
    pub aggregates_total: u64,
    /// Aggregates folded so far.
    pub aggregates_done: u64,
    /// Streams folded so far.
    pub streams: u64,
    /// Milliseconds since the rebuild started.
    pub elapsed_ms: u64,
    /// The time left at the rate so far, once an aggregate is done.
    pub eta_ms: Option<u64>,
    /// Why it failed, when it did.
    pub error: Option<String>,
}

impl RebuildProgress {
    fn new(view: &str, generation: u32, version: u32) -> Self {
        Self {
            view: view.to_owned(),
            generation,
            version,
            state: RebuildState::Announced,
            aggregates_total: 0,
            aggregates_done: 0,
            streams: 0,
            elapsed_ms: 0,
            eta_ms: None,
            error: None,
        }
    }

    fn timed(&mut self, started: Instant) {
        self.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.eta_ms =
            (self.aggregates_done > 0 && self.state == RebuildState::Running).then(|| {
                let left = self.aggregates_total.saturating_sub(self.aggregates_done);
                self.elapsed_ms.saturating_mul(left) / self.aggregates_done
            });
    }
}

/// Why a rebuild did not start or did not finish. Readers read the old generation whatever
/// the failure; a rebuild started again resumes the generation it was filling.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RebuildError {
    /// No view of that name is rebuilt here.
    #[error("no view is named `{name}`; the views are: {known}")]
    UnknownView {
        /// The name asked for.
        name: String,
        /// The views there are, comma-separated.
        known: String,
    },
    /// A rebuild of the view runs in this process already.
    #[error("view {0} is being rebuilt already")]
    AlreadyRunning(String),
    /// The view store failed (or another process changed the view's generations meanwhile).
    #[error("view store: {0}")]
    ViewStore(String),
    /// History could not be read.
    #[error(transparent)]
    EventStore(#[from] EventStoreError),
    /// A stream did not fold into the new generation.
    #[error("stream {stream} of {aggregate} did not fold: {error}")]
    Fold {
        /// The stream's aggregate, as it displays.
        aggregate: String,
        /// The stream's id.
        stream: String,
        /// What the fold said.
        error: Box<ConsumerError>,
    },
}

impl From<ViewStoreError> for RebuildError {
    fn from(error: ViewStoreError) -> Self {
        RebuildError::ViewStore(error.to_string())
    }
}

impl From<ProcessError> for RebuildError {
    fn from(error: ProcessError) -> Self {
        RebuildError::ViewStore(error.to_string())
    }
}

/// Aggregates folded at the same time: their writes share the store's group commits.
const PARALLEL_AGGREGATES: usize = 16;

/// The rebuilds of a service's views, and how far each has come.
#[derive(Debug, Clone)]
pub struct ViewRebuilds {
    inner: Arc<Rebuilds>,
}

#[derive(Debug)]
struct Rebuilds {
    /// The store each generation is stored in under its own name.
    views: Arc<dyn ViewStore>,
    events: Arc<dyn EventStore>,
    generations: Arc<ViewGenerations>,
    rebuildable: BTreeMap<&'static str, Arc<dyn RebuildableView>>,
    progress: Mutex<BTreeMap<String, RebuildProgress>>,
    settle: Duration,
}

impl ViewRebuilds {
    /// Rebuilds of `rebuildable` into `views` (the store under the readers' one, where each
    /// generation has its own name) from `events`, announcing generations in `generations`.
    pub fn new(
        views: Arc<dyn ViewStore>,
        events: Arc<dyn EventStore>,
        generations: Arc<ViewGenerations>,
        rebuildable: impl IntoIterator<Item = Arc<dyn RebuildableView>>,
    ) -> Self {
        Self {
            inner: Arc::new(Rebuilds {
                views,
                events,
                generations,
                rebuildable: rebuildable
                    .into_iter()
                    .map(|view| (view.view_name(), view))
                    .collect(),
                progress: Mutex::default(),
                settle: REFRESH_EVERY * 2,
            }),
        }
    }

    /// Waits `settle` (twice [`REFRESH_EVERY`] unless changed) after announcing a
    /// generation and after the swap: long enough for every process on the store to have
    /// read the change. Only a store no other process uses may wait less.
    pub fn with_settle(self, settle: Duration) -> Self {
        let inner = Rebuilds {
            views: self.inner.views.clone(),
            events: self.inner.events.clone(),
            generations: self.inner.generations.clone(),
            rebuildable: self.inner.rebuildable.clone(),
            progress: Mutex::default(),
            settle,
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The store each generation is stored in under its own name.
    pub fn store(&self) -> &Arc<dyn ViewStore> {
        &self.inner.views
    }

    /// The views that can be rebuilt, by name.
    pub fn views(&self) -> Vec<&'static str> {
        self.inner.rebuildable.keys().copied().collect()
    }

    /// Each view's last rebuild in this process, by view name.
    pub fn all(&self) -> Vec<RebuildProgress> {
        self.inner.progress_map().values().cloned().collect()
    }

    /// The last rebuild of `view` in this process, if one ran.
    pub fn progress(&self, view: &str) -> Option<RebuildProgress> {
        self.inner.progress_map().get(view).cloned()
    }

    /// Reads every view's generations from the store (at start, before anything reads or
    /// writes a view), and returns the views whose rows need a rebuild: those whose
    /// definition's version is not the one their active generation was folded by, and those
    /// a rebuild was filling when it stopped.
    pub async fn outdated(&self) -> Result<Vec<&'static str>, ViewStoreError> {
        let mut outdated = Vec::new();
        for (name, view) in &self.inner.rebuildable {
            let generation = self
                .inner
                .generations
                .load(self.inner.views.as_ref(), name)
                .await?;
            if generation.version != view.version() || generation.building.is_some() {
                outdated.push(*name);
            }
        }
        Ok(outdated)
    }

    /// Rebuilds `view` beside its active generation (see [`run`](Self::run)) in a task of
    /// its own, and answers at once with its progress (state `ANNOUNCED`). Fails with
    /// [`RebuildError::UnknownView`] or [`RebuildError::AlreadyRunning`].
    pub fn start(&self, view: &str) -> Result<RebuildProgress, RebuildError> {
        let (name, started) = self.inner.claim(view)?;
        let rebuilds = self.clone();
        tokio::spawn(async move {
            let mut unseen = |_: &RebuildProgress| {};
            let _ = rebuilds.inner.rebuild(name, &mut unseen).await;
        });
        Ok(started)
    }

    /// Rebuilds `view` and returns once readers read the new generation: announces a new
    /// generation (or resumes the one a stopped rebuild was filling), waits until every
    /// process writes live streams into it too, folds the whole history of the view's types
    /// into it (aggregates in parallel, calling `progress` after each), then makes it the
    /// active one in one write and drops the old one. Readers read the old generation until
    /// the swap, the new one after it: never an empty or partial view.
    ///
    /// Fails with [`RebuildError`]; readers then go on reading the old generation, and a
    /// rebuild started again resumes. Cancel safe in the same way: dropped, it leaves the
    /// new generation to be resumed.
    pub async fn run(
        &self,
        view: &str,
        progress: &mut (dyn FnMut(&RebuildProgress) + Send),
    ) -> Result<RebuildProgress, RebuildError> {
        let (name, _) = self.inner.claim(view)?;
        self.inner.rebuild(name, progress).await
    }
}

impl Rebuilds {
    fn progress_map(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, RebuildProgress>> {
        self.progress
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Marks `view` as being rebuilt here, unless it is already.
    fn claim(&self, view: &str) -> Result<(&'static str, RebuildProgress), RebuildError> {
        let Some((name, rebuildable)) = self.rebuildable.get_key_value(view) else {
            return Err(RebuildError::UnknownView {
                name: view.to_owned(),
                known: self
                    .rebuildable
                    .keys()
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let mut progress = self.progress_map();
        if progress.get(view).is_some_and(|last| {
            matches!(last.state, RebuildState::Announced | RebuildState::Running)
        }) {
            return Err(RebuildError::AlreadyRunning(view.to_owned()));
        }
        let generation = self.generations.get(view);
        let started = RebuildProgress::new(
            view,
            generation.building.unwrap_or(generation.active + 1),
            rebuildable.version(),
        );
        progress.insert(view.to_owned(), started.clone());
        Ok((name, started))
    }

    fn report(&self, step: &RebuildProgress, progress: &mut (dyn FnMut(&RebuildProgress) + Send)) {
        self.progress_map().insert(step.view.clone(), step.clone());
        progress(step);
    }

    async fn rebuild(
        &self,
        name: &'static str,
        progress: &mut (dyn FnMut(&RebuildProgress) + Send),
    ) -> Result<RebuildProgress, RebuildError> {
        let started = Instant::now();
        let mut step = match self.progress_map().get(name) {
            Some(step) => step.clone(),
            None => RebuildProgress::new(name, 0, 0),
        };
        let outcome = self.fill_and_swap(name, &mut step, started, progress).await;
        if let Err(error) = &outcome {
            step.state = RebuildState::Failed;
            step.error = Some(error.to_string());
            step.timed(started);
            tracing::warn!(view = name, %error, "a view's rebuild stopped; readers go on reading the old generation");
            self.report(&step, progress);
        }
        outcome.map(|()| step)
    }

    async fn fill_and_swap(
        &self,
        name: &'static str,
        step: &mut RebuildProgress,
        started: Instant,
        progress: &mut (dyn FnMut(&RebuildProgress) + Send),
    ) -> Result<(), RebuildError> {
        let view = self.rebuildable[name].clone();
        let announced = self.announce(view.as_ref()).await?;
        let Some(building) = announced.building else {
            return Ok(());
        };
        step.generation = building;
        self.report(step, progress);
        tracing::info!(
            view = name,
            generation = building,
            "rebuilding a view beside the live one"
        );
        tokio::time::sleep(self.settle).await;
        step.state = RebuildState::Running;
        step.aggregates_total = self.count(&view.aggregates()).await?;
        self.report(step, progress);
        let target = generation_name(name, building);
        for named in view.aggregates() {
            self.fill_type(view.as_ref(), &target, &named, step, started, progress)
                .await?;
        }
        let swapped = Generation {
            active: building,
            version: announced.building_version.unwrap_or(view.version()),
            building: None,
            building_version: None,
        };
        let swapped_here = self.swap(name, announced, swapped).await?;
        step.state = RebuildState::Swapped;
        step.timed(started);
        self.report(step, progress);
        tracing::info!(
            view = name,
            generation = building,
            streams = step.streams,
            elapsed_ms = step.elapsed_ms,
            "readers read the rebuilt view"
        );
        if swapped_here {
            tokio::time::sleep(self.settle).await;
            self.views
                .clear(&generation_name(name, announced.active))
                .await?;
        }
        Ok(())
    }

    /// Makes `swapped` the view's generations in one write, from `announced`. Another
    /// process that filled the same generation may have swapped first: then `false` (that
    /// process drops the old generation), else `true`.
    async fn swap(
        &self,
        name: &str,
        announced: Generation,
        swapped: Generation,
    ) -> Result<bool, RebuildError> {
        let Err(error) = self
            .generations
            .change(self.views.as_ref(), name, announced, swapped)
            .await
        else {
            return Ok(true);
        };
        let now = self.generations.load(self.views.as_ref(), name).await?;
        if now.active == swapped.active && now.building.is_none() {
            return Ok(false);
        }
        Err(error.into())
    }

    /// The view's generations with a building one folded by the view's version: the one a
    /// stopped rebuild left, else a new one announced now. A generation a stopped rebuild
    /// left for another version of the view is emptied and filled again.
    async fn announce(&self, view: &dyn RebuildableView) -> Result<Generation, RebuildError> {
        let name = view.view_name();
        let current = self.generations.load(self.views.as_ref(), name).await?;
        let version = Some(view.version());
        let building = match current.building {
            Some(_) if current.building_version == version => return Ok(current),
            Some(building) => {
                self.views.clear(&generation_name(name, building)).await?;
                building
            }
            None => current.active + 1,
        };
        if current.active > 0 && current.building.is_none() {
            // The generation before the active one, if a swap's drop of it was cut off.
            self.views
                .clear(&generation_name(name, current.active - 1))
                .await?;
        }
        let announced = Generation {
            building: Some(building),
            building_version: version,
            ..current
        };
        match self
            .generations
            .change(self.views.as_ref(), name, current, announced)
            .await
        {
            Ok(()) => Ok(announced),
            Err(error) => {
                // Another process announced first: fill the generation it announced, if it
                // is for this version of the view.
                let now = self.generations.load(self.views.as_ref(), name).await?;
                match now.building {
                    Some(_) if now.building_version == version => Ok(now),
                    _ => Err(error.into()),
                }
            }
        }
    }

    async fn count(&self, aggregates: &[NamedAggregate]) -> Result<u64, RebuildError> {
        let mut total = 0;
        for named in aggregates {
            let mut pages = IdPages::new(self.events.as_ref(), named);
            while let Some(page) = pages.next().await? {
                total += page.len() as u64;
            }
        }
        Ok(total)
    }

    /// Folds every aggregate of type `named` into `target`, several at a time.
    async fn fill_type(
        &self,
        view: &dyn RebuildableView,
        target: &str,
        named: &NamedAggregate,
        step: &mut RebuildProgress,
        started: Instant,
        progress: &mut (dyn FnMut(&RebuildProgress) + Send),
    ) -> Result<(), RebuildError> {
        let mut pages = IdPages::new(self.events.as_ref(), named);
        while let Some(page) = pages.next().await? {
            let mut folded = futures::stream::iter(
                page.into_iter()
                    .map(|aggregate| self.fill_aggregate(view, target, aggregate)),
            )
            .buffer_unordered(PARALLEL_AGGREGATES);
            while let Some(streams) = folded.next().await {
                step.streams += streams?;
                step.aggregates_done += 1;
                step.timed(started);
                self.report(step, progress);
            }
        }
        Ok(())
    }

    /// Folds the whole history of `aggregate` into `target`, in version order.
    async fn fill_aggregate(
        &self,
        view: &dyn RebuildableView,
        target: &str,
        aggregate: AggregateId,
    ) -> Result<u64, RebuildError> {
        let history = self.events.load(&aggregate, 1, u64::MAX).await?;
        for stream in &history {
            view.fold_into(target, stream)
                .await
                .map_err(|error| RebuildError::Fold {
                    aggregate: aggregate.to_string(),
                    stream: stream.id.clone(),
                    error: Box::new(error),
                })?;
        }
        Ok(history.len() as u64)
    }
}
