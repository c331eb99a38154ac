//! `--embedded STORE`: the bank served in this process on a loopback port, started as
//! `wow serve` starts it (settings, store, `wow_example_bank::service`), so the load crosses
//! real HTTP.

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use wow_service::{ServiceError, Settings};

use super::error::BenchError;
use crate::serve::{open_store, ServeError};

/// The bank serving in this process.
#[derive(Debug)]
pub(crate) struct Embedded {
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    stop: oneshot::Sender<()>,
    served: JoinHandle<Result<(), ServiceError>>,
}

/// Starts the bank on the store at `store` (`memory://`, `sqlite:...`, `postgres://...`),
/// listening on a free loopback port.
pub(crate) async fn start(store: &str) -> Result<Embedded, BenchError> {
    let boxed = |error: ServeError| BenchError::Embedded(Box::new(error));
    let settings =
        Settings::resolve(None, Some(store.to_owned()), None).map_err(|e| boxed(e.into()))?;
    let stores = open_store(settings.store_url(None)).await.map_err(boxed)?;
    let running = wow_example_bank::service::service()
        .stores(stores)
        .settings(settings)
        .build()
        .await
        .map_err(|error| boxed(ServeError::Service(Box::new(error))))?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(BenchError::Listen)?;
    let address = listener.local_addr().map_err(BenchError::Listen)?;
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(running.serve_on(listener, async move {
        let _ = stopped.await;
    }));
    Ok(Embedded {
        url: format!("http://{address}"),
        stop,
        served,
    })
}

impl Embedded {
    /// Stops serving and waits for the consumer positions to be written.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        match self.served.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "the embedded service stopped with an error"),
            Err(error) => tracing::warn!(%error, "the embedded service did not stop cleanly"),
        }
    }
}
