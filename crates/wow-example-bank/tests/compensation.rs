//! Event compensation end to end on the durable stores (SPEC DS-4): the `account_balance`
//! projection fails while its table is broken, the failures are recorded in the store's
//! database, and retries in version order repair the view without touching history. A
//! restart resumes every consumer from its position.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use wow_core::command::{CommandResultError, JsonCommand, WaitPlan};
use wow_core::compensation::{ExecutionFailedStatus, FailureQuery, RetrySpec};
use wow_core::eventsourcing::{EventStore, SnapshotStore};
use wow_core::{id, AggregateId, CommandMessage, CommandResult, CommandStage, ErrorCode};
use wow_example_bank::account::*;
use wow_example_bank::{Bank, BankOptions, ReadModels};
use wow_postgres::{PostgresOptions, PostgresStore};
use wow_sqlite::{SqliteOptions, SqliteStore};

fn cmd(id: &AggregateId, command: AccountCommand) -> JsonCommand {
    CommandMessage::of(id.clone(), command).into_json().unwrap()
}

async fn projected(bank: &Bank, command: JsonCommand) -> CommandResult {
    match bank
        .pipeline
        .gateway
        .send_and_wait(command, WaitPlan::new(CommandStage::Projected))
        .await
    {
        Ok(result) => result,
        Err(CommandResultError::Failed(result)) => *result,
        Err(other) => panic!("no result: {other}"),
    }
}

/// Retries by hand only, due at once.
fn options() -> BankOptions {
    BankOptions {
        retry: RetrySpec {
            initial_backoff_ms: 0,
            ..RetrySpec::default()
        },
        retry_every: None,
        ..BankOptions::default()
    }
}

/// One durable database under test.
#[async_trait::async_trait]
trait Database: Send + Sync {
    fn models(&self) -> ReadModels;
    fn events(&self) -> Arc<dyn EventStore>;
    fn snapshots(&self) -> Arc<dyn SnapshotStore>;
    /// Runs `sql` on the read models' database.
    async fn execute(&self, sql: &str);
}

