//! View generations: a view's rows live in one generation at a time; readers read the active
//! one, and a rebuild fills the next beside it and then makes it the active one in one write
//! (see [`ViewRebuilds`](super::ViewRebuilds)).
//!
//! Which generation is active is a row of the view store itself (view
//! [`GENERATIONS_VIEW`]), so every process on the store finds the same answer: each reads it
//! at start and again every [`REFRESH_EVERY`].

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use wow_core::event::{ProcessError, Processed};
use wow_core::eventsourcing::BoxError;
use wow_core::id::new_id;
use wow_core::query::{DocumentQuery, Filter};
use wow_core::view::{ViewFilter, ViewKey, ViewRow, ViewStore, ViewStoreError, ViewUpdate};

/// The view whose rows say which generation of each view is active (one row per view).
pub const GENERATIONS_VIEW: &str = "wow_view_generation";

/// The tenant of [`GENERATIONS_VIEW`]'s rows: the framework's own, never a caller's.
const GENERATIONS_TENANT: &str = "(system)";

/// How often each process reads the active generations again. A rebuild waits twice this
/// long after announcing a new generation before it starts filling it, and before it drops
/// the old one after the swap, so that every process writes the new one before it is filled
/// and no reader is still pointed at the old one when it goes.
pub const REFRESH_EVERY: Duration = Duration::from_secs(1);

/// The name the rows of `view`'s generation `generation` are stored under: the view's own
/// name for generation 0 (the rows written before a view had generations), `{view}@{n}`
/// after it.
pub fn generation_name(view: &str, generation: u32) -> String {
    if generation == 0 {
        view.to_owned()
    } else {
        format!("{view}@{generation}")
    }
}

/// Which generation of one view readers read, and which one a rebuild is filling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Generation {
    /// The generation readers read.
    pub active: u32,
    /// The view definition's version (`View::VERSION`) the active generation was folded by.
    pub version: u32,
    /// The generation a rebuild is filling, if one is.
    pub building: Option<u32>,
    /// The definition's version the building generation is folded by.
    pub building_version: Option<u32>,
}

impl Generation {
    /// The stored name of the active generation of `view`.
    pub fn active_name(&self, view: &str) -> String {
        generation_name(view, self.active)
    }

    /// The stored name of the generation a rebuild of `view` fills, if one does.
    pub fn building_name(&self, view: &str) -> Option<String> {
        self.building
            .map(|building| generation_name(view, building))
    }
}

/// A change of a view's generations that found another change first (two processes began a
/// rebuild at once, say): nothing was written.
#[derive(Debug, thiserror::Error)]
#[error("the generations of view {view} changed meanwhile (now {found:?})")]
pub struct GenerationConflict {
    /// The view.
    pub view: String,
    /// The generations as another change left them.
    pub found: Generation,
}

/// The generations of the views a process knows, as it last read them from the store.
/// Shared by the projections (which write the active and the building generation), the
/// store readers read through ([`GenerationalViews`]) and the rebuilds.
#[derive(Debug, Default)]
pub struct ViewGenerations {
    known: RwLock<HashMap<String, Generation>>,
}

impl ViewGenerations {
    /// No view known yet: every view reads and writes its generation 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// `view`'s generations as last read (generation 0 when never read).
    pub fn get(&self, view: &str) -> Generation {
        self.known
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(view)
            .copied()
            .unwrap_or_default()
    }

    /// The stored name readers of `view` read: its active generation's. A name this process
    /// knows no generations of (a generation's own stored name, another store's view) is
    /// returned as it is.
    pub fn read_name(&self, view: &str) -> String {
        match self
            .known
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(view)
        {
            Some(generation) => generation.active_name(view),
            None => view.to_owned(),
        }
    }

    /// The stored name readers of `view` read, when it is not `view` itself (its active
    /// generation is past 0): `None` for generation 0 and for a name this process knows no
    /// generations of.
    pub fn renamed(&self, view: &str) -> Option<String> {
        let known = self
            .known
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let generation = known.get(view)?;
        (generation.active != 0).then(|| generation.active_name(view))
    }

