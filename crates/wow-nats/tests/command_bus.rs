//! The distributed command bus against a real NATS server: gateway → JetStream → processor
//! → core NATS → gateway, and what a new owner of a partition receives.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod setup;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use wow_core::command::{CommandHandler, CommandResultError, InTransit, JsonCommand};
use wow_core::event::NoopDomainEventBus;
use wow_core::eventsourcing::{EventStore, InMemoryEventStore, RequestDecision};
use wow_core::{AggregateId, CommandMessage, CommandResult, CommandStage, ErrorCode};
use wow_example_bank::account::{AccountCommand, Amount, Open};
use wow_nats::{
    ensure_command_stream, NatsCommandBus, NatsConfig, NatsWaitNotifier, PartitionConsumer,
    WaitSignals,
};
use wow_runtime::command::{
    look_up_request, CommandGateway, DefaultCommandHandler, RequestOutcome, WaitCoordinator,
    WaitNotifier, WaitPlan,
};

const DEADLINE: Duration = Duration::from_secs(15);

fn account(id: &str) -> AggregateId {
    AggregateId::new("bank", "account", id, "tenant-a")
}

fn open(id: &AggregateId, balance: i64) -> JsonCommand {
    CommandMessage::of(
        id.clone(),
        AccountCommand::Open(Open {
            name: "Ann".into(),
            balance,
        }),
    )
    .into_json()
    .unwrap()
}

fn withdraw(id: &AggregateId, amount: i64) -> JsonCommand {
    CommandMessage::of(id.clone(), AccountCommand::Withdraw(Amount { amount }))
        .into_json()
        .unwrap()
}

/// A gateway-only node: no event store, signals from NATS.
struct Gateway {
    gateway: CommandGateway,
    _signals: WaitSignals,
}

async fn gateway(client: &async_nats::Client, config: &Arc<NatsConfig>, node: &str) -> Gateway {
    let waits = WaitCoordinator::new();
    let signals = WaitSignals::listen(client, config.wait_subject(node), waits.clone())
        .await
        .unwrap();
    let bus = NatsCommandBus::new(client.clone(), config.clone(), signals.subject());
    let gateway = CommandGateway::builder(wow_example_bank::registry().unwrap(), Arc::new(bus))
        .wait_coordinator(waits)
        .build();
    Gateway {
        gateway,
        _signals: signals,
    }
}

/// A processing node over `store`, signalling through `notifier`.
fn node(
    store: &Arc<dyn EventStore>,
    notifier: Arc<dyn WaitNotifier>,
) -> Arc<DefaultCommandHandler> {
    Arc::new(
        DefaultCommandHandler::builder(
            wow_example_bank::registry().unwrap(),
            store.clone(),
            Arc::new(NoopDomainEventBus),
            notifier,
        )
        .build(),
    )
}

/// Consumes every partition into `handler` until the returned token is cancelled.
async fn consume_all(
    client: &async_nats::Client,
    config: &Arc<NatsConfig>,
    handler: Arc<dyn CommandHandler>,
    notifier: Arc<NatsWaitNotifier>,
) -> (CancellationToken, Vec<tokio::task::JoinHandle<()>>) {
    let jetstream = async_nats::jetstream::new(client.clone());
    let stream = ensure_command_stream(&jetstream, config).await.unwrap();
    let consumer =
        PartitionConsumer::new(jetstream.clone(), stream, config.clone(), handler, notifier);
    let stop = CancellationToken::new();
    let tasks = (0..config.partitions)
        .map(|partition| {
            let consumer = consumer.clone();
            let stop = stop.clone();
            tokio::spawn(async move { consumer.run(partition, stop).await.unwrap() })
        })
        .collect();
    (stop, tasks)
}

async fn stop(token: CancellationToken, tasks: Vec<tokio::task::JoinHandle<()>>) {
    token.cancel();
    for task in tasks {
        task.await.unwrap();
    }
}

async fn processed(
    gateway: &CommandGateway,
    command: JsonCommand,
) -> Result<CommandResult, CommandResult> {
    match gateway
        .send_and_wait(command, WaitPlan::processed().with_timeout(DEADLINE))
        .await
    {
        Ok(result) => Ok(result),
        Err(CommandResultError::Failed(result)) => Err(*result),
        Err(other) => panic!("no final result: {other:?}"),
    }
}

