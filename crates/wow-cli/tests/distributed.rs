//! The distributed mode with real processes: `wow serve --role gateway` and `--role
//! processor` on one PostgreSQL schema and one NATS namespace of their own.
//!
//! Needs PostgreSQL (`WOW_TEST_POSTGRES_URL`) and NATS with JetStream (`WOW_TEST_NATS_URL`);
//! skipped with a notice when either is down, failed under `WOW_REQUIRE_BACKENDS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use support::Served;
use wow_core::eventsourcing::EventStore;
use wow_core::AggregateId;
use wow_postgres::{PostgresOptions, PostgresStore};

const PATIENCE: Duration = Duration::from_secs(60);

/// One deployment's names: a PostgreSQL schema and a NATS namespace no other test uses.
struct Deployment {
    store: String,
    env: Vec<(String, String)>,
}

/// A NATS server of the test's own (the system's `nats-server`, JetStream on, its data in
/// a temporary folder), to be killed and started again without disturbing other tests.
struct OwnNats {
    port: u16,
    folder: tempfile::TempDir,
    child: Option<std::process::Child>,
}

impl OwnNats {
    fn start() -> Option<Self> {
        let required = std::env::var("WOW_REQUIRE_BACKENDS").is_ok_and(|v| v == "1");
        if !std::path::Path::new(NATS_SERVER).exists() {
            assert!(!required, "{NATS_SERVER} is required and missing");
            eprintln!("skipped: no {NATS_SERVER}");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut nats = Self {
            port,
            folder: tempfile::tempdir().unwrap(),
            child: None,
        };
        nats.restart();
        Some(nats)
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on the same port and folder, and waits until it listens.
    fn restart(&mut self) {
        let child = std::process::Command::new(NATS_SERVER)
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.folder.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(started.elapsed() < PATIENCE, "nats-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server at once (SIGKILL).
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

impl Drop for OwnNats {
    fn drop(&mut self) {
        self.kill();
    }
}

const NATS_SERVER: &str = "/usr/sbin/nats-server";

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
        let required = std::env::var("WOW_REQUIRE_BACKENDS").is_ok_and(|v| v == "1");
        let postgres = std::env::var("WOW_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let nats =
            std::env::var("WOW_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
        let reachable = |address: &str| {
            std::net::TcpStream::connect_timeout(&address.parse().unwrap(), Duration::from_secs(2))
                .is_ok()
        };
        if !reachable("127.0.0.1:5432") || !reachable("127.0.0.1:4222") {
            assert!(
                !required,
                "PostgreSQL and NATS are required and one is down"
            );
            eprintln!("skipped: PostgreSQL or NATS is down (set WOW_REQUIRE_BACKENDS=1 to fail)");
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
        }
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
    // A gateway started before any processor takes commands at SENT: they wait in the
    // stream, and the first processor handles them.
    let gateway = deployment.start("gateway");
    let api = Api::new(&gateway);
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
    let started = Instant::now();
    loop {
        let (_, outcome) = api.get("account/early/requests/open-early").await;
        if outcome["status"] == "APPENDED" {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the early command was not processed: {outcome}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (status, _) = api
        .command(
            "account/acc-1/open",
            "open-1",
            json!({"name": "Ann", "balance": 10}),
            "PROCESSED",
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // SPEC RQ-3: the gateway has no store; its filter may or may not know the id, but a
    // resend awaited at SENT is sent (the processor decides).
    let (status, sent) = api
        .command(
            "account/acc-1/open",
            "open-1",
            json!({"name": "Ann", "balance": 10}),
            "SENT",
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{sent}");
    // SPEC RQ-7: awaited at PROCESSED, the resend is a duplicate with the original version.
    let (status, duplicate) = api
        .command(
            "account/acc-1/open",
            "open-1",
            json!({"name": "Ann", "balance": 10}),
            "PROCESSED",
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{duplicate}");
    assert_eq!(duplicate["errorCode"], "DuplicateRequestId");
    assert_eq!(duplicate["aggregateVersion"], 1);
    let (_, health) = api.get("health").await;
    assert_eq!(health["details"]["node"]["role"], "gateway");
    assert_eq!(health["details"]["node"]["nats"], "CONNECTED");
    let store = deployment.events().await;
    let id = AggregateId::new("bank", "account", "acc-1", wow_core::DEFAULT_TENANT_ID);
    assert_eq!(store.load(&id, 1, u64::MAX).await.unwrap().len(), 1);
    gateway.stop();
    processor.stop();
    other.stop();
    deployment.clean().await;
}

/// What one caller learned of one deposit.
#[derive(Debug)]
enum Answer {
    Processed(u64),
    Failed(String),
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
    let both = apis(&processors);
    until_partitions_owned(&both.iter().collect::<Vec<_>>(), 8).await;
    let accounts: Vec<String> = (0..16).map(|n| format!("load-{n}")).collect();
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

    // Callers deposit 1 into the accounts, each with its own request id, while a processor
    // is killed (SIGKILL) and replaced, three rounds over.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let callers: Vec<_> = (0..8)
        .map(|caller| {
            let api = api.clone();
            let accounts = accounts.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut answers = Vec::new();
                let mut n = 0;
                let mut overdrafts = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let account = &accounts[(caller * 7 + n) % accounts.len()];
                    if n % 5 == 4 {
                        // An overdraft: rejected for good, and recorded as such (SPEC ID-6).
                        let request_id = format!("over-{caller}-{n}");
                        let (status, body) = api
                            .command(
                                &format!("account/{account}/withdraw"),
                                &request_id,
                                json!({"amount": 1_000_000_000}),
                                "PROCESSED",
                            )
                            .await;
                        overdrafts.push((account.clone(), request_id, status, body));
                        n += 1;
                        continue;
                    }
                    let request_id = format!("dep-{caller}-{n}");
                    let (status, body) = api
                        .command(
                            &format!("account/{account}/deposit"),
                            &request_id,
                            json!({"amount": 1}),
                            "PROCESSED",
                        )
                        .await;
                    let answer = if status == StatusCode::OK {
                        Answer::Processed(body["aggregateVersion"].as_u64().unwrap())
                    } else {
                        Answer::Failed(format!("{status} {}", body["errorCode"]))
                    };
                    answers.push((account.clone(), request_id, answer));
                    n += 1;
                }
                (answers, overdrafts)
            })
        })
        .collect();
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
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut answers = Vec::new();
    let mut overdrafts = Vec::new();
    for caller in callers {
        let (answered, overdrawn) = caller.await.unwrap();
        answers.extend(answered);
        overdrafts.extend(overdrawn);
    }

    // No intent ends both rejected and appended: every overdraft is rejected (answered so,
    // or looked up after its processor died, or resent), recorded, and never in history.
    let store = deployment.events().await;
    for (account, request_id, status, body) in &overdrafts {
        if *status != StatusCode::UNPROCESSABLE_ENTITY {
            let (_, outcome) = api
                .get(&format!("account/{account}/requests/{request_id}"))
                .await;
            if outcome["status"] != "REJECTED" {
                let (status, body) = api
                    .command(
                        &format!("account/{account}/withdraw"),
                        request_id,
                        json!({"amount": 1_000_000_000}),
                        "PROCESSED",
                    )
                    .await;
                assert_eq!(
                    status,
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "{request_id}: {body}"
                );
            }
        } else {
            assert_eq!(body["errorCode"], "InsufficientBalance", "{body}");
        }
        let id = AggregateId::new("bank", "account", account, wow_core::DEFAULT_TENANT_ID);
        let decision = store.find_decision(&id, request_id).await.unwrap();
        assert!(
            matches!(
                decision,
                Some(wow_core::eventsourcing::RequestDecision::Rejected(_))
            ),
            "{request_id}: {decision:?}"
        );
    }

    // A caller whose processor died learns what happened from the look-up, and resends
    // the same request id when it says NONE (SPEC TO-1, TO-2): safe, never twice.
    let mut resolved = 0;
    for (account, request_id, answer) in &answers {
        if let Answer::Failed(why) = answer {
            let (_, outcome) = api
                .get(&format!("account/{account}/requests/{request_id}"))
                .await;
            match outcome["status"].as_str() {
                Some("APPENDED") => {}
                Some("NONE") | Some("IN_FLIGHT") => {
                    let (status, body) = api
                        .command(
                            &format!("account/{account}/deposit"),
                            request_id,
                            json!({"amount": 1}),
                            "PROCESSED",
                        )
                        .await;
                    assert!(
                        status == StatusCode::OK || body["errorCode"] == "DuplicateRequestId",
                        "{request_id} failed with {why}; the resend answered {status} {body}"
                    );
                }
                _ => panic!("{request_id} failed with {why}; the look-up says {outcome}"),
            }
            resolved += 1;
        }
    }

    let mut appended: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for account in &accounts {
        let id = AggregateId::new("bank", "account", account, wow_core::DEFAULT_TENANT_ID);
        let streams = store.load(&id, 1, u64::MAX).await.unwrap();
        let mut seen = BTreeSet::new();
        for stream in &streams {
            assert!(
                seen.insert(stream.request_id.clone()),
                "{} appended twice in {account}",
                stream.request_id
            );
        }
        let (_, state) = api.get(&format!("account/{account}/state")).await;
        assert_eq!(
            state["state"]["balance"].as_u64().unwrap() as usize,
            streams.len() - 1,
            "{account}: one deposit per stream"
        );
        appended.insert(account.clone(), seen);
    }
    // The projection on the surviving side reaches what a single node would have: each
    // account's view holds the balance its history gives, at the last version, although
    // processors died between appending streams and projecting them (the new owners read
    // them from the feed).
    for account in &accounts {
        let id = AggregateId::new("bank", "account", account, wow_core::DEFAULT_TENANT_ID);
        let version = store.last(&id).await.unwrap().unwrap().version;
        let expected = appended[account].len() - 1;
        let started = Instant::now();
        loop {
            let (_, view) = api
                .get(&format!("account/{account}/view/account_balance"))
                .await;
            if view["version"] == version && view["state"]["balance"] == expected {
                break;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{account}: the view is {view}, history says {expected} at {version}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Every deposit is in history exactly once: acknowledged, resolved by look-up, or resent.
    let mut processed = 0;
    for (account, request_id, answer) in &answers {
        assert!(
            appended[account].contains(request_id),
            "{request_id} ({answer:?}) is not in history"
        );
        if let Answer::Processed(version) = answer {
            assert!(*version > 1, "a deposit comes after the open");
            processed += 1;
        }
    }
    eprintln!(
        "{processed} acknowledged at PROCESSED, {resolved} resolved after the kills, {} overdrafts rejected once each",
        overdrafts.len()
    );
    assert!(processed > 0);
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
    let accounts: Vec<String> = (0..8).map(|n| format!("nats-{n}")).collect();
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
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let callers: Vec<_> = (0..4)
        .map(|caller| {
            let api = api.clone();
            let accounts = accounts.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut answers = Vec::new();
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let account = &accounts[(caller + n) % accounts.len()];
                    let request_id = format!("nd-{caller}-{n}");
                    let (status, body) = api
                        .command(
                            &format!("account/{account}/deposit"),
                            &request_id,
                            json!({"amount": 1}),
                            "PROCESSED",
                        )
                        .await;
                    answers.push((account.clone(), request_id, status, body));
                    n += 1;
                }
                answers
            })
        })
        .collect();
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
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut answers = Vec::new();
    for caller in callers {
        answers.extend(caller.await.unwrap());
    }
    // Resolve every unanswered deposit as a client would: look up, resend when NONE.
    for (account, request_id, status, _) in &answers {
        if *status == StatusCode::OK {
            continue;
        }
        let (_, outcome) = api
            .get(&format!("account/{account}/requests/{request_id}"))
            .await;
        if outcome["status"] != "APPENDED" {
            let (status, body) = api
                .command(
                    &format!("account/{account}/deposit"),
                    request_id,
                    json!({"amount": 1}),
                    "PROCESSED",
                )
                .await;
            assert!(
                status == StatusCode::OK || body["errorCode"] == "DuplicateRequestId",
                "{status} {body}"
            );
        }
    }
    let store = deployment.events().await;
    let mut acknowledged = 0;
    for account in &accounts {
        let id = AggregateId::new("bank", "account", account, wow_core::DEFAULT_TENANT_ID);
        let streams = store.load(&id, 1, u64::MAX).await.unwrap();
        let ids: BTreeSet<&str> = streams.iter().map(|s| s.request_id.as_str()).collect();
        assert_eq!(
            ids.len(),
            streams.len(),
            "{account}: a request appended twice"
        );
        for (_, request_id, status, _) in answers.iter().filter(|a| &a.0 == account) {
            assert!(
                ids.contains(request_id.as_str()),
                "{request_id} ({status}) is not in history"
            );
            acknowledged += usize::from(*status == StatusCode::OK);
        }
    }
    eprintln!(
        "{acknowledged} of {} deposits acknowledged around the restart",
        answers.len()
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