/// The store, and the folder its file lives in (removed on drop).
struct Sqlite(SqliteStore, #[allow(dead_code)] tempfile::TempDir);

#[async_trait::async_trait]
impl Database for Sqlite {
    fn models(&self) -> ReadModels {
        ReadModels::Sqlite(self.0.clone())
    }
    fn events(&self) -> Arc<dyn EventStore> {
        Arc::new(self.0.clone())
    }
    fn snapshots(&self) -> Arc<dyn SnapshotStore> {
        Arc::new(self.0.clone())
    }
    async fn execute(&self, sql: &str) {
        let sql = sql.to_owned();
        self.0
            .transact(move |connection| Ok(connection.execute_batch(&sql)?))
            .await
            .unwrap();
    }
}

struct Postgres(PostgresStore, String);

#[async_trait::async_trait]
impl Database for Postgres {
    fn models(&self) -> ReadModels {
        ReadModels::Postgres(self.0.clone())
    }
    fn events(&self) -> Arc<dyn EventStore> {
        Arc::new(self.0.clone())
    }
    fn snapshots(&self) -> Arc<dyn SnapshotStore> {
        Arc::new(self.0.clone())
    }
    async fn execute(&self, sql: &str) {
        let client = self.0.pool().get().await.unwrap();
        client.batch_execute(sql).await.unwrap();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let (url, schema) = (postgres_url(), self.1.clone());
        // The pool's connections close with the store; drop the schema from a thread of its
        // own, as the test's runtime is shutting down.
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

async fn sqlite() -> Sqlite {
    let folder = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(SqliteOptions::new(folder.path().join("bank.db")))
        .await
        .unwrap();
    Sqlite(store, folder)
}

/// A fresh schema on the test server, or `None` (with a visible SKIPPED line) when there is
/// none and backends are not required.
async fn postgres() -> Option<Postgres> {
    let schema = format!("wow_bank_{}", uuid::Uuid::now_v7().simple());
    let options = postgres_url()
        .parse::<PostgresOptions>()
        .unwrap()
        .schema(schema.clone());
    match PostgresStore::open(options).await {
        Ok(store) => Some(Postgres(store, schema)),
        Err(error) if std::env::var("WOW_REQUIRE_BACKENDS").is_ok_and(|v| v == "1") => {
            panic!("PostgreSQL is required but unreachable: {error}")
        }
        Err(error) => {
            eprintln!("SKIPPED: PostgreSQL bank compensation test ({error})");
            None
        }
    }
}

async fn start(db: &dyn Database) -> Bank {
    Bank::start_with(db.events(), Some(db.snapshots()), options(), db.models())
        .await
        .unwrap()
}

async fn a_broken_projection_is_recorded_and_repaired_in_order(db: &dyn Database) {
    let a = AggregateId::new("bank", "account", id::new_id(), "(0)");
    {
        let bank = start(db).await;
        let opened = projected(
            &bank,
            cmd(
                &a,
                AccountCommand::Open(Open {
                    name: "Ann".into(),
                    balance: 100,
                }),
            ),
        )
        .await;
        assert!(opened.succeeded, "{opened:?}");

        db.execute("ALTER TABLE account_balance RENAME TO account_balance_off")
            .await;
        let broken = projected(
            &bank,
            cmd(&a, AccountCommand::Deposit(Amount { amount: 10 })),
        )
        .await;
        assert!(!broken.succeeded);
        assert_eq!(broken.error_code, ErrorCode::IllegalState);
        db.execute("ALTER TABLE account_balance_off RENAME TO account_balance")
            .await;

        // The table is back, but version 3 must not skip version 2.
        let skipped = projected(
            &bank,
            cmd(&a, AccountCommand::Deposit(Amount { amount: 5 })),
        )
        .await;
        assert!(!skipped.succeeded, "an out-of-order stream fails too");
        assert!(
            skipped.error_msg.contains("must wait"),
            "{}",
            skipped.error_msg
        );
        let view = bank.balances.view(&a.id).await.unwrap().unwrap();
        assert_eq!((view.balance, view.version), (100, 1));

        let failed = bank
            .compensation
            .failures()
            .list(&FailureQuery {
                status: Some(ExecutionFailedStatus::Failed),
                ..FailureQuery::default()
            })
            .await
            .unwrap();
        let versions: Vec<_> = failed
            .iter()
            .map(|r| (r.consumer.as_str(), r.version))
            .collect();
        assert_eq!(
            versions,
            vec![("account_balance", 2), ("account_balance", 3)]
        );

        let history = bank.pipeline.store().load(&a, 1, u64::MAX).await.unwrap();
        let pass = bank.compensation.run_due(100).await.unwrap();
        assert_eq!(
            (pass.retried, pass.succeeded),
            (2, 2),
            "retried in version order"
        );
        let view = bank.balances.view(&a.id).await.unwrap().unwrap();
        assert_eq!((view.balance, view.version), (115, 3));
        assert_eq!(
            bank.pipeline.store().load(&a, 1, u64::MAX).await.unwrap(),
            history
        );
        assert_eq!(bank.compensation.run_due(100).await.unwrap().retried, 0);
        bank.flush().await;
    }

    // A restart resumes from the positions: nothing is handled twice, nothing is left.
    let bank = start(db).await;
    for (consumer, done) in &bank.caught_up {
        assert_eq!(
            done.streams_handled, 0,
            "{consumer} resumed from its position"
        );
    }
    let succeeded = bank
        .compensation
        .failures()
        .list(&FailureQuery {
            status: Some(ExecutionFailedStatus::Succeeded),
            ..FailureQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(succeeded.len(), 2, "the records are kept, marked SUCCEEDED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_broken_projection_is_recorded_and_repaired_in_order() {
    a_broken_projection_is_recorded_and_repaired_in_order(&sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_broken_projection_is_recorded_and_repaired_in_order() {
    if let Some(db) = postgres().await {
        a_broken_projection_is_recorded_and_repaired_in_order(&db).await;
    }
}
