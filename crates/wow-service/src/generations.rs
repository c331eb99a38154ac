//! The service's views in generations: readers read each view's active generation, the
//! projections write it (and the one a rebuild fills), and a view whose definition's version
//! changed is rebuilt beside itself once the service serves (SPEC DS-6).

use std::sync::Arc;

use wow_core::view::ViewStore;
use wow_core::Stores;
use wow_runtime::view::{
    refresh_generations, GenerationalViews, RebuildProgress, RebuildState, ViewRebuilds,
};

use crate::builder::ServiceBuilder;
use crate::ServiceError;

impl ServiceBuilder {
    /// `stores` with their view store read through the views' active generations, and the
    /// rebuilds of the service's views, every view's generations read from the store.
    /// Returns the views a rebuild must bring to their definition's version too.
    pub(crate) async fn view_generations(
        &mut self,
        mut stores: Stores,
    ) -> Result<(Stores, ViewRebuilds, Vec<&'static str>), ServiceError> {
        let kept: Arc<dyn ViewStore> = stores.views.clone();
        stores.views = Arc::new(GenerationalViews::new(
            kept.clone(),
            self.generations.clone(),
        ));
        let views: Vec<_> = self
            .rebuildable
            .drain(..)
            .map(|make| make(&stores))
            .collect();
        let rebuilds =
            ViewRebuilds::new(kept, stores.events.clone(), self.generations.clone(), views);
        let outdated = rebuilds.outdated().await?;
        Ok((stores, rebuilds, outdated))
    }

    /// Adds the service's own tasks for its views' generations: reading them again every
    /// second, and (where this process runs the consumers) rebuilding the `outdated` views
    /// one after the other.
    pub(crate) fn generation_tasks(
        &mut self,
        rebuilds: &ViewRebuilds,
        outdated: Vec<&'static str>,
        runs_consumers: bool,
    ) {
        if rebuilds.views().is_empty() {
            return;
        }
        let (generations, kept) = (self.generations.clone(), rebuilds.store().clone());
        self.tasks.push((
            "view-generations",
            Box::new(move |context| {
                Box::pin(async move {
                    refresh_generations(generations, kept, context.shutdown()).await;
                })
            }),
        ));
        if !runs_consumers || outdated.is_empty() {
            return;
        }
        let rebuilds = rebuilds.clone();
        self.tasks.push((
            "view-rebuilds",
            Box::new(move |context| {
                Box::pin(async move {
                    let mut log = log_progress;
                    for view in outdated {
                        tokio::select! {
                            () = context.shutdown() => return,
                            _ = rebuilds.run(view, &mut log) => {}
                        }
                    }
                })
            }),
        ));
    }
}

/// Logs a rebuild's progress at each tenth of its aggregates.
fn log_progress(step: &RebuildProgress) {
    let tenth = (step.aggregates_total / 10).max(1);
    if step.state == RebuildState::Running && step.aggregates_done % tenth == 0 {
        tracing::info!(
            view = step.view,
            generation = step.generation,
            done = step.aggregates_done,
            total = step.aggregates_total,
            eta_ms = step.eta_ms,
            "rebuilding a view beside the live one"
        );
    }
}
