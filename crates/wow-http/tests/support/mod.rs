//! What the HTTP tests share: a router served on an ephemeral port, the bank over an
//! in-memory store, and the `Wow-Error-Code` of an answer.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::Stores;
use wow_example_bank::notifications::NotificationOutbox;
use wow_example_bank::projection::AccountBalance;
use wow_example_bank::registry;
use wow_example_bank::transfer::TransferSaga;
use wow_runtime::eventsourcing::SnapshotStrategy;
use wow_runtime::outbox::OutboxProcessor;
use wow_runtime::pipeline::LocalPipeline;
use wow_runtime::view::ViewProjection;

/// Serves `app` on a free port of 127.0.0.1 until the test's runtime ends; its base URL.
pub(crate) async fn listen(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

/// The bank's pipeline over `stores`: its aggregates, the `account_balance` view, the
/// `notifications` outbox and the `transfer` saga, as a service assembles them.
pub(crate) fn bank_pipeline(stores: &Stores) -> LocalPipeline {
    LocalPipeline::builder(registry().unwrap(), stores.events.clone())
        .projection(Arc::new(ViewProjection::<AccountBalance>::new(
            stores.views.clone(),
        )))
        .event_processor(Arc::new(OutboxProcessor::<NotificationOutbox>::new(
            stores.views.clone(),
        )))
        .saga(Arc::new(TransferSaga))
        .compensation(stores.compensation.clone(), Default::default())
        .positions(stores.positions.clone())
        .snapshots(stores.snapshots.clone(), SnapshotStrategy::Every(10))
        .build()
}

/// The bank over a fresh in-memory store, and that store's history.
pub(crate) async fn in_memory_bank() -> (LocalPipeline, Arc<dyn EventStore>) {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let bank = bank_pipeline(&Stores::in_memory().with_events(store.clone()));
    (bank, store)
}

/// The answer's `Wow-Error-Code`, or empty when it has none.
pub(crate) fn error_code(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("wow-error-code")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}