#[tokio::test]
async fn a_command_crosses_nats_to_its_processor_and_a_resend_is_answered_with_the_original_version(
) {
    let Some((client, config)) = setup::server().await else {
        return;
    };
    let jetstream = async_nats::jetstream::new(client.clone());
    ensure_command_stream(&jetstream, &config).await.unwrap();
    let gateway = gateway(&client, &config, "gateway-1").await;
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let notifier = NatsWaitNotifier::new(client.clone(), WaitCoordinator::new());
    let processor = node(&store, notifier.clone());
    let (token, tasks) = consume_all(&client, &config, processor, notifier).await;

    let id = account(&uuid::Uuid::now_v7().to_string());
    let first = open(&id, 10).with_request_id("open-once");
    let done = processed(&gateway.gateway, first.clone()).await.unwrap();
    assert_eq!(done.stage, CommandStage::Processed);
    assert_eq!(done.aggregate_version, Some(1));

    // SPEC RQ-3 / RQ-7 through the distributed bus: the gateway has no store, so the resend
    // is SENT; the processor finds the request id and answers with the original version.
    let mut resend = open(&id, 10).with_request_id("open-once");
    resend.id = uuid::Uuid::now_v7().to_string();
    let sent = gateway
        .gateway
        .send_and_wait(resend.clone(), WaitPlan::sent())
        .await
        .unwrap();
    assert!(sent.succeeded);
    let mut again = open(&id, 10).with_request_id("open-once");
    again.id = uuid::Uuid::now_v7().to_string();
    let duplicate = processed(&gateway.gateway, again).await.unwrap_err();
    assert_eq!(duplicate.error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(duplicate.aggregate_version, Some(1));
    let history = store.load(&id, 1, u64::MAX).await.unwrap();
    assert_eq!(history.len(), 1, "appended once");

    stop(token, tasks).await;
    setup::remove_stream(&client, &config).await;
}

#[tokio::test]
async fn without_nats_a_send_answers_service_unavailable_at_sent() {
    let mut config = NatsConfig::new("nats://127.0.0.1:1");
    config.partitions = 2;
    let client = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect("nats://127.0.0.1:1")
        .await
        .unwrap();
    let bus = NatsCommandBus::new(client, Arc::new(config), "nowhere");
    let gateway =
        CommandGateway::builder(wow_example_bank::registry().unwrap(), Arc::new(bus)).build();
    let error = gateway
        .send_and_wait(open(&account("a-1"), 1), WaitPlan::processed())
        .await
        .unwrap_err();
    let result = error.result();
    assert_eq!(result.stage, CommandStage::Sent);
    assert_eq!(result.error_code, ErrorCode::ServiceUnavailable);
}

/// Records the commands it receives and never finishes the one named `hang_on`: a
/// processor that dies mid-command.
#[derive(Debug, Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
    hang_on: Option<String>,
}