    /// The views whose generations this process follows.
    pub fn views(&self) -> Vec<String> {
        self.known
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    fn remember(&self, view: &str, generation: Generation) {
        self.known
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(view.to_owned(), generation);
    }

    /// Reads `view`'s generations from `store` and remembers them (generation 0 when the
    /// store has no row for it: the view has never been rebuilt beside itself).
    ///
    /// Fails with the store's error; then what this process knew stays as it was.
    pub async fn load(
        &self,
        store: &dyn ViewStore,
        view: &str,
    ) -> Result<Generation, ViewStoreError> {
        let generation = match store.load(&pointer_key(view)).await? {
            Some(row) => serde_json::from_value(row.state)
                .map_err(|error| ViewStoreError::Internal(Box::new(error)))?,
            None => Generation::default(),
        };
        self.remember(view, generation);
        Ok(generation)
    }

    /// Reads the generations of every view this process follows again (each failure logged
    /// and left for the next refresh).
    pub async fn refresh(&self, store: &dyn ViewStore) {
        for view in self.views() {
            if let Err(error) = self.load(store, &view).await {
                tracing::warn!(view, %error, "cannot read the view's generations; trying again");
            }
        }
    }

    /// Changes `view`'s generations from `expected` to `next` in one write, and remembers
    /// them. Fails with [`GenerationConflict`] (as [`ProcessError::Work`]) when the store
    /// holds other generations than `expected`: then nothing was written.
    pub async fn change(
        &self,
        store: &dyn ViewStore,
        view: &str,
        expected: Generation,
        next: Generation,
    ) -> Result<(), ProcessError> {
        let key = pointer_key(view);
        let (row_key, name) = (key.clone(), view.to_owned());
        let state = serde_json::to_value(next).map_err(|error| ProcessError::Work(error.into()))?;
        let work: ViewUpdate = Box::new(move |current| {
            let found = match &current {
                Some(row) => serde_json::from_value::<Generation>(row.state.clone())?,
                None => Generation::default(),
            };
            if found != expected {
                return Err(Box::new(GenerationConflict { view: name, found }) as BoxError);
            }
            Ok(Some(ViewRow {
                version: current.map_or(1, |row| row.version + 1),
                key: row_key,
                state,
                updated_at: jiff::Timestamp::now().as_millisecond(),
            }))
        });
        store.update(&key, &new_id(), work).await?;
        self.remember(view, next);
        Ok(())
    }
}

/// The row of [`GENERATIONS_VIEW`] that holds `view`'s generations.
fn pointer_key(view: &str) -> ViewKey {
    ViewKey::new(GENERATIONS_VIEW, GENERATIONS_TENANT, view)
}

/// Reads `generations` again every [`REFRESH_EVERY`] until `stop` resolves.
pub async fn refresh_generations(
    generations: Arc<ViewGenerations>,
    store: Arc<dyn ViewStore>,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut every = tokio::time::interval(REFRESH_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = every.tick() => generations.refresh(store.as_ref()).await,
        }
    }
}

/// A view store whose reads of a view read its active generation: what readers (routes,
/// queries, fresh reads) are given, so that a rebuild's new generation is never read before
/// it has caught up, and the swap to it is one write. Rows come back under the view's own
/// name. Names of views without generations pass through unchanged.
#[derive(Debug)]
pub struct GenerationalViews {
    inner: Arc<dyn ViewStore>,
    generations: Arc<ViewGenerations>,
}

impl GenerationalViews {
    /// Reads of `inner` through `generations`.
    pub fn new(inner: Arc<dyn ViewStore>, generations: Arc<ViewGenerations>) -> Self {
        Self { inner, generations }
    }

    /// The store under it, where each generation is stored under its own name.
    pub fn inner(&self) -> &Arc<dyn ViewStore> {
        &self.inner
    }

    /// The key `key` is stored under, when it is not `key` itself.
    fn stored_key(&self, key: &ViewKey) -> Option<ViewKey> {
        let stored = self.generations.renamed(&key.view)?;
        Some(ViewKey::new(
            stored,
            key.tenant_id.clone(),
            key.aggregate_id.clone(),
        ))
    }
}

/// `row` under the view name `view` (the name it was asked for).
fn named(mut row: ViewRow, view: &str) -> ViewRow {
    view.clone_into(&mut row.key.view);
    row
}

#[async_trait]
impl ViewStore for GenerationalViews {
    async fn update(
        &self,
        key: &ViewKey,
        message_id: &str,
        work: ViewUpdate,
    ) -> Result<Processed, ProcessError> {
        let Some(stored) = self.stored_key(key) else {
            return self.inner.update(key, message_id, work).await;
        };
        let (asked, kept) = (key.view.clone(), stored.view.clone());
        let work: ViewUpdate = Box::new(move |current| {
            let next = work(current.map(|row| named(row, &asked)))?;
            Ok(next.map(|row| named(row, &kept)))
        });
        self.inner.update(&stored, message_id, work).await
    }

    async fn put_newer(&self, row: ViewRow) -> Result<bool, ViewStoreError> {
        match self.stored_key(&row.key) {
            Some(stored) => self.inner.put_newer(named(row, &stored.view)).await,
            None => self.inner.put_newer(row).await,
        }
    }

    async fn load(&self, key: &ViewKey) -> Result<Option<ViewRow>, ViewStoreError> {
        let Some(stored) = self.stored_key(key) else {
            return self.inner.load(key).await;
        };
        let row = self.inner.load(&stored).await?;
        Ok(row.map(|row| named(row, &key.view)))
    }

    async fn list(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &ViewFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        let stored = self.generations.read_name(view);
        let rows = self
            .inner
            .list(&stored, tenant_id, filter, after, limit)
            .await?;
        Ok(rows.into_iter().map(|row| named(row, view)).collect())
    }

    async fn query(
        &self,
        view: &str,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        let stored = self.generations.read_name(view);
        let rows = self.inner.query(&stored, tenant_id, query).await?;
        Ok(rows.into_iter().map(|row| named(row, view)).collect())
    }

    async fn count(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, ViewStoreError> {
        let stored = self.generations.read_name(view);
        self.inner.count(&stored, tenant_id, filter).await
    }

    async fn scan(
        &self,
        view: &str,
        after: Option<&ViewKey>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        let stored = self.generations.read_name(view);
        let rows = self.inner.scan(&stored, after, limit).await?;
        Ok(rows.into_iter().map(|row| named(row, view)).collect())
    }

    async fn clear(&self, view: &str) -> Result<(), ViewStoreError> {
        self.inner.clear(&self.generations.read_name(view)).await
    }

    async fn declare_query_index(&self, view: &str) -> Result<(), ViewStoreError> {
        self.inner
            .declare_query_index(&self.generations.read_name(view))
            .await
    }

    async fn declare_field_index(&self, view: &str, field: &str) -> Result<(), ViewStoreError> {
        self.inner
            .declare_field_index(&self.generations.read_name(view), field)
            .await
    }
}
