//! The `notifications` processor: one outbox row per `Withdrawn` event, exactly once per
//! event id (a redelivered event finds its row and adds nothing). The outbox lives in memory
//! and is rebuilt from history at start; a durable outbox in the store's database comes with
//! the downstream work (SPEC DS-2).

use std::collections::HashSet;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::Serialize;
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::eventsourcing::{EventStore, EventStoreError};
use wow_core::DomainEventStream;

/// One notification to send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutboxRow {
    /// The `Withdrawn` event's id: the row's identity.
    pub event_id: String,
    /// The account.
    pub account_id: String,
    /// The amount withdrawn.
    pub amount: i64,
}

#[derive(Debug, Default)]
struct Outbox {
    rows: Vec<OutboxRow>,
    seen: HashSet<String>,
}

/// The processor and its outbox.
#[derive(Debug, Default)]
pub struct Notifications {
    outbox: Mutex<Outbox>,
}

impl Notifications {
    /// Every row written so far, in order.
    pub fn rows(&self) -> Vec<OutboxRow> {
        self.outbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .rows
            .clone()
    }

    fn record(&self, stream: &DomainEventStream) {
        let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        for event in stream.body.iter().filter(|e| e.name == "Withdrawn") {
            if outbox.seen.insert(event.id.clone()) {
                let amount = event.body["amount"].as_i64().unwrap_or(0);
                outbox.rows.push(OutboxRow {
                    event_id: event.id.clone(),
                    account_id: stream.aggregate_id.id.clone(),
                    amount,
                });
            }
        }
    }

    /// Records every `Withdrawn` event already in `store`.
    pub async fn catch_up(&self, store: &dyn EventStore) -> Result<(), EventStoreError> {
        crate::projection::for_each_stream(store, |stream| self.record(stream)).await
    }
}

#[async_trait]
impl EventConsumer for Notifications {
    fn name(&self) -> &str {
        "notifications"
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        self.record(stream);
        Ok(())
    }
}
