//! What a decision reads of other aggregates (SPEC DM-5): their current state from the store
//! (snapshot and history, never the cache, which another node may have passed).

use futures::future::BoxFuture;

use crate::eventsourcing::load_aggregate;
use wow_core::aggregate::{AggregateReader, AggregateState, ServiceFailure};
use wow_core::AggregateId;

use super::DefaultCommandHandler;

/// Reads other aggregates for one node's decisions.
pub(super) struct StoreReads<'a> {
    pub(super) node: &'a DefaultCommandHandler,
}

impl AggregateReader for StoreReads<'_> {
    fn read_state<'a>(
        &'a self,
        aggregate_id: &'a AggregateId,
    ) -> BoxFuture<'a, Result<AggregateState, ServiceFailure>> {
        Box::pin(async move {
            let failure = |message: String| ServiceFailure::new(aggregate_id.to_string(), message);
            let runtime = self
                .node
                .registry
                .find(&aggregate_id.aggregate_name)
                .map_err(|unknown| failure(unknown.to_string()))?;
            let state = load_aggregate(
                runtime.as_ref(),
                self.node.store.as_ref(),
                self.node.snapshots.as_deref(),
                aggregate_id,
            )
            .await
            .map_err(|error| failure(format!("cannot be read: {error}")))?;
            if state.exists() && !state.belongs_to(&aggregate_id.tenant_id) {
                // Another tenant's: to this tenant it does not exist.
                return Ok(runtime.initial_state());
            }
            Ok(state)
        })
    }
}
