//! A team's own background work, started with the service and stopped on its shutdown
//! ([`ServiceBuilder::background_task`](crate::ServiceBuilder::background_task)).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wow_core::Stores;
use wow_runtime::command::CommandGateway;

/// How long a stopping service waits for its tasks to return once they are asked to.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(10);

/// What a background task is given: the service's gateway (to send commands, each with its
/// own request id) and stores, and the signal that the service is shutting down.
#[derive(Debug, Clone)]
pub struct BackgroundContext {
    /// Sends commands as any in-process sender does.
    pub gateway: CommandGateway,
    /// The service's stores (reads; writes go through commands).
    pub stores: Stores,
    shutdown: CancellationToken,
}

impl BackgroundContext {
    /// Resolves once the service is shutting down: select on it in a loop and return soon
    /// after (a task still running 10 s later is cut off).
    pub async fn shutdown(&self) {
        self.shutdown.cancelled().await;
    }

    /// Whether the service is shutting down.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }
}

/// A task as the builder holds it until the service starts.
pub(crate) type TaskFactory =
    Box<dyn FnOnce(BackgroundContext) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// The running tasks of one service. Dropping it cuts them off.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    shutdown: CancellationToken,
    running: Vec<(&'static str, JoinHandle<()>)>,
}

impl Tasks {
    /// Starts `tasks`, each with its own context. Must be called inside a tokio runtime.
    pub(crate) fn start(
        tasks: Vec<(&'static str, TaskFactory)>,
        gateway: &CommandGateway,
        stores: &Stores,
    ) -> Self {
        let shutdown = CancellationToken::new();
        let running = tasks
            .into_iter()
            .map(|(name, task)| {
                let context = BackgroundContext {
                    gateway: gateway.clone(),
                    stores: stores.clone(),
                    shutdown: shutdown.clone(),
                };
                tracing::info!(task = name, "background task started");
                (name, tokio::spawn(task(context)))
            })
            .collect();
        Self { shutdown, running }
    }

    /// Asks every task to stop and waits for each, [`STOP_GRACE`] at most in all; one still
    /// running then is cut off, one that panicked is logged.
    pub(crate) async fn stop(&mut self) {
        self.shutdown.cancel();
        let deadline = tokio::time::Instant::now() + STOP_GRACE;
        for (name, mut task) in self.running.drain(..) {
            match tokio::time::timeout_at(deadline, &mut task).await {
                Ok(Ok(())) => tracing::info!(task = name, "background task stopped"),
                Ok(Err(error)) => {
                    tracing::error!(task = name, %error, "background task failed");
                }
                Err(_) => {
                    tracing::warn!(task = name, "background task did not stop in time: cut off");
                    task.abort();
                }
            }
        }
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        self.shutdown.cancel();
        for (_, task) in &self.running {
            task.abort();
        }
    }
}
