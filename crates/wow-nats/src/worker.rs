//! The processor's side of the distributed command bus: one partition's commands, read from
//! JetStream in order and handed to the processing node, for as long as the node owns the
//! partition.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use async_nats::jetstream::{self, AckKind};
use futures::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use wow_core::command::{CommandHandler, JsonCommand, TRACEPARENT_HEADER, TRACESTATE_HEADER};
use wow_core::group_by_aggregate;
use wow_runtime::trace_context::is_valid_traceparent;

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

/// How often, at most, a partition's consumers are asked to change leaders.
const STEP_DOWN_EVERY: Duration = Duration::from_secs(10);

/// How long a request to change a consumer's leader may take.
const STEP_DOWN_WITHIN: Duration = Duration::from_secs(1);

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
    jetstream: jetstream::Context,
    stream: jetstream::stream::Stream,
    config: Arc<NatsConfig>,
    handler: Arc<dyn CommandHandler>,
    notifier: Arc<NatsWaitNotifier>,
    forget: Option<Forget>,
    stalled: StalledPartitions,
    stepped_down: Arc<Mutex<BTreeMap<u32, Instant>>>,
}

impl PartitionConsumer {
    /// Consumes from `stream` into `handler`, routing signals through `notifier`; asks
    /// `jetstream` to move a failing consumer's leadership.
    pub fn new(
        jetstream: jetstream::Context,
        stream: jetstream::stream::Stream,
        config: Arc<NatsConfig>,
        handler: Arc<dyn CommandHandler>,
        notifier: Arc<NatsWaitNotifier>,
    ) -> Self {
        Self {
            jetstream,
            stream,
            config,
            handler,
            notifier,
            forget: None,
            stalled: StalledPartitions::default(),
            stepped_down: Arc::default(),
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
    /// Every owner of a partition reads the same durable JetStream consumer, which keeps a
    /// command until it is acknowledged: what the previous owner held comes again at once
    /// when every replica of the consumer is current, otherwise once `config.ack_wait`
    /// passes. A command handled but not acknowledged before a crash is handled again: its
    /// request id makes that a duplicate, answered from the recorded decision (SPEC RQ-4,
    /// ID-6).
    ///
    /// On `stop`, the batch in hand is abandoned, mid-command if need be, and handed back
    /// (a negative acknowledgement): an append is atomic, so the next owner finds it done
    /// or not done, never half.
    ///
    /// Before consuming and once stopped, calls what [`forgetting`](Self::forgetting) gave.
    ///
    /// A consumer that stops hearing from its server (the server sends a heartbeat every
    /// `config.heartbeat` while there is no work; two intervals without one, twice in a row,
    /// is a stall, e.g. its leader lost with the pull request in hand) is asked again at
    /// once; if it stalls again before delivering anything, this returns an error so that
    /// the caller starts it again. Meanwhile the partition is in [`stalled`](Self::stalled).
    ///
    /// A consumer that stalls twice has its leader asked to step down, at most every ten
    /// seconds: a leader whose replica of the stream is behind (its server was away and is
    /// catching up) delivers nothing until another replica leads.
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

    /// Asks the leaders of `partition`'s consumers to step down, at most every
    /// [`STEP_DOWN_EVERY`]: a consumer led by a server whose replica of the stream is behind
    /// (one that was away and is catching up) hears pull requests and delivers nothing,
    /// or answers nothing at all, until another replica leads it.
    async fn step_down(&self, partition: u32) {
        {
            let mut stepped_down = self.stepped_down.lock().unwrap_or_else(|p| p.into_inner());
            if stepped_down
                .get(&partition)
                .is_some_and(|at| at.elapsed() < STEP_DOWN_EVERY)
            {
                return;
            }
            stepped_down.insert(partition, Instant::now());
        }
        let empty = serde_json::json!({});
        for consumer in [
            self.config.partition_consumer(partition),
            self.config.legacy_partition_consumer(partition),
        ] {
            let subject = format!("CONSUMER.LEADER.STEPDOWN.{}.{consumer}", self.config.stream);
            let asked = self
                .jetstream
                .request::<_, _, serde_json::Value>(subject, &empty);
            match tokio::time::timeout(STEP_DOWN_WITHIN, asked).await {
                Ok(Ok(answer)) if answer["success"] == true => {
                    tracing::info!(partition, consumer, "the consumer's leader stepped down");
                }
                Ok(Ok(answer)) => {
                    tracing::debug!(partition, consumer, %answer, "the consumer's leader did not step down");
                }
                Ok(Err(error)) => {
                    tracing::debug!(partition, consumer, %error, "the consumer's leader was not asked to step down");
                }
                Err(_) => {
                    tracing::debug!(
                        partition,
                        consumer,
                        "no answer to a leader step-down in time"
                    );
                }
            }
        }
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
                    // leader. If that does not help either, its leader is asked to step down
                    // (one whose replica of the stream is behind hears the request and has
                    // nothing to deliver) and the caller starts it again.
                    if asked_again && !delivered {
                        self.step_down(partition).await;
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

    /// The durable consumer `name` of `filter`: the one JetStream has, or a new one.
    ///
    /// Owners come and go and the consumer stays: taking a partition over asks the
    /// consumer's own leader and, on a cluster missing a server, nothing else. Making or
    /// deleting a consumer waits on the JetStream meta leader, which a lost server can take
    /// seconds to replace, and a consumer deleted and made again while a server is away
    /// leaves that server's replica of the stream holding commands the others removed
    /// (NATS 2.9), replayed once it leads the stream.
    ///
    /// What a previous owner held unacknowledged would come again only once `ack_wait`
    /// passes. When every replica of the consumer is current (a single server, or a whole
    /// cluster), the consumer is made afresh instead, so those commands come at once, in
    /// stream order; with a replica away they wait for `ack_wait`. A consumer whose
    /// settings differ from these (the filter or acknowledgement settings changed by
    /// configuration) is made again too.
    async fn consumer(
        &self,
        name: String,
        filter: String,
    ) -> Result<jetstream::consumer::Consumer<pull::Config>, Box<dyn std::error::Error + Send + Sync>>
    {
        let wanted = pull::Config {
            durable_name: Some(name.clone()),
            filter_subject: filter,
            ack_policy: AckPolicy::Explicit,
            ack_wait: self.config.ack_wait,
            max_ack_pending: MAX_ACK_PENDING,
            deliver_policy: DeliverPolicy::All,
            ..Default::default()
        };
        let found = self
            .stream
            .get_or_create_consumer(&name, wanted.clone())
            .await?;
        let info = found.cached_info();
        let have = &info.config;
        let same = have.filter_subject == wanted.filter_subject
            && have.ack_wait == wanted.ack_wait
            && have.max_ack_pending == wanted.max_ack_pending
            && have.ack_policy == wanted.ack_policy;
        let held = info.num_ack_pending > 0;
        let whole = info.cluster.as_ref().is_none_or(|cluster| {
            cluster.leader.is_some()
                && cluster
                    .replicas
                    .iter()
                    .all(|replica| replica.current && !replica.offline)
        });
        if same && !(held && whole) {
            return Ok(found);
        }
        if same {
            tracing::debug!(
                consumer = name,
                held = info.num_ack_pending,
                "commands held by a previous owner; making the consumer afresh"
            );
        } else {
            tracing::info!(
                consumer = name,
                "the partition's consumer has other settings; making it again"
            );
        }
        self.stream.delete_consumer(&name).await?;
        Ok(self.stream.create_consumer(wanted).await?)
    }

    /// Handles `messages`, aggregates side by side and each in order, then acknowledges
    /// them in order.
    ///
    /// A batch abandoned before it is acknowledged (the partition given up, the node
    /// stopping) is handed back with a negative acknowledgement (JetStream may still
    /// redeliver it to this owner's pull request until that expires).
    async fn handle_batch(&self, messages: Vec<jetstream::Message>) {
        let mut in_hand = InHand(messages);
        let mut commands = Vec::with_capacity(in_hand.0.len());
        for message in &in_hand.0 {
            match serde_json::from_slice::<JsonCommand>(&message.payload) {
                Ok(mut command) => {
                    continue_trace(message, &mut command);
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
        for message in std::mem::take(&mut in_hand.0) {
            // A lost acknowledgement only means a redelivery, which the request id answers.
            if let Err(error) = message.ack_with(AckKind::Ack).await {
                tracing::debug!(%error, "an acknowledgement was not sent");
            }
        }
    }
}

/// SPEC OB-1: the node continues the trace context the message's NATS headers carry (the
/// sending gateway's span), in place of any the payload's headers hold. A message without
/// a valid `traceparent` there (an earlier gateway's) keeps the payload's.
fn continue_trace(message: &jetstream::Message, command: &mut JsonCommand) {
    let Some(headers) = &message.headers else {
        return;
    };
    let Some(parent) = headers
        .get(TRACEPARENT_HEADER)
        .map(|value| value.as_str())
        .filter(|value| is_valid_traceparent(value))
    else {
        return;
    };
    command
        .header
        .insert(TRACEPARENT_HEADER.to_owned(), parent.to_owned());
    match headers.get(TRACESTATE_HEADER) {
        Some(state) => {
            command
                .header
                .insert(TRACESTATE_HEADER.to_owned(), state.as_str().to_owned());
        }
        None => {
            command.header.remove(TRACESTATE_HEADER);
        }
    }
}

/// Messages in hand and not yet acknowledged. Dropped with messages left (the batch
/// abandoned), it hands them back to JetStream with a negative acknowledgement, from a
/// task of its own.
struct InHand(Vec<jetstream::Message>);

impl Drop for InHand {
    fn drop(&mut self) {
        let messages = std::mem::take(&mut self.0);
        if messages.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            for message in messages {
                // Unsent, it comes again after `ack_wait` all the same.
                if let Err(error) = message.ack_with(AckKind::Nak(None)).await {
                    tracing::debug!(%error, "a command was not handed back");
                }
            }
        });
    }
}