#[async_trait]
impl CommandHandler for Recorder {
    async fn handle(&self, command: JsonCommand) {
        self.seen.lock().unwrap().push(command.request_id.clone());
        if self.hang_on.as_deref() == Some(command.request_id.as_str()) {
            std::future::pending::<()>().await;
        }
    }
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_new_owner_gets_every_unacknowledged_command_of_the_partition_in_order_at_once() {
    let Some((client, config)) = setup::server().await else {
        return;
    };
    let jetstream = async_nats::jetstream::new(client.clone());
    ensure_command_stream(&jetstream, &config).await.unwrap();
    let gateway = gateway(&client, &config, "gateway-2").await;
    let id = account("ordered");
    let names: Vec<String> = (0..20).map(|n| format!("r-{n:02}")).collect();
    for name in &names {
        let command = withdraw(&id, 1).with_request_id(name.clone());
        gateway.gateway.send(command).await.unwrap();
    }
    // The first owner handles r-00..r-04 and dies inside r-05: none of r-05.. is acknowledged.
    let first = Arc::new(Recorder {
        hang_on: Some("r-05".into()),
        ..Recorder::default()
    });
    let notifier = NatsWaitNotifier::new(client.clone(), WaitCoordinator::new());
    let (token, tasks) = consume_all(&client, &config, first.clone(), notifier.clone()).await;
    until("the first owner to reach r-05", || {
        first.seen.lock().unwrap().contains(&"r-05".to_owned())
    })
    .await;
    stop(token, tasks).await;

    let second = Arc::new(Recorder::default());
    let started = tokio::time::Instant::now();
    let (token, tasks) = consume_all(&client, &config, second.clone(), notifier).await;
    until("the second owner to get every command", || {
        second.seen.lock().unwrap().len() >= names.len() - 5
    })
    .await;
    // Well within the acknowledgement wait (30 s): the takeover makes the consumer afresh.
    assert!(started.elapsed() < Duration::from_secs(10));
    let seen = second.seen.lock().unwrap().clone();
    let first_seen = first.seen.lock().unwrap().clone();
    // Everything the first owner did not acknowledge, in order; what it did, possibly again
    // (a batch is acknowledged together), never out of order.
    let tail: Vec<String> = names[5..].to_vec();
    assert_eq!(
        seen[seen.len() - tail.len()..],
        tail[..],
        "first saw {first_seen:?}"
    );
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(sorted, seen, "in stream order");
    stop(token, tasks).await;
    setup::remove_stream(&client, &config).await;
}

/// Drops every signal: a processor that decides and dies before anyone hears of it.
#[derive(Debug)]
struct Silent;

impl WaitNotifier for Silent {
    fn notify(&self, _result: CommandResult) {}
}

/// Runs the real node, then never returns (so never acknowledges): a crash after the
/// decision was recorded.
#[derive(Debug)]
struct DiesAfterDeciding(Arc<DefaultCommandHandler>, Arc<Mutex<u32>>);

#[async_trait]
impl CommandHandler for DiesAfterDeciding {
    async fn handle(&self, command: JsonCommand) {
        self.0.handle(command).await;
        *self.1.lock().unwrap() += 1;
        std::future::pending::<()>().await;
    }
}

#[tokio::test]
async fn a_rejection_redelivered_to_a_new_owner_is_answered_from_its_rejection_record() {
    let Some((client, config)) = setup::server().await else {
        return;
    };
    let jetstream = async_nats::jetstream::new(client.clone());
    ensure_command_stream(&jetstream, &config).await.unwrap();
    let gateway = gateway(&client, &config, "gateway-3").await;
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let id = account(&uuid::Uuid::now_v7().to_string());

    let notifier = NatsWaitNotifier::new(client.clone(), WaitCoordinator::new());
    let healthy = node(&store, notifier.clone());
    let (token, tasks) = consume_all(&client, &config, healthy, notifier.clone()).await;
    processed(&gateway.gateway, open(&id, 5)).await.unwrap();
    stop(token, tasks).await;

    // The first owner rejects the overdraft, records the rejection, and dies silently.
    let decided = Arc::new(Mutex::new(0));
    let dying = DiesAfterDeciding(node(&store, Arc::new(Silent)), decided.clone());
    let (token, tasks) = consume_all(&client, &config, Arc::new(dying), notifier.clone()).await;
    let overdraft = withdraw(&id, 50).with_request_id("too-much");
    let caller = {
        let gateway = gateway.gateway.clone();
        let overdraft = overdraft.clone();
        tokio::spawn(async move { processed(&gateway, overdraft).await })
    };
    until("the first owner to decide", || {
        *decided.lock().unwrap() == 1
    })
    .await;
    stop(token, tasks).await;
    let Some(RequestDecision::Rejected(rejection)) =
        store.find_decision(&id, "too-much").await.unwrap()
    else {
        panic!("the rejection is recorded");
    };

    // The new owner (a fresh node: cold cache, new filters) gets the redelivery and answers
    // the waiting caller from the record.
    let fresh = node(&store, notifier.clone());
    let (token, tasks) = consume_all(&client, &config, fresh, notifier).await;
    let answer = caller.await.unwrap().unwrap_err();
    assert_eq!(answer.error_code, rejection.error_code);
    assert_eq!(
        store.load(&id, 1, u64::MAX).await.unwrap().len(),
        1,
        "only the open"
    );
    stop(token, tasks).await;
    setup::remove_stream(&client, &config).await;
}

#[tokio::test]
async fn a_message_from_an_older_gateway_is_processed_and_one_from_a_newer_is_refused_by_name() {
    let Some((client, config)) = setup::server().await else {
        return;
    };
    let jetstream = async_nats::jetstream::new(client.clone());
    ensure_command_stream(&jetstream, &config).await.unwrap();
    let waits = WaitCoordinator::new();
    let signals = WaitSignals::listen(&client, config.wait_subject("raw"), waits.clone())
        .await
        .unwrap();
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let notifier = NatsWaitNotifier::new(client.clone(), WaitCoordinator::new());
    let processor = node(&store, notifier.clone());
    let (token, tasks) = consume_all(&client, &config, processor, notifier).await;

    // Published as a gateway of another build would: the JSON message and its reply subject,
    // with or without the protocol header (none: protocol 0, before the header existed).
    let publish = |command: JsonCommand| {
        let jetstream = jetstream.clone();
        let config = config.clone();
        async move {
            let subject = config
                .legacy_partition_subject(wow_nats::command_partition(&command, config.partitions));
            jetstream
                .publish(subject, serde_json::to_vec(&command).unwrap().into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
    };
    let reply = signals.subject().to_owned();
    let older =
        open(&account("from-older"), 1).with_header(wow_nats::WAIT_REPLY_HEADER, reply.clone());
    let mut handle = waits.observe(&older.id, WaitPlan::processed().with_timeout(DEADLINE));
    publish(older).await;
    let answer = tokio::time::timeout(DEADLINE, handle.next())
        .await
        .unwrap()
        .unwrap();
    assert!(answer.succeeded, "{answer:?}");
    assert_eq!(answer.aggregate_version, Some(1));

    let newer = open(&account("from-newer"), 1)
        .with_header(wow_nats::WAIT_REPLY_HEADER, reply)
        .with_header(
            wow_runtime::command::PROTOCOL_HEADER,
            (wow_runtime::command::PROTOCOL_VERSION + 1).to_string(),
        );
    let mut handle = waits.observe(&newer.id, WaitPlan::processed().with_timeout(DEADLINE));
    publish(newer).await;
    let answer = tokio::time::timeout(DEADLINE, handle.next())
        .await
        .unwrap()
        .unwrap();
    assert!(!answer.succeeded);
    assert!(
        answer
            .error_msg
            .contains("upgrade processing nodes before gateways"),
        "{answer:?}"
    );
    assert!(store
        .load(&account("from-newer"), 1, u64::MAX)
        .await
        .unwrap()
        .is_empty());

    stop(token, tasks).await;
    setup::remove_stream(&client, &config).await;
}

#[tokio::test]
async fn a_message_that_does_not_decode_is_dropped_and_the_partition_goes_on() {
    let Some((client, config)) = setup::server().await else {
        return;
    };
    let jetstream = async_nats::jetstream::new(client.clone());
    ensure_command_stream(&jetstream, &config).await.unwrap();
    let gateway = gateway(&client, &config, "gateway-poison").await;
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let notifier = NatsWaitNotifier::new(client.clone(), WaitCoordinator::new());
    let processor = node(&store, notifier.clone());

    // A message no gateway of any build would write, on the partition of the command after it.
    let id = account(&uuid::Uuid::now_v7().to_string());
    let command = open(&id, 3);
    let partition = wow_nats::command_partition(&command, config.partitions);
    jetstream
        .publish(
            config.legacy_partition_subject(partition),
            "not a command".into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    let (token, tasks) = consume_all(&client, &config, processor, notifier).await;

    // The partition is not stuck behind it: the next command is processed.
    let done = processed(&gateway.gateway, command).await.unwrap();
    assert_eq!(done.aggregate_version, Some(1));
    stop(token, tasks).await;
    // And it is not delivered again: acknowledged, the stream lets both go.
    let mut stream = jetstream.get_stream(&config.stream).await.unwrap();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while stream.info().await.unwrap().state.messages > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "messages left in the stream"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    setup::remove_stream(&client, &config).await;
}

/// SPEC TO-1 across gateways: a command on the bus and not yet decided is in flight for
/// every gateway that asks (not only the one that sent it), appended once a processor
/// decided it, and then off the bus.
#[tokio::test]
async fn a_command_on_the_bus_is_in_flight_for_every_gateway_until_it_is_decided() {
    let Some((client, config)) = setup::server().await else {
        return;
    };
    let jetstream = async_nats::jetstream::new(client.clone());
    ensure_command_stream(&jetstream, &config).await.unwrap();
    let sender = gateway(&client, &config, "gateway-sender").await;
    let other = gateway(&client, &config, "gateway-other").await;
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let id = account(&uuid::Uuid::now_v7().to_string());
    // A request id of any characters, subject wildcards included.
    let request_id = "open it. * > now";
    let command = open(&id, 10).with_request_id(request_id);
    sender
        .gateway
        .send_and_wait(command, WaitPlan::sent())
        .await
        .unwrap();
    for gateway in [&sender, &other] {
        let outcome = look_up_request(&gateway.gateway, store.as_ref(), &id, request_id).await;
        assert!(
            matches!(outcome, RequestOutcome::InFlight),
            "no processor yet: {outcome:?}"
        );
        let outcome = look_up_request(&gateway.gateway, store.as_ref(), &id, "never-sent").await;
        assert!(matches!(outcome, RequestOutcome::None), "{outcome:?}");
    }

    let notifier = NatsWaitNotifier::new(client.clone(), WaitCoordinator::new());
    let (token, tasks) =
        consume_all(&client, &config, node(&store, notifier.clone()), notifier).await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        match look_up_request(&other.gateway, store.as_ref(), &id, request_id).await {
            RequestOutcome::Appended(record) => {
                assert_eq!(record.version, 1);
                break;
            }
            RequestOutcome::InFlight => {}
            outcome => panic!("between in flight and appended: {outcome:?}"),
        }
        assert!(tokio::time::Instant::now() < deadline, "never appended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Acknowledged once decided: the bus holds it no more.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while other.gateway.bus_in_transit(&id, request_id).await.unwrap() != InTransit::Absent {
        assert!(tokio::time::Instant::now() < deadline, "never acknowledged");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop(token, tasks).await;
    setup::remove_stream(&client, &config).await;
}

/// With NATS out of reach, nobody can say whether a command is on the bus: the look-up is
/// UNKNOWN (503 over HTTP), never NONE.
#[tokio::test]
async fn without_nats_a_look_up_is_unknown_never_none() {
    let mut config = NatsConfig::new("nats://127.0.0.1:1");
    config.partitions = 2;
    let client = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect("nats://127.0.0.1:1")
        .await
        .unwrap();
    let bus = NatsCommandBus::new(client, Arc::new(config), "nowhere");
    let gateway =
        CommandGateway::builder(wow_example_bank::registry().unwrap(), Arc::new(bus)).build();
    let store = InMemoryEventStore::new();
    let outcome = look_up_request(&gateway, &store, &account("a-1"), "r-1").await;
    match outcome {
        RequestOutcome::Unknown(error) => {
            assert_eq!(error.error_code(), ErrorCode::ServiceUnavailable, "{error}")
        }
        other => panic!("{other:?}"),
    }
}

/// SPEC RQ-14: a command stream made by an older version (subjects `{prefix}.*`, commands on
/// `{prefix}.{partition}`) is updated in place, and what older gateways put there, before
/// and after the update, is still consumed.
#[tokio::test]
async fn an_older_command_stream_is_updated_in_place_and_its_commands_still_consumed() {
    let Some((client, config)) = setup::server().await else {
        return;
    };
    let jetstream = async_nats::jetstream::new(client.clone());
    jetstream
        .create_stream(async_nats::jetstream::stream::Config {
            name: config.stream.clone(),
            subjects: vec![format!("{}.*", config.subject_prefix)],
            retention: async_nats::jetstream::stream::RetentionPolicy::WorkQueue,
            storage: async_nats::jetstream::stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .unwrap();
    let publish_as_older = |command: JsonCommand| {
        let (jetstream, config) = (jetstream.clone(), config.clone());
        async move {
            let partition = wow_nats::command_partition(&command, config.partitions);
            jetstream
                .publish(
                    config.legacy_partition_subject(partition),
                    serde_json::to_vec(&command).unwrap().into(),
                )
                .await
                .unwrap()
                .await
                .unwrap();
        }
    };
    let before = account(&uuid::Uuid::now_v7().to_string());
    publish_as_older(open(&before, 1)).await;

    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let notifier = NatsWaitNotifier::new(client.clone(), WaitCoordinator::new());
    let (token, tasks) =
        consume_all(&client, &config, node(&store, notifier.clone()), notifier).await;
    let mut stream = jetstream.get_stream(&config.stream).await.unwrap();
    assert_eq!(
        stream.info().await.unwrap().config.subjects,
        vec![format!("{}.>", config.subject_prefix)]
    );
    let after = account(&uuid::Uuid::now_v7().to_string());
    publish_as_older(open(&after, 1)).await;
    // And a gateway of this version sends on the same stream.
    let gateway = gateway(&client, &config, "gateway-new").await;
    let current = account(&uuid::Uuid::now_v7().to_string());
    assert_eq!(
        processed(&gateway.gateway, open(&current, 1))
            .await
            .unwrap()
            .aggregate_version,
        Some(1)
    );
    for id in [&before, &after] {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while store.load(id, 1, u64::MAX).await.unwrap().is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{id} never appended"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    stop(token, tasks).await;
    setup::remove_stream(&client, &config).await;
}

/// Nodes of one deployment must agree on the partition count: the first records it, a node
/// configured otherwise refuses to start with an error naming both counts, and one that
/// agrees starts.
#[tokio::test]
async fn a_node_with_another_partition_count_than_the_deployment_refuses_to_start() {
    let Some((client, config)) = setup::server().await else {
        return;
    };
    let jetstream = async_nats::jetstream::new(client.clone());
    ensure_command_stream(&jetstream, &config).await.unwrap();
    let mut other = (*config).clone();
    other.partitions = config.partitions + 4;
    let refused = ensure_command_stream(&jetstream, &other).await.unwrap_err();
    assert!(
        matches!(
            &refused,
            wow_nats::NatsError::PartitionCount { configured, recorded }
                if *configured == other.partitions && *recorded == config.partitions.to_string()
        ),
        "{refused}"
    );
    let message = refused.to_string();
    assert!(
        message.contains(&format!("configured with {} partitions", other.partitions))
            && message.contains(&format!("records {}", config.partitions)),
        "{message}"
    );
    ensure_command_stream(&jetstream, &config).await.unwrap();
    setup::remove_stream(&client, &config).await;
}

/// A projection that does nothing.
#[derive(Debug)]
struct Noted;

#[async_trait]
impl wow_core::event::EventConsumer for Noted {
    fn name(&self) -> &str {
        "noted"
    }

    async fn handle(
        &self,
        _stream: &wow_core::event::DomainEventStream,
    ) -> Result<(), wow_core::event::ConsumerError> {
        Ok(())
    }
}

/// A downstream stage's signal reaches the waiting caller from a processor that never
/// received the command: the first processor appended and died before its consumers ran, and
/// the next owner of the partition runs them over the stream it reads from the store. Where
/// the caller listens travels in the stream's header.
#[tokio::test]
async fn a_downstream_signal_reaches_its_caller_from_a_processor_that_never_received_the_command() {
    let Some((client, config)) = setup::server().await else {
        return;
    };
    let jetstream = async_nats::jetstream::new(client.clone());
    ensure_command_stream(&jetstream, &config).await.unwrap();
    let gateway = gateway(&client, &config, "gateway-moved").await;
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    // The first processor: appends, and runs no consumer (it dies first).
    let first = NatsWaitNotifier::new(client.clone(), WaitCoordinator::new());
    let (token, tasks) = consume_all(&client, &config, node(&store, first.clone()), first).await;
    let id = account(&uuid::Uuid::now_v7().to_string());
    let (sender, command) = (gateway.gateway.clone(), open(&id, 5));
    let waiting = tokio::spawn(async move {
        sender
            .send_and_wait(
                command,
                WaitPlan::new(CommandStage::Projected).with_timeout(Duration::from_secs(5)),
            )
            .await
    });
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let streams = loop {
        let streams = store.load(&id, 1, u64::MAX).await.unwrap();
        if !streams.is_empty() {
            break streams;
        }
        assert!(tokio::time::Instant::now() < deadline, "never appended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    stop(token, tasks).await;

    // The next owner: its own notifier, which never saw the command.
    let next = NatsWaitNotifier::new(client.clone(), WaitCoordinator::new());
    let dispatcher = wow_runtime::event::EventDispatcher::builder(next)
        .projection(Arc::new(Noted))
        .build();
    for stream in &streams {
        dispatcher.dispatch(stream).await;
    }
    let answer = waiting.await.unwrap().unwrap();
    assert_eq!(answer.stage, CommandStage::Projected, "{answer:?}");
    assert!(answer.succeeded, "{answer:?}");
    setup::remove_stream(&client, &config).await;
}

/// SPEC OB-1: a command's W3C trace context rides in the NATS headers as well as in its
/// payload, and the processor continues from the NATS headers' (no OpenTelemetry layer here:
/// it passes through unchanged into the appended stream's header).
#[tokio::test]
async fn the_trace_context_rides_in_the_nats_headers_and_the_processor_continues_from_them() {
    use wow_core::command::{TRACEPARENT_HEADER, TRACESTATE_HEADER};
    let Some((client, config)) = setup::server().await else {
        return;
    };
    let jetstream = async_nats::jetstream::new(client.clone());
    ensure_command_stream(&jetstream, &config).await.unwrap();
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    // Sent by the bus: the NATS message carries the command's trace headers.
    let bus = NatsCommandBus::new(client.clone(), config.clone(), "nobody.listens");
    let id = account(&uuid::Uuid::now_v7().to_string());
    let command = open(&id, 1)
        .with_header(TRACEPARENT_HEADER, traceparent)
        .with_header(TRACESTATE_HEADER, "vendor=1");
    wow_core::command::CommandBus::send(&bus, command.clone())
        .await
        .unwrap();
    let partition = wow_nats::command_partition(&command, config.partitions);
    let subject = config.request_subject(
        partition,
        &wow_nats::request_token(&id, &command.request_id),
    );
    let stream = jetstream.get_stream(&config.stream).await.unwrap();
    let message = stream
        .get_last_raw_message_by_subject(&subject)
        .await
        .unwrap();
    let header = |name: &str| message.headers.get(name).map(|v| v.as_str().to_owned());
    assert_eq!(header(TRACEPARENT_HEADER).as_deref(), Some(traceparent));
    assert_eq!(header(TRACESTATE_HEADER).as_deref(), Some("vendor=1"));
    setup::remove_stream(&client, &config).await;

    // Received by a processor: the NATS headers' context wins over the payload's.
    ensure_command_stream(&jetstream, &config).await.unwrap();
    let waits = WaitCoordinator::new();
    let signals = WaitSignals::listen(&client, config.wait_subject("traced"), waits.clone())
        .await
        .unwrap();
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let notifier = NatsWaitNotifier::new(client.clone(), WaitCoordinator::new());
    let processor = node(&store, notifier.clone());
    let (token, tasks) = consume_all(&client, &config, processor, notifier).await;
    let from_nats = "00-11111111111111111111111111111111-2222222222222222-01";
    let traced = account(&uuid::Uuid::now_v7().to_string());
    let command = open(&traced, 1)
        .with_header(wow_nats::WAIT_REPLY_HEADER, signals.subject().to_owned())
        .with_header(TRACEPARENT_HEADER, traceparent)
        .with_header(TRACESTATE_HEADER, "vendor=1");
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(TRACEPARENT_HEADER, from_nats);
    let mut handle = waits.observe(&command.id, WaitPlan::processed().with_timeout(DEADLINE));
    let subject =
        config.legacy_partition_subject(wow_nats::command_partition(&command, config.partitions));
    jetstream
        .publish_with_headers(
            subject,
            headers,
            serde_json::to_vec(&command).unwrap().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    let answer = tokio::time::timeout(DEADLINE, handle.next())
        .await
        .unwrap()
        .unwrap();
    assert!(answer.succeeded, "{answer:?}");
    let history = store.load(&traced, 1, u64::MAX).await.unwrap();
    assert_eq!(
        history[0]
            .header
            .get(TRACEPARENT_HEADER)
            .map(String::as_str),
        Some(from_nats)
    );
    // The payload's tracestate belonged to the payload's context: not carried with another.
    assert_eq!(history[0].header.get(TRACESTATE_HEADER), None);
    stop(token, tasks).await;
    setup::remove_stream(&client, &config).await;
}
