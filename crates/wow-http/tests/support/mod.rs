//! What the HTTP tests share: a router served on an ephemeral port, the bank over an
//! in-memory store, and the `Wow-Error-Code` of an answer.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_example_bank::Bank;

/// Serves `app` on a free port of 127.0.0.1 until the test's runtime ends; its base URL.
pub(crate) async fn listen(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

/// The bank over a fresh in-memory store, and that store's history.
pub(crate) async fn in_memory_bank() -> (Bank, Arc<dyn EventStore>) {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let bank = Bank::start(wow_core::Stores::in_memory().with_events(store.clone()))
        .await
        .unwrap();
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
