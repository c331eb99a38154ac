//! An event store that holds appends until released: for testing what callers see while a
//! store is slow (timeouts, outcome look-ups, abandoned waits).

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Semaphore;

use crate::eventsourcing::{AppendChanges, EventStore, EventStoreDecorator, EventStoreError};
use wow_model::event::DomainEventStream;

/// Wraps a store; every append waits for a permit from [`GatedEventStore::release`] before it
/// reaches the inner store. Every other method, queries included, passes straight through.
#[derive(Debug)]
pub struct GatedEventStore {
    inner: Arc<dyn EventStore>,
    gate: Semaphore,
}

impl GatedEventStore {
    /// A gate, closed, in front of `inner`.
    pub fn new(inner: Arc<dyn EventStore>) -> Self {
        Self {
            inner,
            gate: Semaphore::new(0),
        }
    }

    /// Lets `appends` more appends through.
    pub fn release(&self, appends: usize) {
        self.gate.add_permits(appends);
    }

    /// Waits until the gate lets one append through, and takes its permit for good.
    async fn pass(&self) -> Result<(), EventStoreError> {
        let permit = self
            .gate
            .acquire()
            .await
            .map_err(|e| EventStoreError::Unavailable(Box::new(e)))?;
        permit.forget();
        Ok(())
    }
}

#[async_trait]
impl EventStoreDecorator for GatedEventStore {
    fn inner(&self) -> &dyn EventStore {
        &*self.inner
    }

    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        self.pass().await?;
        self.inner.append(stream).await
    }

    async fn append_with(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        self.pass().await?;
        self.inner.append_with(stream, changes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eventsourcing::{EventStoreMethod, RecordingEventStore};

    #[tokio::test]
    async fn every_method_of_a_gated_store_reaches_the_inner_store_once_released() {
        let inner = Arc::new(RecordingEventStore::new());
        let gated = GatedEventStore::new(inner.clone());
        // One permit for each kind of append the trace makes.
        gated.release(2);
        assert_eq!(
            inner.trace(&gated).await,
            EventStoreMethod::forwarded_trace()
        );
    }

    #[tokio::test]
    async fn a_closed_gate_holds_appends_of_both_kinds_and_nothing_else() {
        let inner = Arc::new(RecordingEventStore::new());
        let gated = GatedEventStore::new(inner.clone());
        let appends = [EventStoreMethod::Append, EventStoreMethod::AppendWith];
        for append in appends {
            let held =
                tokio::time::timeout(std::time::Duration::from_millis(20), append.call(&gated))
                    .await;
            assert!(held.is_err(), "{append:?} waits for a permit");
        }
        assert_eq!(inner.take_calls(), []);
        for &method in EventStoreMethod::ALL {
            if !appends.contains(&method) {
                method
                    .call(&gated)
                    .await
                    .unwrap_or_else(|e| panic!("{method:?}: {e}"));
                assert_eq!(inner.take_calls(), [method.forwarded_as()]);
            }
        }
    }
}
