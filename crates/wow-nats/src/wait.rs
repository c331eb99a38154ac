//! Stage signals across processes, over core NATS: a processor publishes each signal to the
//! subject the command named ([`WAIT_REPLY_HEADER`]); the gateway listening there hands it
//! to its own [`WaitCoordinator`].
//!
//! Core NATS delivers at most once. A signal lost on the way costs the caller a timeout, and
//! the outcome look-up then says what happened (SPEC TO-1): never a wrong answer.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::Client;
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use wow_core::command::{CommandResult, JsonCommand};
use wow_runtime::command::{WaitCoordinator, WaitNotifier};

use crate::command_bus::WAIT_REPLY_HEADER;
use crate::error::NatsError;
use wow_runtime::command::{CHAIN_HEADER, CHAIN_REPLY_HEADER};

/// Signals waiting to be published; past this, new ones are dropped (and counted in the
/// log): a caller then times out and looks up.
const OUTGOING_CAPACITY: usize = 65_536;

/// How long a processor remembers where a command's signals go. Downstream stages
/// signalled later than two of these after the command arrived are not delivered.
const ROUTE_GENERATION: Duration = Duration::from_secs(120);

/// The gateway's receiving end: listens on its own subject and hands every signal to its
/// coordinator. Dropping it stops listening.
#[derive(Debug)]
pub struct WaitSignals {
    subject: String,
    task: JoinHandle<()>,
}

impl WaitSignals {
    /// Listens on `subject` for signals and delivers them to `waits`.
    ///
    /// # Errors
    ///
    /// [`NatsError::Subscribe`] when the subscription cannot be made.
    pub async fn listen(
        client: &Client,
        subject: String,
        waits: Arc<WaitCoordinator>,
    ) -> Result<Self, NatsError> {
        let mut subscription =
            client
                .subscribe(subject.clone())
                .await
                .map_err(|source| NatsError::Subscribe {
                    subject: subject.clone(),
                    source: Box::new(source),
                })?;
        let task = tokio::spawn(async move {
            while let Some(message) = subscription.next().await {
                match serde_json::from_slice::<CommandResult>(&message.payload) {
                    Ok(result) => waits.notify(result),
                    Err(error) => {
                        tracing::warn!(%error, "dropped a wait signal that does not decode")
                    }
                }
            }
        });
        Ok(Self { subject, task })
    }

    /// The subject this gateway's commands must name in [`WAIT_REPLY_HEADER`].
    pub fn subject(&self) -> &str {
        &self.subject
    }
}

impl Drop for WaitSignals {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where each command's signals go, remembered for one to two generations.
#[derive(Debug)]
struct Routes {
    current: HashMap<String, Arc<str>>,
    previous: HashMap<String, Arc<str>>,
    since: Instant,
}

impl Routes {
    fn rotate_if_due(&mut self) {
        if self.since.elapsed() >= ROUTE_GENERATION {
            self.previous = std::mem::take(&mut self.current);
            self.since = Instant::now();
        }
    }

    fn get(&self, command_id: &str) -> Option<Arc<str>> {
        self.current
            .get(command_id)
            .or_else(|| self.previous.get(command_id))
            .cloned()
    }
}

/// The processor's sending end: a [`WaitNotifier`] that publishes each signal to the
/// subject its command named, and hands signals of commands that named none (sent by this
/// process's own gateway, a saga's) to `local`.
#[derive(Debug)]
pub struct NatsWaitNotifier {
    routes: Mutex<Routes>,
    outgoing: mpsc::Sender<(Arc<str>, Bytes)>,
    local: Arc<WaitCoordinator>,
}

impl NatsWaitNotifier {
    /// A notifier publishing through `client`. Must be called inside a tokio runtime.
    pub fn new(client: Client, local: Arc<WaitCoordinator>) -> Arc<Self> {
        let (outgoing, mut queue) = mpsc::channel::<(Arc<str>, Bytes)>(OUTGOING_CAPACITY);
        tokio::spawn(async move {
            while let Some((subject, payload)) = queue.recv().await {
                if let Err(error) = client.publish(subject.to_string(), payload).await {
                    tracing::debug!(%error, "a wait signal was not published");
                }
            }
        });
        Arc::new(Self {
            routes: Mutex::new(Routes {
                current: HashMap::new(),
                previous: HashMap::new(),
                since: Instant::now(),
            }),
            outgoing,
            local,
        })
    }

    /// Remembers where `command`'s signals go; call it before the command is handled.
    ///
    /// A command a saga sent as a link of a chained wait also names where the chain's caller
    /// listens: the signals this node copies to that caller go there.
    pub fn route(&self, command: &JsonCommand) {
        let own = command
            .header
            .get(WAIT_REPLY_HEADER)
            .map(|subject| (command.id.clone(), subject));
        let chained = command
            .header
            .get(CHAIN_HEADER)
            .zip(command.header.get(CHAIN_REPLY_HEADER))
            .map(|(waiting, subject)| (waiting.clone(), subject));
        if own.is_none() && chained.is_none() {
            return;
        }
        let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        routes.rotate_if_due();
        for (command_id, subject) in own.into_iter().chain(chained) {
            routes
                .current
                .insert(command_id, Arc::from(subject.as_str()));
        }
    }
}

impl NatsWaitNotifier {
    /// Publishes `result` to `subject`, or drops it (with a log) when the queue is full.
    fn publish(&self, subject: Arc<str>, result: &CommandResult) {
        match serde_json::to_vec(result) {
            Ok(payload) => {
                if self
                    .outgoing
                    .try_send((subject, Bytes::from(payload)))
                    .is_err()
                {
                    tracing::warn!(
                        "wait signals are backed up; dropped one (its caller will look up)"
                    );
                }
            }
            Err(error) => tracing::warn!(%error, "a wait signal does not encode"),
        }
    }
}

impl WaitNotifier for NatsWaitNotifier {
    /// Publishes to the subject remembered for the command (see [`route`](Self::route)),
    /// else hands the signal to the local coordinator.
    fn notify(&self, result: CommandResult) {
        let subject = self
            .routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&result.wait_command_id);
        match subject {
            Some(subject) => self.publish(subject, &result),
            None => self.local.notify(result),
        }
    }

    /// Publishes to the subject `header` names: the chain's caller's
    /// ([`CHAIN_REPLY_HEADER`]) for a signal copied to a chained wait, else the command's
    /// own caller's ([`WAIT_REPLY_HEADER`]). So a processor that did not receive the command
    /// (it took the partition over after the append, and runs the consumers of the streams
    /// the previous owner appended) still reaches the waiting caller. Without such a header,
    /// as [`notify`](WaitNotifier::notify).
    fn notify_from(&self, header: &BTreeMap<String, String>, result: CommandResult) {
        let chained = header.get(CHAIN_HEADER) == Some(&result.wait_command_id);
        let named = if chained {
            header.get(CHAIN_REPLY_HEADER)
        } else {
            header.get(WAIT_REPLY_HEADER)
        };
        match named {
            Some(subject) => self.publish(Arc::from(subject.as_str()), &result),
            None => self.notify(result),
        }
    }
}
