//! The gateway and processor roles (docs/distributed.md): what joins a service to NATS, and what
//! it runs there.
//!
//! - A **gateway** sends commands on the [`NatsCommandBus`], listens for their signals on
//!   its own subject, and checks request ids against its Bloom filters only (SPEC RQ-3). It
//!   runs no consumer and retries no failure: the processors do.
//! - A **processor** owns command partitions, hands their commands to its node, publishes
//!   every stage signal to the gateway that took the command, and runs the consumers over
//!   the store's global feed for those partitions ([`FeedFollower`]). Its own gateway (its
//!   sagas', its HTTP routes') sends on NATS too, so that a command always meets the owner
//!   of its partition. It holds its partitions only while its store answers
//!   ([`ownership`]).

mod ownership;
mod retry;
mod status;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::connection::State;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wow_core::eventsourcing::EventStore;
use wow_core::{AggregateId, Stores};
use wow_http::NodeStatus;
use wow_runtime::command::WaitCoordinator;
use wow_runtime::event::{FeedFollower, FeedWake};
use wow_runtime::pipeline::{LocalPipeline, LocalPipelineBuilder};

use ownership::hold_partitions;
use status::Status;
use wow_core::deadline::PartitionFilter;
use wow_nats::{
    ensure_command_stream, partition_of, LeaseConfig, NatsCommandBus, NatsConfig, NatsError,
    NatsWaitNotifier, OwnedPartitions, PartitionConsumer, PartitionLeases, StalledPartitions,
    WaitSignals,
};
use wow_runtime::deadline::DeadlinePartitions;

use crate::settings::{Role, Settings};

