//! Any [`View`] as a projection over any [`ViewStore`].

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;

use wow_core::aggregate::typed_events;
use wow_core::aggregate::{Aggregate, LifecycleEvent};
use wow_core::event::DomainEventStream;
use wow_core::event::{ConsumerError, EventConsumer, ProcessError};
use wow_core::eventsourcing::{BoxError, EventStore};
use wow_core::id::{Clock, SystemClock};
use wow_core::view::{View, ViewKey, ViewRow};
use wow_core::view::{ViewStore, ViewUpdate};
use wow_core::ErrorCode;

use super::consumed::{of_aggregate, stored_state, undecodable, update_failed};
use super::generation::ViewGenerations;
use super::rebuild::RebuildableView;
use wow_core::NamedAggregate;

/// Why a stream cannot be folded into a view row yet: an earlier stream of the aggregate has
/// not been applied (it failed and waits for its retry), so applying this one would skip it.
/// The projection fails with it; compensation retries the stream after the one before it.
#[derive(Debug, thiserror::Error)]
#[error("view {view}: aggregate {aggregate_id} is at version {at}; version {got} must wait for the versions before it")]
pub struct ViewOutOfOrder {
    /// The view.
    pub view: &'static str,
    /// The aggregate (its id within its tenant).
    pub aggregate_id: String,
    /// The version the row holds.
    pub at: u64,
    /// The version of the stream that came.
    pub got: u64,
}

/// Runs the view `V` as a projection (stage `PROJECTED`, consumer name [`View::NAME`]): each
/// stream of `V::Aggregate` is decoded once into typed events and folded into its row, in one
/// transaction with its processed-message record (SPEC DS-2). A stream that deletes or
/// recovers the aggregate is folded through [`View::on_lifecycle`] (SPEC DM-6).
///
/// Version order per aggregate: a stream at or below the row's version is already in (the
/// stream is recorded, the row unchanged); the next version is folded; a later one is a gap.
/// With the aggregate's history at hand ([`with_history`](Self::with_history)) the gap is
/// filled from it, each missing stream folded and recorded in order, and then the stream
/// that came: a stream that failed once (a store lost for a moment) holds no later stream of
/// its aggregate back, and its own retry finds it in. Without history the gap fails with
/// [`ViewOutOfOrder`] and is retried later. Streams of other aggregates are ignored.
pub struct ViewProjection<V: View> {
    store: Arc<dyn ViewStore>,
    clock: Arc<dyn Clock>,
    history: Option<Arc<dyn EventStore>>,
    generations: Option<Arc<ViewGenerations>>,
    view: PhantomData<fn() -> V>,
}

/// The most streams one gap is filled with at once from history.
const GAP_PAGE: u64 = 1000;

impl<V: View> fmt::Debug for ViewProjection<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ViewProjection")
            .field("view", &V::NAME)
            .field("store", &self.store)
            .finish()
    }
}

impl<V: View> ViewProjection<V> {
    /// The projection of `V` into `store`, stamping rows with the system clock.
    pub fn new(store: Arc<dyn ViewStore>) -> Self {
        Self {
            store,
            clock: Arc::new(SystemClock),
            history: None,
            generations: None,
            view: PhantomData,
        }
    }

    /// Writes the generations `generations` names (the active one, and the one a rebuild
    /// fills when its version is [`View::VERSION`]) instead of the rows stored under
    /// [`View::NAME`] alone.
    pub fn with_generations(mut self, generations: Arc<ViewGenerations>) -> Self {
        self.generations = Some(generations);
        self
    }

    /// Fills a gap in an aggregate's versions from `history` (its event store) instead of
    /// failing the stream after it.
    pub fn with_history(mut self, history: Arc<dyn EventStore>) -> Self {
        self.history = Some(history);
        self
    }

    /// Stamps rows' `updated_at` with `clock` instead.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The store the rows live in.
    pub fn store(&self) -> &Arc<dyn ViewStore> {
        &self.store
    }

    /// The stored names of the generations a live stream is folded into: the active one,
    /// and the one a rebuild fills for this version of the view.
    fn live_generations(&self) -> (Cow<'static, str>, Option<String>) {
        let Some(generations) = &self.generations else {
            return (Cow::Borrowed(V::NAME), None);
        };
        let generation = generations.get(V::NAME);
        let building = generation
            .building_name(V::NAME)
            .filter(|_| generation.building_version == Some(V::VERSION));
        let active = match generation.active {
            0 => Cow::Borrowed(V::NAME),
            _ => Cow::Owned(generation.active_name(V::NAME)),
        };
        (active, building)
    }

    fn update(
        &self,
        generation: &str,
        stream: &DomainEventStream,
    ) -> Result<(ViewKey, ViewUpdate), ConsumerError> {
        let folded =
            match LifecycleEvent::of_stream(stream) {
                Some(event) => Folded::Lifecycle(event),
                None => Folded::Events(typed_events::<V::Aggregate>(stream).map_err(|error| {
                    undecodable(format_args!("view {}", V::NAME), stream, error)
                })?),
            };
        let key = ViewKey::new(
            generation,
            stream.aggregate_id.tenant_id.clone(),
            stream.aggregate_id.id.clone(),
        );
        let (version, now, row_key) = (stream.version, self.clock.now_millis(), key.clone());
        let work: ViewUpdate = Box::new(move |current| {
            let (mut state, at) = stored_state::<V::State>(current)?;
            if version <= at {
                return Ok(None);
            }
            if version != at + 1 {
                return Err(Box::new(ViewOutOfOrder {
                    view: V::NAME,
                    aggregate_id: row_key.aggregate_id,
                    at,
                    got: version,
                }) as BoxError);
            }
            fold::<V>(&mut state, &folded)?;
            Ok(Some(ViewRow {
                key: row_key,
                version,
                state: serde_json::to_value(&state)?,
                updated_at: now,
            }))
        });
        Ok((key, work))
    }
}

