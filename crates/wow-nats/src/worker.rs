//! The processor's side of the distributed command bus: one partition's commands, read from
//! JetStream in order and handed to the processing node, for as long as the node owns the
//! partition.

use std::sync::Arc;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use async_nats::jetstream::{self, AckKind};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use wow_core::command::{CommandHandler, JsonCommand};
use wow_core::group_by_aggregate;

use crate::config::NatsConfig;
use crate::error::NatsError;
use crate::pump::{pump, Pumped};
use crate::stalled::StalledPartitions;
use crate::wait::NatsWaitNotifier;

/// Commands read and handled together: their aggregates run side by side, each in order.
const BATCH: usize = 256;

/// Commands delivered to a partition's owner and not yet acknowledged, at most.
const MAX_ACK_PENDING: i64 = 1024;

/// Commands asked for per pull request.
const PULL_BATCH: usize = 200;

/// How long a pull request lasts, in heartbeats (the server wants at least two).
const PULL_EXPIRES_IN_HEARTBEATS: u32 = 5;

/// What a node forgets of a partition when it starts or stops consuming it.
#[derive(Clone)]
struct Forget(Arc<dyn Fn(u32) + Send + Sync>);

impl std::fmt::Debug for Forget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Forget")
    }
}

/// Hands the commands of owned partitions to a processing node.
#[derive(Debug, Clone)]
pub struct PartitionConsumer {
    stream: jetstream::stream::Stream,
    config: Arc<NatsConfig>,
    handler: Arc<dyn CommandHandler>,
    notifier: Arc<NatsWaitNotifier>,
    forget: Option<Forget>,
    stalled: StalledPartitions,
}

impl PartitionConsumer {
    /// Consumes from `stream` into `handler`, routing signals through `notifier`.
    pub fn new(
        stream: jetstream::stream::Stream,
        config: Arc<NatsConfig>,
        handler: Arc<dyn CommandHandler>,
        notifier: Arc<NatsWaitNotifier>,
    ) -> Self {
        Self {
            stream,
            config,
            handler,
            notifier,
            forget: None,
            stalled: StalledPartitions::default(),
        }
    }

    /// Keeps the stalled partitions in `stalled` (one made before the consumer, e.g. for a
    /// health check) instead of a set of its own.
    pub fn reporting_stalls_to(mut self, stalled: StalledPartitions) -> Self {
        self.stalled = stalled;
        self
    }

    /// The partitions this consumer owns and does not consume right now: its JetStream
    /// consumer stalled (no heartbeat from its server for two intervals, twice) or failed
    /// and is being made again. Shared with every clone.
    pub fn stalled(&self) -> StalledPartitions {
        self.stalled.clone()
    }

    /// Calls `forget(partition)` before consuming a partition (a takeover, or a restart of
    /// its consumer) and after it stopped: what the node holds of the partition's aggregates
    /// (its cached states) may be stale, since another processor may have moved them on while
    /// this one did not own the partition.
    pub fn forgetting(mut self, forget: impl Fn(u32) + Send + Sync + 'static) -> Self {
        self.forget = Some(Forget(Arc::new(forget)));
        self
    }

    fn forget(&self, partition: u32) {
        if let Some(Forget(forget)) = &self.forget {
            forget(partition);
        }
    }

    /// Handles `partition`'s commands until `stop` is cancelled (the node lost, or gave up,
    /// the partition) or the subscription fails.
    ///
    /// Taking a partition over makes its JetStream consumer afresh: every command the
    /// previous owner did not acknowledge is delivered again, in stream order, at once (the
    /// stream keeps a command until it is acknowledged). A command handled but not
    /// acknowledged before a crash is handled again: its request id makes that a duplicate,
    /// answered from the recorded decision (SPEC RQ-4, ID-6).
    ///
    /// On `stop`, the batch in hand is abandoned unacknowledged, mid-command if need be: an
    /// append is atomic, so the next owner finds it done or not done, never half.
    ///
    /// Before consuming and once stopped, calls what [`forgetting`](Self::forgetting) gave.
    ///
    /// A consumer that stops hearing from its server (the server sends a heartbeat every
    /// `config.heartbeat` while there is no work; two intervals without one, twice in a row,
    /// is a stall, e.g. its leader lost with the pull request in hand) is asked again at
    /// once; if it stalls again before delivering anything, this returns an error so that
    /// the caller makes it afresh. Meanwhile the partition is in [`stalled`](Self::stalled).
    ///
    /// # Errors
    ///
    /// [`NatsError::Consumer`] when the consumer cannot be made or its messages read, or
    /// stalled twice; the caller retries after a pause.
    pub async fn run(&self, partition: u32, stop: CancellationToken) -> Result<(), NatsError> {
        self.forget(partition);
        let ended = self.consume(partition, stop).await;
        self.forget(partition);
        match &ended {
            // Owned and not consumed until the supervisor's next attempt succeeds.
            Err(_) => self.stalled.mark(partition),
            Ok(()) => self.stalled.clear(partition),
        }
        ended
    }

