//! The in-memory reference stores pass the whole conformance suite.

use std::sync::Arc;

use wow_core::eventsourcing::{InMemoryEventStore, InMemorySnapshotStore};

mod deadline {
    use super::*;
    wow_tck::deadline_store_tck!(|| async { Arc::new(InMemoryEventStore::new()) });
}

mod lifecycle {
    use super::*;
    wow_tck::lifecycle_tck!(|| async {
        wow_tck::lifecycle::Store::of(Arc::new(InMemoryEventStore::new()))
    });
}

mod event_store {
    use super::*;
    wow_tck::event_store_tck!(|| async { Arc::new(InMemoryEventStore::new()) });
}

mod snapshot_store {
    use super::*;
    wow_tck::snapshot_store_tck!(|| async { Arc::new(InMemorySnapshotStore::new()) });
}

mod view_store {
    use super::*;
    wow_tck::view_store_tck!(|| async { Arc::new(wow_core::view::InMemoryViewStore::new()) });
}

mod generations {
    use super::*;
    use wow_tck::generations::Stores;

    async fn stores() -> Stores {
        Stores {
            views: Arc::new(wow_core::view::InMemoryViewStore::new()),
            events: Arc::new(InMemoryEventStore::new()),
            owner: None,
        }
    }

    wow_tck::generations_tck!(stores);
}

mod processed_message {
    use std::collections::HashMap;

    use async_trait::async_trait;
    use wow_core::event::{InMemoryProcessedMessages, ProcessError, Processed};
    use wow_tck::processed_message::Ledger;

    use super::*;

    #[derive(Debug, Default)]
    struct MemoryLedger(InMemoryProcessedMessages<HashMap<String, i64>>);

    #[async_trait]
    impl Ledger for MemoryLedger {
        async fn apply_once(
            &self,
            consumer: &str,
            message_id: &str,
            amount: i64,
            fail: bool,
        ) -> Result<Processed, ProcessError> {
            self.0.process_once(consumer, message_id, |totals| {
                *totals.entry(consumer.to_owned()).or_default() += amount;
                if fail {
                    return Err("the work failed after writing".into());
                }
                Ok(())
            })
        }

        async fn total(&self, consumer: &str) -> i64 {
            self.0
                .read(|totals| totals.get(consumer).copied().unwrap_or(0))
        }
    }

    wow_tck::processed_message_tck!(|| async { Arc::new(MemoryLedger::default()) });
}

mod downstream {
    use wow_core::compensation::InMemoryCompensationStore;
    use wow_core::event::{
        InMemoryConsumerPositions, InMemoryEffectJournal, InMemoryParkedStreams,
    };
    use wow_tck::downstream::Stores;

    use super::*;

    async fn stores() -> Stores {
        Stores {
            compensation: Arc::new(InMemoryCompensationStore::new()),
            positions: Arc::new(InMemoryConsumerPositions::new()),
            effects: Arc::new(InMemoryEffectJournal::new()),
            parked: Arc::new(InMemoryParkedStreams::new()),
            events: Arc::new(wow_core::eventsourcing::InMemoryEventStore::new()),
            reopen: None,
            owner: None,
        }
    }

    wow_tck::downstream_tck!(stores);

    mod parking {
        wow_tck::parking_tck!(super::stores);
    }
}

mod rename {
    wow_tck::rename_tck!(|| async { wow_tck::rename::Store::of(wow_core::Stores::in_memory()) });
}
