//! What the deployment holds after the run: each account's history, state and view over HTTP,
//! and each consumer's position from the store (`consumer_position`, wow-postgres
//! `downstream.rs`); read again until quiet or a deadline.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::client::Api;

/// One event of a stream.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) body: Value,
}

/// One appended stream.
#[derive(Debug, Clone)]
pub(crate) struct Stream {
    pub(crate) version: u64,
    pub(crate) request_id: String,
    pub(crate) command_id: String,
    pub(crate) create_time: u64,
    pub(crate) events: Vec<Event>,
}

/// Balance, held and version, as the state or the view shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Money {
    pub(crate) balance: i64,
    pub(crate) held: i64,
    pub(crate) version: u64,
}

/// One account as the deployment shows it.
#[derive(Debug, Clone)]
pub(crate) struct Account {
    pub(crate) streams: Vec<Stream>,
    pub(crate) state: Money,
    pub(crate) view: Money,
}

impl Account {
    /// The last version in history.
    pub(crate) fn head(&self) -> u64 {
        self.streams.last().map_or(0, |s| s.version)
    }

    /// The stream that holds `request_id`, if any.
    pub(crate) fn stream(&self, request_id: &str) -> Option<&Stream> {
        self.streams.iter().find(|s| s.request_id == request_id)
    }
}

/// Everything read after the run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    pub(crate) accounts: BTreeMap<String, Account>,
    /// (consumer, account) → the last version the consumer handled.
    pub(crate) positions: BTreeMap<(String, String), u64>,
    /// (consumer, status) → how many compensation records (`execution_failed`) it has.
    pub(crate) failures: BTreeMap<(String, String), u64>,
    /// Whether it was quiet when read (else the deadline came first).
    pub(crate) quiet: bool,
}

impl Snapshot {
    /// The consumers that recorded any position.
    pub(crate) fn consumers(&self) -> Vec<String> {
        let mut names: Vec<String> = self.positions.keys().map(|(c, _)| c.clone()).collect();
        names.dedup();
        names
    }

    fn is_quiet(&self) -> bool {
        let consumers = self.consumers();
        self.accounts.iter().all(|(id, account)| {
            let head = account.head();
            account.state.version == head
                && account.view.version == head
                && account.state.held == 0
                && consumers
                    .iter()
                    .all(|c| self.positions.get(&(c.clone(), id.clone())).copied() == Some(head))
        })
    }
}

/// Reads everything again every half second until it is quiet (each view and each consumer
/// at its account's head, nothing held) or `deadline`; returns the last reading.
pub(crate) async fn until_quiet(
    api: &Api,
    store: &str,
    accounts: &[String],
    deadline: Instant,
) -> Snapshot {
    let mut last = Snapshot::default();
    loop {
        match read(api, store, accounts).await {
            Ok(mut snapshot) => {
                snapshot.quiet = snapshot.is_quiet();
                if snapshot.quiet {
                    return snapshot;
                }
                last = snapshot;
            }
            Err(error) => eprintln!("chaos: reading history: {error}"),
        }
        if Instant::now() >= deadline {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn read(api: &Api, store: &str, accounts: &[String]) -> Result<Snapshot, String> {
    let mut snapshot = Snapshot::default();
    for id in accounts {
        snapshot
            .accounts
            .insert(id.clone(), account(api, id).await?);
    }
    (snapshot.positions, snapshot.failures) = positions(store).await?;
    Ok(snapshot)
}

async fn account(api: &Api, id: &str) -> Result<Account, String> {
    let (status, events) = api.get(&format!("account/{id}/event/1/100000")).await?;
    if !status.is_success() {
        return Err(format!("{id}'s events: {status} {events}"));
    }
    let streams = events
        .as_array()
        .ok_or_else(|| format!("{id}'s events are not a list"))?
        .iter()
        .map(stream)
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| format!("{id}: a stream without its fields"))?;
    let (_, state, version) = api.get_state(&format!("account/{id}/state")).await?;
    let (_, view) = api.get(&format!("account/{id}/view")).await?;
    let money = |value: &Value, version: &Value| Money {
        balance: value["balance"].as_i64().unwrap_or(i64::MIN),
        held: value["held"].as_i64().unwrap_or(i64::MIN),
        version: version.as_u64().unwrap_or(0),
    };
    Ok(Account {
        streams,
        state: money(&state, &Value::from(version)),
        view: money(&view, &view["version"]),
    })
}

fn stream(value: &Value) -> Option<Stream> {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    Some(Stream {
        version: value["version"].as_u64()?,
        request_id: text(&value["requestId"])?,
        command_id: text(&value["commandId"])?,
        create_time: value["createTime"].as_u64()?,
        events: value["body"]
            .as_array()?
            .iter()
            .map(|event| {
                Some(Event {
                    id: text(&event["id"])?,
                    name: text(&event["name"])?,
                    body: event["body"].clone(),
                })
            })
            .collect::<Option<_>>()?,
    })
}

/// (consumer, account) → position, and (consumer, status) → compensation records.
type Positions = (
    BTreeMap<(String, String), u64>,
    BTreeMap<(String, String), u64>,
);

/// Every account consumer's position, and its compensation records by status, from the store.
async fn positions(store: &str) -> Result<Positions, String> {
    let (client, connection) = tokio_postgres::connect(store, tokio_postgres::NoTls)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let positions = pairs(
        &client,
        "SELECT consumer, aggregate_id, version FROM consumer_position WHERE aggregate_name = 'account'",
    )
    .await?;
    let failures = pairs(
        &client,
        "SELECT consumer, status, COUNT(*) FROM execution_failed GROUP BY consumer, status",
    )
    .await?;
    Ok((positions, failures))
}

/// The rows of `query` (two texts and a number each) as a map from the texts to the number.
async fn pairs(
    client: &tokio_postgres::Client,
    query: &str,
) -> Result<BTreeMap<(String, String), u64>, String> {
    let rows = client.query(query, &[]).await.map_err(|e| e.to_string())?;
    Ok(rows
        .iter()
        .map(|row| {
            let n: i64 = row.get(2);
            ((row.get(0), row.get(1)), n.max(0) as u64)
        })
        .collect())
}
