//! A store written by an earlier build of the bank, opened by `wow catch-up`: the old
//! `account_balance` table is dropped and the view rebuilt from history under each account's
//! tenant; the old `notification_outbox` (with or without its tenant column) loses no row,
//! its rows keep their event ids, so those sent before are not sent again (SPEC DS-2, TN-1).
//! And `wow catch-up --rebuild NAME` works for any view (rebuilt beside itself) or outbox
//! (emptied and refilled) of the bank.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use wow_core::eventsourcing::BoxError;
use wow_core::{id, AggregateId, CommandMessage, CommandStage, Stores};
use wow_example_bank::account::{AccountCommand, Amount, Open};
use wow_example_bank::notifications::OutboxRow;
use wow_runtime::outbox::Delivery;
#[path = "../../wow-example-bank/tests/support/bank.rs"]
mod bank;
use bank::Bank;
use wow_core::outbox::OutboxSender;
use wow_postgres::{PostgresOptions, PostgresStore};
use wow_runtime::command::WaitPlan;
use wow_sqlite::{SqliteOptions, SqliteStore};

mod support;

use support::wow_stderr;

/// A mailer that deduplicates by key and counts its sends.
#[derive(Debug, Default)]
struct TestMailer {
    sent: Mutex<HashMap<String, u32>>,
}

#[async_trait]
impl OutboxSender<OutboxRow> for TestMailer {
    async fn send(&self, key: &str, _row: &OutboxRow) -> Result<(), BoxError> {
        *self.sent.lock().unwrap().entry(key.to_owned()).or_default() += 1;
        Ok(())
    }

    async fn sent(&self, key: &str) -> Result<bool, BoxError> {
        Ok(self.sent.lock().unwrap().contains_key(key))
    }
}

/// The database under test.
#[derive(Clone)]
enum Db {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl Db {
    async fn open(url: &str) -> Self {
        if url.starts_with("sqlite:") {
            Db::Sqlite(
                SqliteStore::open(url.parse::<SqliteOptions>().unwrap())
                    .await
                    .unwrap(),
            )
        } else {
            Db::Postgres(
                PostgresStore::open(url.parse::<PostgresOptions>().unwrap())
                    .await
                    .unwrap(),
            )
        }
    }

    fn stores(&self) -> Stores {
        match self {
            Db::Sqlite(store) => Stores::of(store.clone()),
            Db::Postgres(store) => Stores::of(store.clone()),
        }
    }

    async fn execute(&self, sql: String) {
        match self {
            Db::Sqlite(store) => store
                .transact(move |connection| Ok(connection.execute_batch(&sql)?))
                .await
                .unwrap(),
            Db::Postgres(store) => {
                let client = store.pool().get().await.unwrap();
                client.batch_execute(&sql).await.unwrap();
            }
        }
    }

    async fn has_table(&self, table: &'static str) -> bool {
        match self {
            Db::Sqlite(store) => store
                .read(move |connection| {
                    connection.query_row(
                        "SELECT COUNT(*) > 0 FROM pragma_table_info(?1)",
                        [table],
                        |row| row.get(0),
                    )
                })
                .await
                .unwrap(),
            Db::Postgres(store) => {
                let client = store.pool().get().await.unwrap();
                client
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM information_schema.tables
                           WHERE table_schema = current_schema() AND table_name = $1)",
                        &[&table],
                    )
                    .await
                    .unwrap()
                    .get(0)
            }
        }
    }
}

async fn send(bank: &Bank, id: &AggregateId, command: AccountCommand) {
    bank.pipeline()
        .gateway
        .send_and_wait(
            CommandMessage::of(id.clone(), command).into_json().unwrap(),
            WaitPlan::new(CommandStage::EventHandled),
        )
        .await
        .unwrap();
}

/// Turns today's outbox and balance view into the tables an earlier build kept.
async fn downgrade(db: &Db, rows: &[OutboxRow], with_tenant: bool) {
    let tenant_column = if with_tenant {
        "tenant_id TEXT NOT NULL,"
    } else {
        ""
    };
    let mut sql = format!(
        "CREATE TABLE account_balance (id TEXT PRIMARY KEY, name TEXT NOT NULL,
            balance BIGINT NOT NULL, held BIGINT NOT NULL, frozen BOOLEAN NOT NULL,
            version BIGINT NOT NULL);
         DELETE FROM view_row WHERE view = 'account_balance';
         CREATE TABLE notification_outbox (event_id TEXT PRIMARY KEY, {tenant_column}
            account_id TEXT NOT NULL, amount BIGINT NOT NULL);
         DELETE FROM view_row WHERE view = 'notifications';
         DELETE FROM processed_message WHERE consumer = 'notifications';"
    );
    for row in rows {
        let tenant = if with_tenant {
            format!("'{}', ", row.tenant_id)
        } else {
            String::new()
        };
        sql.push_str(&format!(
            "INSERT INTO notification_outbox VALUES ('{}', {tenant}'{}', {});",
            row.event_id, row.account_id, row.amount
        ));
    }
    db.execute(sql).await;
}

