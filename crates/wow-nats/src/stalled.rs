//! Which owned partitions are not being consumed right now: what `/health` reports as not
//! ready.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// The partitions whose consumer is stalled (its server's heartbeats stopped coming) or
/// failed and is being made again, shared by every clone of a
/// [`PartitionConsumer`](crate::PartitionConsumer). A partition leaves the set once its
/// consumer delivers again, or has heard from its server for a while, or once the node
/// stops consuming it.
#[derive(Debug, Clone, Default)]
pub struct StalledPartitions(Arc<Mutex<BTreeSet<u32>>>);

impl StalledPartitions {
    /// The stalled partitions, in order.
    pub fn now(&self) -> Vec<u32> {
        self.lock().iter().copied().collect()
    }

    /// Whether no owned partition is stalled.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub(crate) fn mark(&self, partition: u32) {
        self.lock().insert(partition);
    }

    pub(crate) fn clear(&self, partition: u32) {
        self.lock().remove(&partition);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        // The set stays consistent whatever a panicking holder did: each change is one call.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