/// A gateway's or processor's link to NATS, from the start of the service to its stop.
#[derive(Debug)]
pub(crate) struct Distribution {
    role: Role,
    node_id: String,
    client: async_nats::Client,
    config: Arc<NatsConfig>,
    waits: Arc<WaitCoordinator>,
    bus: NatsCommandBus,
    notifier: Option<Arc<NatsWaitNotifier>>,
    _signals: WaitSignals,
    owned: Arc<Mutex<Vec<u32>>>,
    stalled: StalledPartitions,
    lease_bucket: String,
    namespace: String,
    feed_wake: FeedWake,
    lease_ttl: Duration,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Distribution {
    /// Connects a gateway or processor to NATS; `None` for a monolith.
    pub(crate) async fn connect(settings: &Settings) -> Result<Option<Self>, NatsError> {
        if settings.role == Role::Monolith {
            return Ok(None);
        }
        let Some(url) = settings.distributed.nats_url.as_deref() else {
            return Err(NatsError::Config(format!(
                "the {} role needs a NATS server",
                settings.role
            )));
        };
        let node_id = settings
            .distributed
            .node_id
            .clone()
            .unwrap_or_else(default_node_id);
        let config = Arc::new(settings.distributed.nats_config(url));
        let client =
            wow_nats::connect(&config, &format!("wow-{}-{node_id}", settings.role)).await?;
        // Both roles make the command stream when it is missing, so a gateway started before
        // any processor can send (its commands wait in the stream for one).
        if client.connection_state() == State::Connected {
            let jetstream = async_nats::jetstream::new(client.clone());
            retry::with_backoff("setting up the command stream", || {
                ensure_command_stream(&jetstream, &config)
            })
            .await?;
        }
        let waits = WaitCoordinator::new();
        let signals =
            WaitSignals::listen(&client, config.wait_subject(&node_id), waits.clone()).await?;
        let bus = NatsCommandBus::new(client.clone(), config.clone(), signals.subject());
        let notifier = (settings.role == Role::Processor)
            .then(|| NatsWaitNotifier::new(client.clone(), waits.clone()));
        tracing::info!(role = %settings.role, node = node_id, nats = url, "joined the deployment");
        Ok(Some(Self {
            role: settings.role,
            node_id,
            client,
            config,
            waits,
            bus,
            notifier,
            _signals: signals,
            owned: Arc::default(),
            stalled: StalledPartitions::default(),
            lease_bucket: format!("{}_partitions", settings.distributed.namespace),
            namespace: settings.distributed.namespace.clone(),
            feed_wake: FeedWake::new(),
            lease_ttl: settings.distributed.lease_ttl,
            stop: CancellationToken::new(),
            tasks: Vec::new(),
        }))
    }

    /// Whether this node runs consumers (and so catches them up and retries their failures).
    pub(crate) fn runs_consumers(&self) -> bool {
        self.role == Role::Processor
    }

    /// Joins `builder`'s pipeline to NATS. A processor's node wakes the feed follower
    /// instead of running the consumers in process.
    pub(crate) fn apply(&self, builder: LocalPipelineBuilder) -> LocalPipelineBuilder {
        let builder = builder
            .command_bus(Arc::new(self.bus.clone()))
            .wait_coordinator(self.waits.clone());
        match &self.notifier {
            Some(notifier) => builder
                .wait_notifier(notifier.clone())
                .node_events(Arc::new(self.feed_wake.clone())),
            None => builder.gateway_without_store(),
        }
    }

    /// Starts a processor's work: the command stream made if missing, the partitions it
    /// owns consumed into `pipeline`'s node, and the consumers following the feed of
    /// `stores` for those partitions. Nothing for a gateway.
    pub(crate) async fn start(
        &mut self,
        pipeline: &LocalPipeline,
        stores: &Stores,
    ) -> Result<(), NatsError> {
        let Some(notifier) = self.notifier.clone() else {
            return Ok(());
        };
        let jetstream = async_nats::jetstream::new(self.client.clone());
        let stream = retry::with_backoff("setting up the command stream", || {
            ensure_command_stream(&jetstream, &self.config)
        })
        .await?;
        let count = self.config.partitions;
        let cache = pipeline.aggregate_cache().clone();
        // The cache starts cold for a partition taken (back) over: another processor may
        // have moved its aggregates on meanwhile.
        let consumer = PartitionConsumer::new(
            jetstream.clone(),
            stream,
            self.config.clone(),
            pipeline.node(),
            notifier,
        )
        .reporting_stalls_to(self.stalled.clone())
        .forgetting(move |partition| {
            let evicted = cache
                .evict_where(|tenant, name, id| partition_of(tenant, name, id, count) == partition);
            tracing::debug!(partition, evicted, "forgot the partition's cached states");
        });
        let owned = self.ownership(stores.events.clone()).await?;
        let reported = self.owned.clone();
        let mut watched = owned.clone();
        let (partitions, followed) = watch::channel(BTreeSet::new());
        self.tasks.push(tokio::spawn(async move {
            loop {
                let now: BTreeSet<u32> = watched.borrow_and_update().keys().copied().collect();
                *reported.lock().unwrap_or_else(|p| p.into_inner()) = now.iter().copied().collect();
                partitions.send_replace(now);
                if watched.changed().await.is_err() {
                    break;
                }
            }
        }));
        let follower = FeedFollower::new(
            pipeline.dispatcher.clone(),
            stores.events.clone(),
            stores.positions.clone(),
            format!("feed:{}", self.namespace),
            Arc::new(move |aggregate: &AggregateId| {
                partition_of(
                    &aggregate.tenant_id,
                    &aggregate.aggregate_name,
                    &aggregate.id,
                    count,
                )
            }),
        );
        let stop = self.stop.clone();
        self.tasks.push(tokio::spawn(follower.run(
            followed,
            self.feed_wake.notify(),
            async move { stop.cancelled().await },
        )));
        self.tasks.push(tokio::spawn(wow_nats::supervise(
            consumer,
            owned,
            self.stop.clone(),
        )));
        Ok(())
    }

    /// Whether this processor fires a deadline (SPEC DM-2): it does for the owners in the
    /// partitions it holds at that moment, so a partition's move hands its deadlines over
    /// with it. `None` for a gateway, which fires none.
    ///
    /// The scheduler reads only these partitions' rows (SPEC DM-6): another processor's
    /// backlog never stands before this one's rows.
    pub(crate) fn deadline_owner(&self) -> Option<DeadlinePartitions> {
        self.notifier.as_ref()?;
        let owned = self.owned.clone();
        let count = self.config.partitions;
        Some(Arc::new(move || {
            let owned = owned.lock().unwrap_or_else(|p| p.into_inner());
            Some(PartitionFilter {
                count,
                owned: owned.iter().copied().collect(),
            })
        }))
    }

    /// The partitions this node owns, as they change: leases in the namespace's bucket, held
    /// while `store` answers (see [`hold_partitions`]).
    async fn ownership(
        &mut self,
        store: Arc<dyn EventStore>,
    ) -> Result<watch::Receiver<OwnedPartitions>, NatsError> {
        let jetstream = async_nats::jetstream::new(self.client.clone());
        let config = LeaseConfig::new(self.node_id.clone(), self.config.partitions)
            .bucket(self.lease_bucket.clone())
            .ttl(self.lease_ttl)
            .replicas(self.config.replicas);
        // The first leases are taken here, so that a bucket that cannot be used stops the
        // start with its error; a bucket whose servers are away is waited for.
        let leases = retry::with_backoff("opening the lease bucket", || async {
            Ok(PartitionLeases::start(&jetstream, config.clone()).await?)
        })
        .await?;
        let (owned, receiver) = watch::channel(OwnedPartitions::new());
        self.tasks.push(tokio::spawn(hold_partitions(
            jetstream,
            config,
            leases,
            store,
            owned,
            self.stop.clone(),
        )));
        Ok(receiver)
    }

    /// What `/health` reports of this node.
    pub(crate) fn status(&self) -> Arc<dyn NodeStatus> {
        Arc::new(Status {
            role: self.role,
            node_id: self.node_id.clone(),
            client: self.client.clone(),
            owned: self.owned.clone(),
            stalled: self.stalled.clone(),
            partitions: self.config.partitions,
        })
    }

    /// Stops consuming (the batch in hand is left unacknowledged for the next owner) and
    /// gives up the partitions.
    pub(crate) async fn stop(mut self) {
        self.stop.cancel();
        for task in self.tasks.drain(..) {
            if let Err(error) = task.await {
                tracing::warn!(%error, "a distribution task failed");
            }
        }
    }
}

impl Drop for Distribution {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A name for this node that no other process, here or elsewhere, takes.
fn default_node_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        .unwrap_or_else(|| "node".to_owned());
    let unique = wow_core::id::new_id();
    let tail = unique
        .get(unique.len().saturating_sub(8)..)
        .unwrap_or(&unique);
    format!("{host}-{}-{tail}", std::process::id())
}
