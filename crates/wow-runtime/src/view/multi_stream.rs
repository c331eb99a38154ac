//! Any [`MultiStreamView`] as a projection over any [`ViewStore`] (SPEC DM-4).

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;

use wow_core::event::DomainEventStream;
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::id::{Clock, SystemClock};
use wow_core::view::{MultiStreamView, ViewInputs, ViewKey, ViewRow, ViewStore, ViewUpdate};

use super::consumed::{stored_state, undecodable, update_failed};
use super::generation::ViewGenerations;
use super::rebuild::RebuildableView;
use wow_core::NamedAggregate;

/// Runs the view `V` as a projection (stage `PROJECTED`, consumer name
/// [`MultiStreamView::NAME`]): each stream of an aggregate type `V` follows is decoded once,
/// its events sent to the rows `V` names, and each row's fold written in one transaction
/// with the record that this stream was folded into this row (SPEC DS-2): a redelivered
/// stream changes no row, and a stream whose second row failed finds its first one done on
/// the retry. Streams of other types are ignored; soft deletes and recovers (streams of the
/// built-in lifecycle events) fold nothing.
///
/// A row's `version` counts the streams folded into it.
pub struct MultiStreamProjection<V: MultiStreamView> {
    store: Arc<dyn ViewStore>,
    clock: Arc<dyn Clock>,
    inputs: ViewInputs<V::State>,
    generations: Option<Arc<ViewGenerations>>,
    view: PhantomData<fn() -> V>,
}

impl<V: MultiStreamView> fmt::Debug for MultiStreamProjection<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiStreamProjection")
            .field("view", &V::NAME)
            .field("inputs", &self.inputs)
            .finish_non_exhaustive()
    }
}

impl<V: MultiStreamView> MultiStreamProjection<V> {
    /// The projection of `V` into `store`, stamping rows with the system clock.
    pub fn new(store: Arc<dyn ViewStore>) -> Self {
        Self {
            store,
            clock: Arc::new(SystemClock),
            inputs: V::inputs(ViewInputs::new()),
            generations: None,
            view: PhantomData,
        }
    }

    /// Writes the generations `generations` names (the active one, and the one a rebuild
    /// fills when its version is [`MultiStreamView::VERSION`]) instead of the rows stored
    /// under [`MultiStreamView::NAME`] alone.
    pub fn with_generations(mut self, generations: Arc<ViewGenerations>) -> Self {
        self.generations = Some(generations);
        self
    }

    /// Stamps rows' `updated_at` with `clock` instead.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

#[async_trait]
impl<V: MultiStreamView> EventConsumer for MultiStreamProjection<V> {
    fn name(&self) -> &str {
        V::NAME
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        let Some(generations) = &self.generations else {
            return self.fold_into(V::NAME, stream).await;
        };
        let generation = generations.get(V::NAME);
        self.fold_into(&generation.active_name(V::NAME), stream)
            .await?;
        match generation.building_name(V::NAME) {
            Some(building) if generation.building_version == Some(V::VERSION) => {
                self.fold_into(&building, stream).await
            }
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl<V: MultiStreamView> RebuildableView for MultiStreamProjection<V> {
    fn view_name(&self) -> &'static str {
        V::NAME
    }

    fn version(&self) -> u32 {
        V::VERSION
    }

    fn aggregates(&self) -> Vec<NamedAggregate> {
        self.inputs.aggregates()
    }

    /// Folds `stream`'s events into the rows of `generation` they go to, each once.
    async fn fold_into(
        &self,
        generation: &str,
        stream: &DomainEventStream,
    ) -> Result<(), ConsumerError> {
        let changes = self
            .inputs
            .changes(stream)
            .map_err(|error| undecodable(format_args!("view {}", V::NAME), stream, error))?;
        for change in changes {
            let key = ViewKey::new(
                generation,
                stream.aggregate_id.tenant_id.clone(),
                change.row.clone(),
            );
            // One record per (stream, row): each row of a stream is folded once.
            let message_id = format!("{}/{}", stream.id, change.row);
            let (row_key, now, fold) = (key.clone(), self.clock.now_millis(), change.fold);
            let work: ViewUpdate = Box::new(move |current| {
                let (mut state, folded) = stored_state::<V::State>(current)?;
                // A panicking fold fails this stream, not the process (SPEC PX-1).
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fold(&mut state)))
                    .map_err(|_| format!("view {}: a fold panicked", V::NAME))?;
                Ok(Some(ViewRow {
                    key: row_key,
                    version: folded + 1,
                    state: serde_json::to_value(&state)?,
                    updated_at: now,
                }))
            });
            self.store
                .update(&key, &message_id, work)
                .await
                .map_err(update_failed)?;
        }
        Ok(())
    }
}
