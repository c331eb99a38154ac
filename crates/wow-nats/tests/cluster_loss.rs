//! Losing one server of a three-node NATS cluster under load (SPEC TO-1, RQ-4;
//! docs/distributed.md, "A NATS cluster"): one server killed, then one frozen
//! (SIGSTOP), while callers deposit with the safe retry (same request id). Nothing
//! acknowledged is lost or applied twice, and every partition is owned again within the
//! lease TTL (10 s here) plus 2 s. Prints, per fault, the longest time without an acknowledgement.
//! A second test steps down every partition consumer's leader: each partition is served
//! again within seconds, not when its lost pull request would have expired.
//!
//! Runs its own servers (the machine's `nats-server`) on ports of its own; skipped with a
//! `SKIPPED` line when there is none, unless `WOW_REQUIRE_BACKENDS=1`. Bounded at 150 s.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use wow_core::command::{CommandResultError, JsonCommand};
use wow_core::event::NoopDomainEventBus;
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::{AggregateId, CommandMessage, ErrorCode};
use wow_example_bank::account::{AccountCommand, Amount, Open};
use wow_nats::{
    ensure_command_stream, CommandStorage, LeaseConfig, NatsCommandBus, NatsConfig,
    NatsWaitNotifier, OwnedPartitions, PartitionConsumer, PartitionLeases, StalledPartitions,
    WaitSignals,
};
use wow_runtime::command::{CommandGateway, DefaultCommandHandler, WaitCoordinator, WaitPlan};

use cluster::{eventually, Cluster};

const PARTITIONS: u32 = 8;
/// What docs/distributed.md advises for a cluster: longer than a JetStream leader election
/// (NATS 2.9: 4 to 9 s, longer when a frozen leader resumes), so that a lease outlives one.
/// With 6 s, a frozen lease bucket leader left a partition unowned for 11.2 s (TTL + 5.2 s).
const LEASE_TTL: Duration = Duration::from_secs(10);
const CALLERS: usize = 4;
/// How soon a partition whose consumer's leader changed is served again, at most.
const RESUMED_WITHIN: Duration = Duration::from_secs(10);
/// How long each fault lasts.
const FAULT: Duration = Duration::from_secs(8);

fn command(id: &AggregateId, body: AccountCommand, request: &str) -> JsonCommand {
    CommandMessage::of(id.clone(), body)
        .into_json()
        .unwrap()
        .with_request_id(request.to_owned())
}

/// What the callers saw: when each acknowledgement came, and what was acknowledged.
#[derive(Debug, Default)]
struct Acks {
    at: Mutex<Vec<Instant>>,
    requests: Mutex<BTreeMap<String, BTreeSet<String>>>,
}

impl Acks {
    fn count(&self) -> usize {
        self.at.lock().unwrap().len()
    }

    /// The longest stretch without an acknowledgement within `from..to`.
    fn longest_gap(&self, from: Instant, to: Instant) -> Duration {
        let mut at: Vec<Instant> = self
            .at
            .lock()
            .unwrap()
            .iter()
            .copied()
            .filter(|t| *t >= from && *t <= to)
            .collect();
        at.sort();
        let mut last = from;
        let mut longest = Duration::ZERO;
        for t in at.into_iter().chain([to]) {
            longest = longest.max(t - last);
            last = t;
        }
        longest
    }
}