/// What one stream folds into a row: the aggregate's typed events, or its soft delete or
/// recover (SPEC DM-6), which the node writes alone in its stream.
enum Folded<E> {
    Events(Vec<E>),
    Lifecycle(LifecycleEvent),
}

/// Folds `folded` into `state`; a panicking `apply` (or `on_lifecycle`) is a failure of this
/// stream, not of the process (SPEC PX-1).
fn fold<V: View>(
    state: &mut V::State,
    folded: &Folded<<V::Aggregate as Aggregate>::Event>,
) -> Result<(), BoxError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match folded {
        Folded::Events(events) => {
            for event in events {
                V::apply(state, event);
            }
        }
        Folded::Lifecycle(event) => V::on_lifecycle(state, *event),
    }))
    .map_err(|_| format!("view {}: apply panicked", V::NAME).into())
}

#[async_trait]
impl<V: View> EventConsumer for ViewProjection<V> {
    fn name(&self) -> &str {
        V::NAME
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        if !of_aggregate::<V::Aggregate>(stream) {
            return Ok(());
        }
        let (active, building) = self.live_generations();
        self.fold_into(&active, stream).await?;
        match building {
            Some(building) => self.fold_into(&building, stream).await,
            None => Ok(()),
        }
    }
}

#[async_trait]
impl<V: View> RebuildableView for ViewProjection<V> {
    fn view_name(&self) -> &'static str {
        V::NAME
    }

    fn version(&self) -> u32 {
        V::VERSION
    }

    fn aggregates(&self) -> Vec<NamedAggregate> {
        vec![V::Aggregate::named_aggregate()]
    }

    /// Folds `stream` into `generation`'s row, after the streams of its aggregate the row
    /// does not hold yet (from history, when the projection has it).
    async fn fold_into(
        &self,
        generation: &str,
        stream: &DomainEventStream,
    ) -> Result<(), ConsumerError> {
        if !of_aggregate::<V::Aggregate>(stream) {
            return Ok(());
        }
        match self.fold_one(generation, stream).await {
            Err(Failure::Gap { at, message }) => {
                let Some(history) = &self.history else {
                    return Err(Failure::Gap { at, message }.into_consumer_error());
                };
                self.fill_gap(generation, history.as_ref(), stream, at)
                    .await?;
                self.fold_one(generation, stream)
                    .await
                    .map_err(|failure| failure.into_consumer_error())
            }
            other => other.map_err(Failure::into_consumer_error),
        }
    }
}

/// Why one stream was not folded.
enum Failure {
    /// The row is at version `at`, short of the stream's version by more than one; `message`
    /// says so ([`ViewOutOfOrder`]).
    Gap { at: u64, message: String },
    /// Anything else, as the consumer reports it.
    Other(ConsumerError),
}

impl Failure {
    fn into_consumer_error(self) -> ConsumerError {
        match self {
            Failure::Gap { message, .. } => ConsumerError::new(
                ErrorCode::IllegalState,
                format!("the consumer's work failed: {message}"),
            ),
            Failure::Other(error) => error,
        }
    }
}

impl From<ConsumerError> for Failure {
    fn from(error: ConsumerError) -> Self {
        Failure::Other(error)
    }
}

impl<V: View> ViewProjection<V> {
    /// Folds `stream` into its row of `generation`, with its processed-message record.
    async fn fold_one(&self, generation: &str, stream: &DomainEventStream) -> Result<(), Failure> {
        let (key, work) = self.update(generation, stream)?;
        let error = match self.store.update(&key, &stream.id, work).await {
            Ok(_) => return Ok(()),
            Err(error) => error,
        };
        if let ProcessError::Work(work) = &error {
            if let Some(gap) = work.downcast_ref::<ViewOutOfOrder>() {
                return Err(Failure::Gap {
                    at: gap.at,
                    message: gap.to_string(),
                });
            }
        }
        Err(Failure::Other(update_failed(error)))
    }

    /// Folds the streams of `stream`'s aggregate after version `at` and before its own, read
    /// from `history` a page at a time, each with its record, in version order.
    async fn fill_gap(
        &self,
        generation: &str,
        history: &dyn EventStore,
        stream: &DomainEventStream,
        at: u64,
    ) -> Result<(), ConsumerError> {
        let mut from = at + 1;
        while from < stream.version {
            let to = (stream.version - 1).min(from.saturating_add(GAP_PAGE - 1));
            let missing = history
                .load(&stream.aggregate_id, from, to)
                .await
                .map_err(|error| {
                    ConsumerError::new(ErrorCode::ServiceUnavailable, error.to_string())
                })?;
            if missing.is_empty() {
                break;
            }
            for earlier in &missing {
                match self.fold_one(generation, earlier).await {
                    Ok(()) => {}
                    Err(failure) => return Err(failure.into_consumer_error()),
                }
            }
            from = to + 1;
        }
        tracing::debug!(view = V::NAME, aggregate = %stream.aggregate_id, from = at + 1, to = stream.version - 1, "a view's gap filled from history");
        Ok(())
    }
}