async fn an_earlier_builds_tables_are_upgraded_without_loss(url: &str, with_tenant: bool) {
    let a = AggregateId::new("bank", "account", id::new_id(), "tenant-a");
    let mailer = TestMailer::default();
    let db = Db::open(url).await;
    let before = {
        let bank = Bank::start(db.stores()).await.unwrap();
        let open = AccountCommand::Open(Open {
            name: "Ann".into(),
            balance: 50,
        });
        send(&bank, &a, open).await;
        for amount in [5, 7] {
            send(&bank, &a, AccountCommand::Withdraw(Amount { amount })).await;
        }
        let first = bank.deliver(&mailer, 1).await.unwrap();
        assert_eq!(first.sent, 2);
        send(&bank, &a, AccountCommand::Withdraw(Amount { amount: 4 })).await;
        bank.flush().await;
        bank.notifications().await
    };
    assert_eq!(before.len(), 3);
    downgrade(&db, &before, with_tenant).await;

    let (code, stderr) = wow_stderr(&["catch-up", "--store", url]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!db.has_table("account_balance").await);
    assert!(!db.has_table("notification_outbox").await);

    let bank = Bank::start(db.stores()).await.unwrap();
    let view = bank.account_view(&a).await.unwrap().expect("rebuilt");
    assert_eq!((view.balance, view.version), (34, 4));
    let mut twin = a.clone();
    twin.tenant_id = "tenant-b".to_owned();
    assert!(bank.account_view(&twin).await.unwrap().is_none());
    let mut after = bank.notifications().await;
    let mut expected = before.clone();
    after.sort_by(|x, y| x.event_id.cmp(&y.event_id));
    expected.sort_by(|x, y| x.event_id.cmp(&y.event_id));
    assert_eq!(
        after, expected,
        "every row kept, with its tenant and event id"
    );
    let second = bank.deliver(&mailer, 2).await.unwrap();
    assert_eq!(
        second,
        Delivery {
            sent: 1,
            already_done: 2,
            ..Delivery::default()
        },
        "only the row never sent is sent"
    );
    drop(bank);

    // A rebuild of the outbox refills it from history under the same ids: nothing is resent.
    let (code, stderr) = wow_stderr(&["catch-up", "--store", url, "--rebuild", "notifications"]);
    assert_eq!(code, 0, "{stderr}");
    let bank = Bank::start(db.stores()).await.unwrap();
    assert_eq!(bank.notifications().await.len(), 3);
    let third = bank.deliver(&mailer, 3).await.unwrap();
    assert_eq!(third.already_done, 3);
    assert!(mailer.sent.lock().unwrap().values().all(|n| *n == 1));
    drop(bank);

    // A view is rebuilt beside the one readers read: a new generation, read once whole.
    let (code, stderr) = wow_stderr(&["catch-up", "--store", url, "--rebuild", "account_balance"]);
    assert_eq!(code, 0, "{stderr}");
    let bank = Bank::start(db.stores()).await.unwrap();
    let view = bank.account_view(&a).await.unwrap().expect("rebuilt");
    assert_eq!((view.balance, view.version), (34, 4));
    let (generations, stores) = (wow_runtime::view::ViewGenerations::new(), db.stores());
    let read = generations.load(stores.views.as_ref(), "account_balance");
    assert_eq!(read.await.unwrap().active, 1, "readers read generation 1");
    let (code, stderr) = wow_stderr(&["catch-up", "--store", url, "--rebuild", "no_such_model"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("no_such_model") && stderr.contains("account_balance, notifications"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_tables_made_before_tenants_are_upgraded_without_loss() {
    let folder = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", folder.path().join("bank.db").display());
    an_earlier_builds_tables_are_upgraded_without_loss(&url, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_tables_made_with_tenants_are_upgraded_without_loss() {
    let folder = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", folder.path().join("bank.db").display());
    an_earlier_builds_tables_are_upgraded_without_loss(&url, true).await;
}

/// A fresh PostgreSQL schema, or `None` (with a visible SKIPPED line) when there is no
/// server and backends are not required.
async fn postgres() -> Option<String> {
    let base = std::env::var("WOW_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let url = format!("{base}?schema=wow_legacy_{}", id::new_id().replace('-', ""));
    match PostgresStore::open(url.parse::<PostgresOptions>().unwrap()).await {
        Ok(_) => Some(url),
        Err(error) => {
            wow_tck::skip::unavailable(
                wow_tck::skip::Requirement::Backends,
                &format!("no PostgreSQL at {base} ({error})"),
            );
            None
        }
    }
}

async fn drop_schema(url: &str) {
    let Db::Postgres(store) = Db::open(url).await else {
        return;
    };
    let client = store.pool().get().await.unwrap();
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", store.schema()))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tables_made_before_tenants_are_upgraded_without_loss() {
    let Some(url) = postgres().await else { return };
    an_earlier_builds_tables_are_upgraded_without_loss(&url, false).await;
    drop_schema(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tables_made_with_tenants_are_upgraded_without_loss() {
    let Some(url) = postgres().await else { return };
    an_earlier_builds_tables_are_upgraded_without_loss(&url, true).await;
    drop_schema(&url).await;
}