/// Sends `make()` until it is processed or found already applied: the safe retry. `Err`
/// with the last answers when `give_up` comes first.
async fn until_acknowledged(
    gateway: &CommandGateway,
    make: impl Fn() -> JsonCommand,
    give_up: Instant,
) -> Result<(), String> {
    let mut last = Vec::new();
    while Instant::now() < give_up {
        let mut command = make();
        command.id = uuid::Uuid::now_v7().to_string();
        let plan = WaitPlan::processed().with_timeout(Duration::from_secs(3));
        match gateway.send_and_wait(command, plan).await {
            Ok(result) if result.succeeded => return Ok(()),
            Err(CommandResultError::Failed(result))
                if result.error_code == ErrorCode::DuplicateRequestId =>
            {
                return Ok(())
            }
            other => {
                last.push(match other {
                    Err(CommandResultError::Failed(result)) => format!(
                        "{:?} at {:?}: {}",
                        result.error_code, result.stage, result.error_msg
                    ),
                    other => format!("{other:?}").chars().take(300).collect(),
                });
                if last.len() > 3 {
                    last.remove(0);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Err(last.join("\n"))
}

/// What a caller reports when one of its requests waits long: who owns its partition and
/// what each server holds of the partition's consumer.
struct SlowWatch {
    monitors: Vec<(String, u16)>,
    config: Arc<NatsConfig>,
    jetstream: async_nats::jetstream::Context,
    owners: Vec<(String, watch::Receiver<OwnedPartitions>, StalledPartitions)>,
}

impl SlowWatch {
    fn new(
        cluster: &Cluster,
        config: &Arc<NatsConfig>,
        jetstream: &async_nats::jetstream::Context,
        processors: &[Processor],
    ) -> Arc<Self> {
        Arc::new(Self {
            monitors: cluster.monitors(),
            config: config.clone(),
            jetstream: jetstream.clone(),
            owners: processors
                .iter()
                .map(|p| (p.name.clone(), p.owned.clone(), p.stalled.clone()))
                .collect(),
        })
    }

    /// One report on `partition`.
    async fn report(&self, partition: u32) -> String {
        let owners: Vec<&str> = self
            .owners
            .iter()
            .filter(|(_, owned, _)| owned.borrow().contains_key(&partition))
            .map(|(name, _, _)| name.as_str())
            .collect();
        let stalled = if self
            .owners
            .iter()
            .any(|(_, _, stalled)| stalled.now().contains(&partition))
        {
            " (stalled)"
        } else {
            ""
        };
        let filter = self.config.partition_filter(partition);
        let stored = match self.jetstream.get_stream(&self.config.stream).await {
            Ok(stream) => match stream.info_with_subjects(&filter).await {
                Ok(mut subjects) => {
                    use futures::TryStreamExt;
                    let mut count = 0;
                    while let Ok(Some((_, n))) = subjects.try_next().await {
                        count += n;
                    }
                    format!("{count}")
                }
                Err(error) => format!("? ({error})"),
            },
            Err(error) => format!("? ({error})"),
        };
        let consumer = self.config.partition_consumer(partition);
        let stream = self.config.stream.clone();
        let monitors = self.monitors.clone();
        let views = tokio::task::spawn_blocking(move || {
            monitors
                .into_iter()
                .map(|(name, port)| {
                    format!(
                        "  {name}: {}",
                        cluster::local_view(port, &stream, &consumer)
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .await
        .unwrap_or_default();
        format!(
            "partition {partition}: owned by {owners:?}{stalled}; {stored} commands stored on \
             its subjects (stream leader)\n{views}"
        )
    }
}

/// One caller: opens its account, then deposits 1 again and again until `stop`. A request
/// that waits more than 15 s has `watch` report on its partition.
async fn caller(
    gateway: Arc<CommandGateway>,
    id: AggregateId,
    acks: Arc<Acks>,
    stop: Arc<AtomicBool>,
    slow: Option<Arc<SlowWatch>>,
) {
    // How long one request may take, resends included, before the test gives up on it.
    let patience = Duration::from_secs(60);
    let open = AccountCommand::Open(Open {
        name: "Ann".into(),
        balance: 0,
    });
    let give_up = Instant::now() + patience;
    if let Err(last) =
        until_acknowledged(&gateway, || command(&id, open.clone(), "open"), give_up).await
    {
        panic!(
            "the open of {} never acknowledged; last answers:\n{last}",
            id.id
        );
    }
    let mut n = 0u32;
    while !stop.load(Ordering::SeqCst) {
        let request = format!("deposit-{n}");
        let deposit = AccountCommand::Deposit(Amount { amount: 1 });
        let partition =
            wow_nats::partition_of(&id.tenant_id, &id.aggregate_name, &id.id, PARTITIONS);
        let sent = Instant::now();
        let done = until_acknowledged(
            &gateway,
            || command(&id, deposit.clone(), &request),
            sent + patience,
        );
        tokio::pin!(done);
        let mut reports = 0;
        let done = loop {
            tokio::select! {
                done = &mut done => break done,
                () = tokio::time::sleep(Duration::from_secs(15)), if slow.is_some() && reports < 3 => {
                    reports += 1;
                    if let Some(watch) = &slow {
                        eprintln!(
                            "{request} of {} waits for {:.0} s; {}",
                            id.id,
                            sent.elapsed().as_secs_f64(),
                            watch.report(partition).await
                        );
                    }
                }
            }
        };
        if let Err(last) = done {
            panic!(
                "{request} of {} (partition {partition}) never acknowledged; last answers:\n{last}",
                id.id
            );
        }
        acks.at.lock().unwrap().push(Instant::now());
        acks.requests
            .lock()
            .unwrap()
            .entry(id.id.clone())
            .or_default()
            .insert(request.clone());
        n += 1;
    }
}

/// Asserts that every acknowledged deposit of `ids` is in its history once and nothing is
/// there twice; the number of acknowledged deposits.
async fn assert_each_acknowledged_once(
    store: &Arc<dyn EventStore>,
    ids: &[AggregateId],
    acks: &Acks,
) -> usize {
    let acknowledged = acks.requests.lock().unwrap().clone();
    let mut total = 0;
    for id in ids {
        let history = store.load(id, 1, u64::MAX).await.unwrap();
        let applied: Vec<String> = history.iter().map(|e| e.request_id.clone()).collect();
        let distinct: BTreeSet<String> = applied.iter().cloned().collect();
        assert_eq!(
            distinct.len(),
            applied.len(),
            "a request applied twice in {applied:?}"
        );
        let wanted = acknowledged.get(&id.id).cloned().unwrap_or_default();
        let lost: Vec<_> = wanted.difference(&distinct).collect();
        assert!(lost.is_empty(), "acknowledged but not in history: {lost:?}");
        total += wanted.len();
    }
    total
}

/// Samples of (when, whether every partition was owned).
type Samples = Arc<Mutex<Vec<(Instant, bool)>>>;

/// Samples whether every partition is owned by one processor or another, every 20 ms.
fn watch_ownership(
    owned: Vec<watch::Receiver<OwnedPartitions>>,
    stop: CancellationToken,
) -> (Samples, tokio::task::JoinHandle<()>) {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let recorded = samples.clone();
    let task = tokio::spawn(async move {
        while !stop.is_cancelled() {
            let union: BTreeSet<u32> = owned
                .iter()
                .flat_map(|o| o.borrow().keys().copied().collect::<Vec<_>>())
                .collect();
            recorded
                .lock()
                .unwrap()
                .push((Instant::now(), union.len() == PARTITIONS as usize));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    (samples, task)
}

/// The longest stretch within `from..to` during which some partition was unowned.
fn longest_unowned(samples: &[(Instant, bool)], from: Instant, to: Instant) -> Duration {
    let mut since: Option<Instant> = None;
    let mut longest = Duration::ZERO;
    for (t, all) in samples.iter().filter(|(t, _)| *t >= from && *t <= to) {
        match (all, since) {
            (false, None) => since = Some(*t),
            (true, Some(start)) => {
                longest = longest.max(*t - start);
                since = None;
            }
            _ => {}
        }
    }
    if let Some(start) = since {
        longest = longest.max(to - start);
    }
    longest
}

/// A gateway on a connection of its own: the connection, the gateway and its signals'
/// subscription (dropping it stops the signals).
async fn gateway(
    config: &Arc<NatsConfig>,
) -> (async_nats::Client, Arc<CommandGateway>, WaitSignals) {
    let client = wow_nats::connect(config, "gateway").await.unwrap();
    let waits = WaitCoordinator::new();
    let signals = WaitSignals::listen(&client, config.wait_subject("gateway"), waits.clone())
        .await
        .unwrap();
    let bus = NatsCommandBus::new(client.clone(), config.clone(), signals.subject());
    let gateway = Arc::new(
        CommandGateway::builder(wow_example_bank::registry().unwrap(), Arc::new(bus))
            .wait_coordinator(waits)
            .build(),
    );
    (client, gateway, signals)
}

/// A processor: its own connection, leases in the bucket, consumers of what it owns.
struct Processor {
    name: String,
    leases: PartitionLeases,
    owned: watch::Receiver<OwnedPartitions>,
    stalled: StalledPartitions,
}

async fn processor(
    config: &Arc<NatsConfig>,
    store: &Arc<dyn EventStore>,
    name: &str,
    bucket: &str,
    ttl: Duration,
    stop: &CancellationToken,
) -> Processor {
    let client = wow_nats::connect(config, name).await.unwrap();
    let jetstream = async_nats::jetstream::new(client.clone());
    let notifier = NatsWaitNotifier::new(client.clone(), WaitCoordinator::new());
    let handler = Arc::new(
        DefaultCommandHandler::builder(
            wow_example_bank::registry().unwrap(),
            store.clone(),
            Arc::new(NoopDomainEventBus),
            notifier.clone(),
        )
        .build(),
    );
    let stream = eventually("the command stream", Duration::from_secs(20), || async {
        ensure_command_stream(&jetstream, config).await.ok()
    })
    .await;
    let consumer =
        PartitionConsumer::new(jetstream.clone(), stream, config.clone(), handler, notifier);
    let lease_config = LeaseConfig::new(name, PARTITIONS)
        .bucket(bucket)
        .ttl(ttl)
        .replicas(3);
    let leases = eventually("the lease bucket", Duration::from_secs(20), || async {
        PartitionLeases::start(&jetstream, lease_config.clone())
            .await
            .ok()
    })
    .await;
    let owned = leases.owned();
    let stalled = consumer.stalled();
    tokio::spawn(wow_nats::supervise(consumer, owned.clone(), stop.clone()));
    Processor {
        name: name.to_owned(),
        leases,
        owned,
        stalled,
    }
}

/// The name of the server leading `stream`, once one does and every replica is current.
async fn settled_leader(jetstream: &async_nats::jetstream::Context, stream: &str) -> String {
    eventually(
        &format!("{stream} to settle with three current replicas"),
        Duration::from_secs(30),
        || async {
            let mut stream = jetstream.get_stream(stream).await.ok()?;
            let info = stream.info().await.ok()?;
            let cluster = info.cluster.clone()?;
            let current = cluster
                .replicas
                .iter()
                .filter(|p| p.current && !p.offline)
                .count();
            (current == 2).then_some(cluster.leader?)
        },
    )
    .await
}

/// `RUST_LOG=wow_nats=info` shows what the nodes do during the faults.
fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// The accounts of the `CALLERS` callers.
fn caller_ids(unique: &str) -> Vec<AggregateId> {
    (0..CALLERS)
        .map(|n| AggregateId::new("bank", "account", format!("{unique}-{n}"), "tenant-a"))
        .collect()
}

/// One account in each partition, so that every consumer has work.
fn one_account_per_partition(unique: &str) -> Vec<AggregateId> {
    let mut ids: Vec<AggregateId> = Vec::new();
    for n in 0.. {
        let id = AggregateId::new("bank", "account", format!("{unique}-{n}"), "tenant-a");
        let partition =
            wow_nats::partition_of(&id.tenant_id, &id.aggregate_name, &id.id, PARTITIONS);
        if ids.iter().all(|other| {
            wow_nats::partition_of(
                &other.tenant_id,
                &other.aggregate_name,
                &other.id,
                PARTITIONS,
            ) != partition
        }) {
            ids.push(id);
        }
        if ids.len() == PARTITIONS as usize {
            break;
        }
    }
    ids
}

/// One caller per account, depositing through one gateway, and what they saw.
struct Load {
    ids: Vec<AggregateId>,
    acks: Arc<Acks>,
    calling: Arc<AtomicBool>,
    callers: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Starts a caller for each of `ids`.
    fn start(
        gateway: &Arc<CommandGateway>,
        ids: Vec<AggregateId>,
        slow: Option<Arc<SlowWatch>>,
    ) -> Self {
        let acks = Arc::new(Acks::default());
        let calling = Arc::new(AtomicBool::new(false));
        let callers = ids
            .iter()
            .map(|id| {
                tokio::spawn(caller(
                    gateway.clone(),
                    id.clone(),
                    acks.clone(),
                    calling.clone(),
                    slow.clone(),
                ))
            })
            .collect();
        Self {
            ids,
            acks,
            calling,
            callers,
        }
    }

    /// Stops the callers and waits until each has its last request acknowledged.
    async fn finish(&mut self) {
        self.calling.store(true, Ordering::SeqCst);
        for task in std::mem::take(&mut self.callers) {
            task.await.unwrap();
        }
    }
}

/// Whether every partition was owned, sampled until stopped.
struct Ownership {
    samples: Samples,
    sampling: CancellationToken,
    sampler: tokio::task::JoinHandle<()>,
}

impl Ownership {
    /// Starts sampling the partitions `processors` own.
    fn watch(processors: &[Processor]) -> Self {
        let sampling = CancellationToken::new();
        let (samples, sampler) = watch_ownership(
            processors.iter().map(|p| p.owned.clone()).collect(),
            sampling.clone(),
        );
        Self {
            samples,
            sampling,
            sampler,
        }
    }

    /// Stops sampling; every sample taken.
    async fn stop(self) -> Vec<(Instant, bool)> {
        self.sampling.cancel();
        self.sampler.await.unwrap();
        let samples = self.samples.lock().unwrap().clone();
        samples
    }
}

/// Stops the processors' consumers and gives up their leases.
async fn stop_processors(stop: &CancellationToken, processors: Vec<Processor>) {
    stop.cancel();
    for processor in processors {
        let _ = processor.leases.stop().await;
    }
}

/// Where the time went, shown when the test fails.
struct Phases {
    started: Instant,
}

impl Phases {
    fn mark(&self, what: &str) {
        eprintln!(
            "cluster loss: {what} at {:.1} s",
            self.started.elapsed().as_secs_f64()
        );
    }
}

/// The lease bucket as an older version made it: one replica (starting a processor raises it).
/// The admin's JetStream context.
async fn a_one_replica_lease_bucket(
    config: &Arc<NatsConfig>,
    bucket: &str,
) -> async_nats::jetstream::Context {
    let admin = wow_nats::connect(config, "admin").await.unwrap();
    let jetstream = async_nats::jetstream::new(admin);
    eventually(
        "a one-replica lease bucket",
        Duration::from_secs(30),
        || async {
            jetstream
                .create_stream(async_nats::jetstream::stream::Config {
                    name: format!("KV_{bucket}"),
                    subjects: vec![format!("$KV.{bucket}.>")],
                    max_messages_per_subject: 1,
                    max_age: LEASE_TTL,
                    allow_rollup: true,
                    deny_delete: true,
                    allow_direct: true,
                    discard: async_nats::jetstream::stream::DiscardPolicy::New,
                    num_replicas: 1,
                    ..Default::default()
                })
                .await
                .ok()
        },
    )
    .await;
    jetstream
}

/// The command stream, the lease bucket and the deployment bucket have three replicas.
async fn every_stream_follows_the_replica_setting(
    jetstream: &async_nats::jetstream::Context,
    config: &NatsConfig,
    bucket: &str,
) {
    for stream in [
        config.stream.clone(),
        format!("KV_{bucket}"),
        format!("KV_{}", config.deployment_bucket()),
    ] {
        let replicas = jetstream
            .get_stream(&stream)
            .await
            .unwrap()
            .info()
            .await
            .unwrap()
            .config
            .num_replicas;
        assert_eq!(replicas, 3, "{stream} follows the replica setting");
    }
}

/// The servers leading the command stream and the lease bucket.
#[derive(Clone)]
struct Leaders {
    stream: String,
    bucket: String,
}

/// The window of one fault, and who led what when it began.
struct FaultWindow {
    /// The server the fault hit.
    server: usize,
    from: Instant,
    to: Instant,
    leaders: Leaders,
}

/// A crash: kills the server the gateway is connected to until deposits went on with two
/// servers of three for `FAULT`, then runs it again and waits for settled leaders.
async fn kill_the_gateways_server(
    cluster: &mut Cluster,
    client: &async_nats::Client,
    jetstream: &async_nats::jetstream::Context,
    config: &NatsConfig,
    bucket: &str,
    acks: &Acks,
    phases: &Phases,
) -> (FaultWindow, Leaders) {
    let victim = cluster
        .index_of(&client.server_info().server_name)
        .unwrap_or(0);
    let kill_leaders = Leaders {
        stream: settled_leader(jetstream, &config.stream).await,
        bucket: settled_leader(jetstream, &format!("KV_{bucket}")).await,
    };
    let before = acks.count();
    let killed_at = Instant::now();
    cluster.kill(victim);
    // Deposits go on with two servers of three (once JetStream elected new leaders).
    eventually(
        "deposits with a server killed",
        Duration::from_secs(30),
        || async { (acks.count() > before + 10 && killed_at.elapsed() >= FAULT).then_some(()) },
    )
    .await;
    phases.mark("deposits with a server killed");
    cluster.run(victim);
    let leader = settled_leader(jetstream, &format!("KV_{bucket}")).await;
    let stream_leader = settled_leader(jetstream, &config.stream).await;
    let killed_until = Instant::now();
    let killed = FaultWindow {
        server: victim,
        from: killed_at,
        to: killed_until,
        leaders: kill_leaders,
    };
    let settled = Leaders {
        stream: stream_leader,
        bucket: leader,
    };
    (killed, settled)
}

/// A hang: freezes the server leading the lease bucket for `FAULT`, then waits for deposits
/// and runs the measurement window on 2 s past the resumption.
async fn freeze_the_lease_bucket_leader(
    cluster: &Cluster,
    settled: &Leaders,
    acks: &Acks,
) -> FaultWindow {
    let frozen = cluster.index_of(&settled.bucket).unwrap_or(0);
    let before = acks.count();
    let frozen_at = Instant::now();
    cluster.signal(frozen, "STOP");
    // The cluster serves again without it: JetStream's elections (NATS 2.9: 4 to 9 s
    // without a leader's heartbeat) and the clients' ping (a few seconds) come first.
    tokio::time::sleep(FAULT).await;
    cluster.signal(frozen, "CONT");
    eventually(
        "deposits after the freeze",
        Duration::from_secs(30),
        || async { (acks.count() > before + 10).then_some(()) },
    )
    .await;
    // The measurement window runs on 2 s past the resumption.
    tokio::time::sleep(Duration::from_secs(2)).await;
    FaultWindow {
        server: frozen,
        from: frozen_at,
        to: Instant::now(),
        leaders: settled.clone(),
    }
}

/// Prints, per fault, the longest time without an acknowledgement and with a partition
/// unowned, and asserts that every partition was owned again within the lease TTL plus 2 s.
fn every_partition_was_owned_again_within_the_lease_ttl(
    cluster: &Cluster,
    (killed, frozen): (&FaultWindow, &FaultWindow),
    samples: &[(Instant, bool)],
    acks: &Acks,
    total: usize,
) {
    let killed_gap = acks.longest_gap(killed.from, killed.to);
    let frozen_gap = acks.longest_gap(frozen.from, frozen.to);
    let killed_unowned = longest_unowned(samples, killed.from, killed.to);
    let frozen_unowned = longest_unowned(samples, frozen.from, frozen.to);
    eprintln!(
        "cluster loss: {total} deposits acknowledged; killed {} (the gateway's server; command \
         stream leader {}, lease bucket leader {}): {:.1} s without acknowledgements, \
         {:.1} s with a partition unowned; frozen {} (lease bucket leader; command stream \
         leader {}) for {FAULT:?}: {:.1} s without acknowledgements, {:.1} s \
         with a partition unowned",
        cluster.servers[killed.server].name,
        killed.leaders.stream,
        killed.leaders.bucket,
        killed_gap.as_secs_f64(),
        killed_unowned.as_secs_f64(),
        cluster.servers[frozen.server].name,
        frozen.leaders.stream,
        frozen_gap.as_secs_f64(),
        frozen_unowned.as_secs_f64(),
    );
    let bound = LEASE_TTL + Duration::from_secs(2);
    assert!(
        killed_unowned <= bound,
        "unowned for {killed_unowned:?} after a kill"
    );
    assert!(
        frozen_unowned <= bound,
        "unowned for {frozen_unowned:?} during a freeze"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "runs three NATS servers of its own for up to 150 s: .ci/run runs it on its own, after the suite"]
async fn losing_one_server_of_three_loses_no_acknowledged_command_and_partitions_are_owned_again_within_the_lease_ttl(
) {
    init_tracing();
    let Some(mut cluster) = Cluster::start() else {
        return;
    };
    let phases = Phases {
        started: Instant::now(),
    };
    let bounded = tokio::time::timeout(Duration::from_secs(150), async {
        let unique = uuid::Uuid::now_v7().simple().to_string();
        let config = Arc::new(deployment(&cluster, &unique));
        let bucket = format!("wowcluster_{unique}");
        let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
        let stop = CancellationToken::new();
        let jetstream = a_one_replica_lease_bucket(&config, &bucket).await;
        let processors = vec![
            processor(&config, &store, "proc-a", &bucket, LEASE_TTL, &stop).await,
            processor(&config, &store, "proc-b", &bucket, LEASE_TTL, &stop).await,
        ];
        every_stream_follows_the_replica_setting(&jetstream, &config, &bucket).await;

        let (client, gateway, _signals) = gateway(&config).await;
        let slow = SlowWatch::new(&cluster, &config, &jetstream, &processors);
        let mut load = Load::start(&gateway, caller_ids(&unique), Some(slow));
        let ownership = Ownership::watch(&processors);
        eventually(
            "the first acknowledgements, with the partitions shared",
            Duration::from_secs(30),
            || async {
                let shared = processors
                    .iter()
                    .all(|p| p.owned.borrow().len() == PARTITIONS as usize / 2);
                (shared && load.acks.count() >= 20).then_some(())
            },
        )
        .await;

        phases.mark("started, partitions shared");
        let (killed, settled) = kill_the_gateways_server(
            &mut cluster,
            &client,
            &jetstream,
            &config,
            &bucket,
            &load.acks,
            &phases,
        )
        .await;
        phases.mark("killed server back, leaders settled");
        let frozen = freeze_the_lease_bucket_leader(&cluster, &settled, &load.acks).await;
        phases.mark("deposits after the freeze");

        load.finish().await;
        phases.mark("callers done");
        let samples = ownership.stop().await;

        // Nothing acknowledged lost, nothing applied twice.
        let total = assert_each_acknowledged_once(&store, &load.ids, &load.acks).await;
        every_partition_was_owned_again_within_the_lease_ttl(
            &cluster,
            (&killed, &frozen),
            &samples,
            &load.acks,
            total,
        );
        stop_processors(&stop, processors).await;
    })
    .await;
    assert!(bounded.is_ok(), "the cluster test took more than 150 s");
}

impl Acks {
    /// How many deposits of `id` were acknowledged.
    fn of(&self, id: &AggregateId) -> usize {
        self.requests
            .lock()
            .unwrap()
            .get(&id.id)
            .map_or(0, BTreeSet::len)
    }
}

/// The test's deployment on `cluster`: its NATS layout, under names of its own.
fn deployment(cluster: &Cluster, unique: &str) -> NatsConfig {
    let mut config = NatsConfig::new(cluster.url());
    config.stream = format!("WOW_CLUSTER_{unique}");
    config.subject_prefix = format!("wowcluster.{unique}.commands");
    config.wait_prefix = format!("wowcluster.{unique}.wait");
    config.partitions = PARTITIONS;
    config.replicas = 3;
    config.storage = CommandStorage::File;
    config.ack_wait = Duration::from_secs(5);
    config
}

/// Every partition consumer's leader steps down: a leader change for each of them. Each
/// account's deposits go on within `RESUMED_WITHIN` of it.
async fn every_partition_is_served_again_after_its_leader_steps_down(
    config: &NatsConfig,
    load: &Load,
) {
    let admin = wow_nats::connect(config, "admin").await.unwrap();
    let acks = &load.acks;
    let before: Vec<usize> = load.ids.iter().map(|id| acks.of(id)).collect();
    let stepped_at = Instant::now();
    for partition in 0..PARTITIONS {
        let subject = format!(
            "$JS.API.CONSUMER.LEADER.STEPDOWN.{}.{}",
            config.stream,
            config.partition_consumer(partition)
        );
        let answer = admin.request(subject, "".into()).await.unwrap();
        let answer: serde_json::Value = serde_json::from_slice(&answer.payload).unwrap();
        assert_eq!(
            answer["success"], true,
            "step-down of partition {partition}: {answer}"
        );
    }
    let mut resumed = Vec::new();
    for (id, before) in load.ids.iter().zip(&before) {
        eventually(
            &format!("deposits of {} after its consumer's leader changed", id.id),
            (stepped_at + RESUMED_WITHIN).saturating_duration_since(Instant::now()),
            || async { (acks.of(id) >= before + 3).then_some(()) },
        )
        .await;
        resumed.push(stepped_at.elapsed());
    }
    let slowest = resumed.iter().max().copied().unwrap_or_default();
    eprintln!(
        "consumer leader change: every partition served again within {:.1} s",
        slowest.as_secs_f64()
    );
}

/// A consumer whose leader changes loses the pull request it held: JetStream answers the
/// old request with a leadership change and the new leader has nothing to answer. A
/// consumer that waited for its pull request to expire (30 s by default) would leave its
/// partition unserved that long while the node said it was ready. Each partition here is
/// served again within 10 s of its consumer's leader stepping down, and nothing is lost or
/// applied twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "runs three NATS servers of its own for up to 90 s: .ci/run runs it on its own, after the suite"]
async fn a_partition_consumer_whose_leader_changes_is_served_again_within_seconds() {
    init_tracing();
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let bounded = tokio::time::timeout(Duration::from_secs(90), async {
        let unique = uuid::Uuid::now_v7().simple().to_string();
        let config = Arc::new(deployment(&cluster, &unique));
        let bucket = format!("wowcluster_{unique}");
        let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
        let stop = CancellationToken::new();
        let processor = processor(&config, &store, "proc-a", &bucket, LEASE_TTL, &stop).await;
        let (_client, gateway, _signals) = gateway(&config).await;
        let mut load = Load::start(&gateway, one_account_per_partition(&unique), None);
        eventually(
            "deposits in every partition",
            Duration::from_secs(30),
            || async {
                load.ids
                    .iter()
                    .all(|id| load.acks.of(id) >= 5)
                    .then_some(())
            },
        )
        .await;

        every_partition_is_served_again_after_its_leader_steps_down(&config, &load).await;
        eventually(
            "no partition stalled once served again",
            Duration::from_secs(10),
            || async { processor.stalled.is_empty().then_some(()) },
        )
        .await;

        load.finish().await;
        assert_each_acknowledged_once(&store, &load.ids, &load.acks).await;
        stop_processors(&stop, vec![processor]).await;
    })
    .await;
    assert!(
        bounded.is_ok(),
        "the consumer leader test took more than 90 s"
    );
}

/// What a soak round does to its server.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Kill,
    Freeze,
}

/// Which server a soak round loses: what it leads.
#[derive(Debug, Clone, Copy)]
enum Target {
    MetaLeader,
    StreamLeader,
    BucketLeader,
    Follower,
}

/// The kinds of soak round, in turn.
const SOAK_KINDS: [(Fault, Target); 8] = [
    (Fault::Kill, Target::MetaLeader),
    (Fault::Freeze, Target::MetaLeader),
    (Fault::Kill, Target::StreamLeader),
    (Fault::Freeze, Target::StreamLeader),
    (Fault::Kill, Target::BucketLeader),
    (Fault::Freeze, Target::BucketLeader),
    (Fault::Kill, Target::Follower),
    (Fault::Freeze, Target::Follower),
];

/// What the soak's rounds act on and measure.
struct Soak {
    cluster: Cluster,
    jetstream: async_nats::jetstream::Context,
    config: Arc<NatsConfig>,
    bucket: String,
    acks: Arc<Acks>,
    samples: Samples,
    fault: Duration,
}

impl Soak {
    /// The servers leading the JetStream meta group, the command stream and the lease bucket,
    /// once settled.
    async fn leaders(&self) -> [String; 3] {
        let stream_leader = settled_leader(&self.jetstream, &self.config.stream).await;
        let bucket_leader = settled_leader(&self.jetstream, &format!("KV_{}", self.bucket)).await;
        let meta_leader = eventually("a meta leader", Duration::from_secs(30), || async {
            self.cluster.meta_leader()
        })
        .await;
        [meta_leader, stream_leader, bucket_leader]
    }

    /// The server `target` names among `leaders` (meta, stream, bucket), if any.
    fn victim(&self, target: Target, leaders: &[String; 3]) -> Option<usize> {
        let [meta_leader, stream_leader, bucket_leader] = leaders;
        match target {
            Target::MetaLeader => self.cluster.index_of(meta_leader),
            Target::StreamLeader => self.cluster.index_of(stream_leader),
            Target::BucketLeader => self.cluster.index_of(bucket_leader),
            Target::Follower => self
                .cluster
                .servers
                .iter()
                .position(|s| leaders.iter().all(|leader| *leader != s.name)),
        }
    }

    /// One round: loses the `target` server by `how` for the fault's length, waits for
    /// deposits and 2 s more; the round's line, or `None` when no server fits `target`.
    async fn round(&mut self, round: usize, how: Fault, target: Target) -> Option<String> {
        let leaders = self.leaders().await;
        let Some(victim) = self.victim(target, &leaders) else {
            eprintln!(
                "soak round {round}: no server for {target:?} (every server leads something)"
            );
            return None;
        };
        let name = self.cluster.servers[victim].name.clone();
        let led: Vec<&str> = ["meta", "stream", "bucket"]
            .iter()
            .zip(&leaders)
            .filter(|(_, leader)| **leader == name)
            .map(|(what, _)| *what)
            .collect();
        let before = self.acks.count();
        let from = Instant::now();
        match how {
            Fault::Kill => self.cluster.kill(victim),
            Fault::Freeze => self.cluster.signal(victim, "STOP"),
        }
        tokio::time::sleep(self.fault).await;
        match how {
            Fault::Kill => self.cluster.run(victim),
            Fault::Freeze => self.cluster.signal(victim, "CONT"),
        }
        let acks = &self.acks;
        eventually(
            "deposits after the fault",
            Duration::from_secs(60),
            || async { (acks.count() > before + 10).then_some(()) },
        )
        .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let to = Instant::now();
        let samples = self.samples.lock().unwrap().clone();
        Some(format!(
            "soak round {round}: {how:?} {target:?} ({name}, leading [{}]) for {:?}: \
             {:.1} s without acknowledgements, {:.1} s with a partition unowned",
            led.join(", "),
            self.fault,
            acks.longest_gap(from, to).as_secs_f64(),
            longest_unowned(&samples, from, to).as_secs_f64(),
        ))
    }
}

/// The soak's rounds and fault length from the environment; `None` when
/// `WOW_NATS_SOAK_ROUNDS` is unset.
fn soak_settings() -> Option<(usize, Duration)> {
    let rounds: usize = match std::env::var("WOW_NATS_SOAK_ROUNDS") {
        Ok(rounds) => rounds.parse().unwrap(),
        Err(_) => {
            eprintln!("soak: set WOW_NATS_SOAK_ROUNDS to run it");
            return None;
        }
    };
    let fault = std::env::var("WOW_NATS_SOAK_FAULT_MS").map_or(Duration::from_secs(10), |ms| {
        Duration::from_millis(ms.parse().unwrap())
    });
    Some((rounds, fault))
}

/// The soak: `WOW_NATS_SOAK_ROUNDS` rounds (none when unset), each losing one server of the
/// three for `WOW_NATS_SOAK_FAULT_MS` (10 s by default), by kind in turn: killed or frozen,
/// the JetStream meta leader, the command stream's leader, the lease bucket's leader, or a
/// server that leads none of them. Two processors with the service's default lease TTL
/// (3 s), four callers with the safe retry. Prints a line per round and asserts at the end
/// that nothing acknowledged was lost or applied twice. docs/reliability.md has its figures.
///
/// `WOW_NATS_SOAK_ROUNDS=16 cargo test -p wow-nats --test cluster_loss soak -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a soak of several minutes, run by hand: see its doc"]
async fn soak_losing_one_server_of_three_round_after_round() {
    init_tracing();
    let Some((rounds, fault)) = soak_settings() else {
        return;
    };
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let unique = uuid::Uuid::now_v7().simple().to_string();
    let config = Arc::new(deployment(&cluster, &unique));
    let bucket = format!("wowcluster_{unique}");
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let stop = CancellationToken::new();
    let ttl = Duration::from_secs(3);
    let processors = vec![
        processor(&config, &store, "proc-a", &bucket, ttl, &stop).await,
        processor(&config, &store, "proc-b", &bucket, ttl, &stop).await,
    ];
    let (_client, gateway, _signals) = gateway(&config).await;
    let admin = wow_nats::connect(&config, "admin").await.unwrap();
    let jetstream = async_nats::jetstream::new(admin);
    let slow = SlowWatch::new(&cluster, &config, &jetstream, &processors);
    let mut load = Load::start(&gateway, caller_ids(&unique), Some(slow));
    let ownership = Ownership::watch(&processors);
    eventually(
        "the first acknowledgements",
        Duration::from_secs(60),
        || async { (load.acks.count() >= 20).then_some(()) },
    )
    .await;
    let mut soak = Soak {
        cluster,
        jetstream,
        config,
        bucket,
        acks: load.acks.clone(),
        samples: ownership.samples.clone(),
        fault,
    };
    let mut rows = Vec::new();
    for round in 0..rounds {
        let (how, target) = SOAK_KINDS[round % SOAK_KINDS.len()];
        if let Some(row) = soak.round(round, how, target).await {
            eprintln!("{row}");
            rows.push(row);
        }
    }
    load.finish().await;
    ownership.stop().await;
    let total = assert_each_acknowledged_once(&store, &load.ids, &load.acks).await;
    eprintln!("soak: {rounds} rounds, {total} deposits acknowledged, none lost or applied twice");
    for row in rows {
        eprintln!("{row}");
    }
    stop_processors(&stop, processors).await;
}