    async fn consume(&self, partition: u32, stop: CancellationToken) -> Result<(), NatsError> {
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| NatsError::Consumer {
            partition,
            source,
        };
        let current = self
            .consumer(
                self.config.partition_consumer(partition),
                self.config.partition_filter(partition),
            )
            .await
            .map_err(&failed)?;
        // What gateways from before the request token sent (SPEC RQ-14): consumed alongside,
        // by a consumer of its own (one filter per consumer before NATS 2.10).
        let legacy = self
            .consumer(
                self.config.legacy_partition_consumer(partition),
                self.config.legacy_partition_subject(partition),
            )
            .await
            .map_err(&failed)?;
        tracing::info!(partition, "consuming the partition");
        let mut asked_again = false;
        loop {
            let current = self.messages(&current).await.map_err(&failed)?;
            let legacy = self.messages(&legacy).await.map_err(&failed)?;
            let messages = futures::stream::select(current, legacy);
            let pumped = pump(
                partition,
                messages.ready_chunks(BATCH),
                self.config.heartbeat,
                &self.stalled,
                &stop,
                |batch| self.handle_batch(batch),
            )
            .await;
            match pumped {
                Pumped::Stopped => return Ok(()),
                Pumped::Ended => return Err(failed("the message stream ended".into())),
                Pumped::Stalled { delivered } => {
                    self.stalled.mark(partition);
                    // A pull request that a lost consumer leader took with it is answered by
                    // none: asking again reaches the new leader without waiting on the meta
                    // leader. If that does not help either, the consumer is made afresh.
                    if asked_again && !delivered {
                        return Err(failed(
                            "the consumer's server stopped sending heartbeats".into(),
                        ));
                    }
                    tracing::warn!(
                        partition,
                        "the partition's consumer stopped hearing from its server; asking again"
                    );
                    asked_again = true;
                }
            }
        }
    }

    /// The messages of `consumer`, with the server's idle heartbeat every
    /// `config.heartbeat`: a consumer whose heartbeats stop (its leader lost, its pull
    /// request gone with it) yields a missed-heartbeat error every two intervals.
    async fn messages(
        &self,
        consumer: &jetstream::consumer::Consumer<pull::Config>,
    ) -> Result<pull::Stream, Box<dyn std::error::Error + Send + Sync>> {
        let heartbeat = self.config.heartbeat;
        Ok(consumer
            .stream()
            .max_messages_per_batch(PULL_BATCH)
            .heartbeat(heartbeat)
            .expires(heartbeat.saturating_mul(PULL_EXPIRES_IN_HEARTBEATS))
            .messages()
            .await?)
    }

    /// The durable consumer `name` of `filter`, made afresh: whatever it had delivered and
    /// not seen acknowledged is delivered again at once.
    async fn consumer(
        &self,
        name: String,
        filter: String,
    ) -> Result<jetstream::consumer::Consumer<pull::Config>, Box<dyn std::error::Error + Send + Sync>>
    {
        match self.stream.delete_consumer(&name).await {
            Ok(_) => {}
            Err(error) => tracing::debug!(%error, consumer = name, "no consumer to replace"),
        }
        let consumer = self
            .stream
            .create_consumer(pull::Config {
                durable_name: Some(name),
                filter_subject: filter,
                ack_policy: AckPolicy::Explicit,
                ack_wait: self.config.ack_wait,
                max_ack_pending: MAX_ACK_PENDING,
                deliver_policy: DeliverPolicy::All,
                ..Default::default()
            })
            .await?;
        Ok(consumer)
    }

    /// Handles `messages`, aggregates side by side and each in order, then acknowledges
    /// them in order.
    async fn handle_batch(&self, messages: Vec<jetstream::Message>) {
        let mut commands = Vec::with_capacity(messages.len());
        for message in &messages {
            match serde_json::from_slice::<JsonCommand>(&message.payload) {
                Ok(command) => {
                    self.notifier.route(&command);
                    commands.push(command);
                }
                Err(error) => {
                    tracing::error!(%error, subject = %message.subject, "a command message does not decode; dropping it");
                }
            }
        }
        let groups = group_by_aggregate(commands, |command| &command.aggregate_id);
        futures::future::join_all(groups.into_iter().map(|group| async move {
            for command in group {
                self.handler.handle(command).await;
            }
        }))
        .await;
        for message in &messages {
            // A lost acknowledgement only means a redelivery, which the request id answers.
            if let Err(error) = message.ack_with(AckKind::Ack).await {
                tracing::debug!(%error, "an acknowledgement was not sent");
            }
        }
    }
}
