//! What the bank's tests share: commands and their sending; a fresh SQLite file or
//! PostgreSQL schema to run on, and the store opened there.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use wow_core::command::JsonCommand;
use wow_core::eventsourcing::{EventStore, SnapshotStore};
use wow_core::{AggregateId, CommandMessage, CommandResult, Stores};
use wow_example_bank::account::{AccountCommand, Open};
pub mod bank;

use bank::Bank;
use wow_postgres::{PostgresOptions, PostgresStore};
use wow_runtime::command::WaitPlan;
use wow_sqlite::{SqliteOptions, SqliteStore};

/// `command` for the account `id`, as the gateway takes it.
pub fn cmd(id: &AggregateId, command: AccountCommand) -> JsonCommand {
    CommandMessage::of(id.clone(), command).into_json().unwrap()
}

/// Sends `command` and waits for PROCESSED; panics unless it succeeded.
pub async fn send_ok(bank: &Bank, command: JsonCommand) -> CommandResult {
    bank.pipeline()
        .gateway
        .send_and_wait(command, WaitPlan::processed())
        .await
        .unwrap()
}

/// Opens the account `id` (Ann's) with `balance`; panics unless it opened.
pub async fn open(bank: &Bank, id: &AggregateId, balance: i64) {
    let open = AccountCommand::Open(Open {
        name: "Ann".into(),
        balance,
    });
    send_ok(bank, cmd(id, open)).await;
}

/// The account `id` in the default tenant.
pub fn account(id: &str) -> AggregateId {
    AggregateId::new("bank", "account", id, "(0)")
}

/// Where a test runs: a fresh SQLite file, or a fresh PostgreSQL schema dropped afterwards.
pub enum Target {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl Target {
    pub fn sqlite() -> Self {
        Target::Sqlite(tempfile::tempdir().unwrap())
    }

    /// A fresh schema, or `None` with a visible SKIPPED line when there is no server and
    /// backends are not required.
    pub async fn postgres() -> Option<Self> {
        let schema = format!("wow_bank_{}", uuid::Uuid::now_v7().simple());
        let target = Target::Postgres(schema);
        match PostgresStore::open(target.url().parse::<PostgresOptions>().unwrap()).await {
            Ok(_) => Some(target),
            Err(error) => {
                wow_tck::skip::unavailable(
                    wow_tck::skip::Requirement::Backends,
                    &format!("no PostgreSQL at {} ({error})", postgres_url()),
                );
                None
            }
        }
    }

    /// The store URL, as `wow serve --store` takes it.
    pub fn url(&self) -> String {
        match self {
            Target::Sqlite(folder) => {
                format!("sqlite://{}", folder.path().join("bank.db").display())
            }
            Target::Postgres(schema) => format!("{}?schema={schema}", postgres_url()),
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let Target::Postgres(schema) = self else {
            return;
        };
        let (url, schema) = (postgres_url(), schema.clone());
        // From a thread of its own: the test's runtime may be shutting down.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .map_err(std::io::Error::other)?;
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await
                    .map_err(std::io::Error::other)
            })
        })
        .join();
    }
}

fn postgres_url() -> String {
    std::env::var("WOW_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A store opened on a target: history, snapshots and the read models in one database.
#[derive(Clone)]
pub enum Store {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl Store {
    /// Opens the store at `url` (a [`Target::url`]).
    pub async fn open(url: &str) -> Self {
        if url.starts_with("sqlite:") {
            return Store::Sqlite(
                SqliteStore::open(url.parse::<SqliteOptions>().unwrap())
                    .await
                    .unwrap(),
            );
        }
        Store::Postgres(
            PostgresStore::open(url.parse::<PostgresOptions>().unwrap())
                .await
                .unwrap(),
        )
    }

    pub fn events(&self) -> Arc<dyn EventStore> {
        match self {
            Store::Sqlite(store) => Arc::new(store.clone()),
            Store::Postgres(store) => Arc::new(store.clone()),
        }
    }

    pub fn snapshots(&self) -> Arc<dyn SnapshotStore> {
        match self {
            Store::Sqlite(store) => Arc::new(store.clone()),
            Store::Postgres(store) => Arc::new(store.clone()),
        }
    }

    /// Every store contract, in this one database.
    pub fn stores(&self) -> Stores {
        match self {
            Store::Sqlite(store) => Stores::of(store.clone()),
            Store::Postgres(store) => Stores::of(store.clone()),
        }
    }

    /// Runs `sql` on the database.
    pub async fn execute(&self, sql: &str) {
        match self {
            Store::Sqlite(store) => {
                let sql = sql.to_owned();
                store
                    .transact(move |connection| Ok(connection.execute_batch(&sql)?))
                    .await
                    .unwrap();
            }
            Store::Postgres(store) => {
                let client = store.pool().get().await.unwrap();
                client.batch_execute(sql).await.unwrap();
            }
        }
    }
}
