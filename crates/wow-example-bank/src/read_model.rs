//! Where the bank's read models live: in the store's own database when it has one, so that
//! each consumer's write and its processed-message record commit together (SPEC DS-2).

use std::sync::Arc;

use wow_core::compensation::{CompensationStore, InMemoryCompensationStore};
use wow_core::event::{
    ConsumerPositions, EffectJournal, InMemoryConsumerPositions, InMemoryEffectJournal,
    InMemoryProcessedMessages, ProcessError, Processed,
};
use wow_core::eventsourcing::BoxError;
use wow_core::view::{InMemoryViewStore, ViewStore};
use wow_core::DomainEventStream;
use wow_postgres::PostgresStore;
use wow_sqlite::SqliteStore;

use crate::account::AccountEvent;

/// The database of the read models, and of the consumers' positions, effect journal and
/// compensation records.
#[derive(Debug)]
pub enum ReadModels {
    /// In memory (for `memory://` stores and tests).
    Memory(Box<MemoryModels>),
    /// In the SQLite file of the event store.
    Sqlite(SqliteStore),
    /// In the PostgreSQL schema of the event store.
    Postgres(PostgresStore),
}

/// The in-memory tables.
#[derive(Debug, Clone, Default)]
pub struct MemoryTables {
    outbox: Vec<OutboxRow>,
}

/// The read models and consumer records in memory.
#[derive(Debug, Default)]
pub struct MemoryModels {
    tables: InMemoryProcessedMessages<MemoryTables>,
    views: Arc<InMemoryViewStore>,
    compensation: Arc<InMemoryCompensationStore>,
    positions: Arc<InMemoryConsumerPositions>,
    effects: Arc<InMemoryEffectJournal>,
}

/// The consumer name of the notifications processor, whose outbox lives here.
pub(crate) const NOTIFICATIONS: &str = "notifications";

/// One notification to send.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OutboxRow {
    /// The `Withdrawn` event's id: the row's identity.
    pub event_id: String,
    /// The account's tenant.
    pub tenant_id: String,
    /// The account.
    pub account_id: String,
    /// The amount withdrawn.
    pub amount: i64,
}

fn withdrawals(stream: &DomainEventStream) -> Vec<OutboxRow> {
    stream
        .body
        .iter()
        .filter(|event| event.name == "Withdrawn")
        .filter_map(|event| match event.decode::<AccountEvent>() {
            Ok(AccountEvent::Withdrawn(moved)) => Some(OutboxRow {
                event_id: event.id.clone(),
                tenant_id: stream.aggregate_id.tenant_id.clone(),
                account_id: stream.aggregate_id.id.clone(),
                amount: moved.amount,
            }),
            _ => None,
        })
        .collect()
}

/// The outbox's table (the balances are a portable view, in the store's `view_row`).
const SQL_TABLES: &str = "
    CREATE TABLE IF NOT EXISTS notification_outbox (
        event_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, account_id TEXT NOT NULL,
        amount BIGINT NOT NULL);";

/// How tables of earlier builds are brought to today's shape: the old `account_balance`
/// table (the balances are a portable view now) is dropped and the view rebuilt from history
/// by the next catch-up (its processed-message records and positions are forgotten with it);
/// a `notification_outbox` made before tenants led the keys records effects to deliver, so it
/// keeps its rows and takes each account's tenant from its first stream (before tenants led
/// the keys, one account id was one account).
const OUTBOX_TENANT: &str = "
    ALTER TABLE notification_outbox ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '(0)';
    UPDATE notification_outbox SET tenant_id = COALESCE((SELECT e.tenant_id FROM event_stream e
        WHERE e.aggregate_name = 'account' AND e.aggregate_id = notification_outbox.account_id
          AND e.version = 1), '(0)');";

/// Which tables of earlier builds are here: (the old `account_balance`, a
/// `notification_outbox` without tenants).
const OLD_SHAPES: &str = "
    SELECT
      EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
          AND table_name = 'account_balance'),
      EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
          AND table_name = 'notification_outbox')
      AND NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
          AND table_name = 'notification_outbox' AND column_name = 'tenant_id')";

/// Whether SQLite's `table` exists.
fn sqlite_has_table(connection: &rusqlite::Connection, table: &str) -> rusqlite::Result<bool> {
    connection.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info(?1)",
        [table],
        |row| row.get(0),
    )
}

/// Whether SQLite's `table` exists without a `tenant_id` column.
fn sqlite_lacks_tenant(connection: &rusqlite::Connection, table: &str) -> rusqlite::Result<bool> {
    let (columns, tenant): (i64, i64) = connection.query_row(
        "SELECT COUNT(*), COALESCE(SUM(name = 'tenant_id'), 0) FROM pragma_table_info(?1)",
        [table],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    Ok(columns > 0 && tenant == 0)
}

impl ReadModels {
    /// In memory.
    pub fn memory() -> Self {
        ReadModels::Memory(Box::default())
    }

    /// Where consumer failures are recorded (SPEC DS-4).
    pub fn compensation_store(&self) -> Arc<dyn CompensationStore> {
        match self {
            ReadModels::Memory(models) => models.compensation.clone(),
            ReadModels::Sqlite(store) => Arc::new(store.clone()),
            ReadModels::Postgres(store) => Arc::new(store.clone()),
        }
    }

    /// Where consumer positions are kept.
    pub fn positions(&self) -> Arc<dyn ConsumerPositions> {
        match self {
            ReadModels::Memory(models) => models.positions.clone(),
            ReadModels::Sqlite(store) => Arc::new(store.clone()),
            ReadModels::Postgres(store) => Arc::new(store.clone()),
        }
    }

    /// Where the portable views live (the `account_balance` view among them).
    pub fn views(&self) -> Arc<dyn ViewStore> {
        match self {
            ReadModels::Memory(models) => models.views.clone(),
            ReadModels::Sqlite(store) => Arc::new(store.clone()),
            ReadModels::Postgres(store) => Arc::new(store.clone()),
        }
    }

    /// Where external effects are journaled (SPEC DS-2).
    pub fn effects(&self) -> Arc<dyn EffectJournal> {
        match self {
            ReadModels::Memory(models) => models.effects.clone(),
            ReadModels::Sqlite(store) => Arc::new(store.clone()),
            ReadModels::Postgres(store) => Arc::new(store.clone()),
        }
    }

    /// Creates the tables when missing, and brings tables of earlier builds to today's shape
    /// (see [`OUTBOX_TENANT`]); the balance view of a store that had the old table is rebuilt
    /// by the next catch-up.
    pub async fn prepare(&self) -> Result<(), BoxError> {
        let balances_were_dropped = match self {
            ReadModels::Memory(_) => false,
            ReadModels::Sqlite(store) => {
                let old_balances = store
                    .read(|connection| sqlite_has_table(connection, "account_balance"))
                    .await?;
                // Checked again inside the write: the writer is the only one, so another
                // process that got there first has left nothing to do.
                store
                    .transact(|connection| {
                        if sqlite_has_table(connection, "account_balance")? {
                            connection.execute_batch("DROP TABLE account_balance")?;
                        }
                        if sqlite_lacks_tenant(connection, "notification_outbox")? {
                            connection.execute_batch(OUTBOX_TENANT)?;
                        }
                        connection.execute_batch(SQL_TABLES)?;
                        Ok(())
                    })
                    .await?;
                old_balances
            }
            ReadModels::Postgres(store) => {
                let mut client = store.pool().get().await?;
                let transaction = client.transaction().await?;
                // One preparer at a time, so two nodes starting together migrate once.
                transaction
                    .execute("SELECT pg_advisory_xact_lock(7005000001)", &[])
                    .await?;
                let shapes = transaction.query_one(OLD_SHAPES, &[]).await?;
                let old_balances: bool = shapes.get(0);
                if old_balances {
                    transaction
                        .batch_execute("DROP TABLE account_balance")
                        .await?;
                }
                if shapes.get::<_, bool>(1) {
                    transaction.batch_execute(OUTBOX_TENANT).await?;
                }
                transaction.batch_execute(SQL_TABLES).await?;
                transaction.commit().await?;
                old_balances
            }
        };
        if balances_were_dropped {
            tracing::info!("account_balance is a portable view now: rebuilding it from history");
            self.rebuild(crate::projection::NAME).await?;
        }
        Ok(())
    }

    /// Empties the table of `consumer` (`account_balance` or `notifications`) with its
    /// processed-message records and positions, so that the next catch-up rebuilds it from
    /// history. Other consumers keep theirs.
    pub async fn rebuild(&self, consumer: &str) -> Result<(), BoxError> {
        let table = match consumer {
            crate::projection::NAME => {
                // A view: its store drops its rows and processed records together.
                self.views().clear(consumer).await?;
                self.positions().reset(consumer).await?;
                return Ok(());
            }
            NOTIFICATIONS => "notification_outbox",
            other => return Err(format!("no read model is named `{other}`").into()),
        };
        match self {
            ReadModels::Memory(models) => {
                models
                    .tables
                    .forget(consumer, |tables| tables.outbox.clear());
            }
            ReadModels::Sqlite(store) => {
                let consumer = consumer.to_owned();
                store
                    .transact(move |connection| {
                        connection.execute(&format!("DELETE FROM {table}"), [])?;
                        connection.execute(
                            "DELETE FROM processed_message WHERE consumer = ?1",
                            [&consumer],
                        )?;
                        Ok(())
                    })
                    .await?;
            }
            ReadModels::Postgres(store) => {
                let mut client = store.pool().get().await?;
                let transaction = client.transaction().await?;
                transaction
                    .execute(&format!("DELETE FROM {table}"), &[])
                    .await?;
                transaction
                    .execute(
                        "DELETE FROM processed_message WHERE consumer = $1",
                        &[&consumer],
                    )
                    .await?;
                transaction.commit().await?;
            }
        }
        self.positions().reset(consumer).await?;
        Ok(())
    }

    /// Writes one outbox row per `Withdrawn` event of `stream`, once per stream.
    pub async fn record_withdrawals(
        &self,
        consumer: &str,
        stream: &DomainEventStream,
    ) -> Result<Processed, ProcessError> {
        let rows = withdrawals(stream);
        match self {
            ReadModels::Memory(models) => {
                models.tables.process_once(consumer, &stream.id, |tables| {
                    tables.outbox.extend(rows);
                    Ok(())
                })
            }
            ReadModels::Sqlite(store) => {
                store
                    .process_once(consumer, &stream.id, move |connection| {
                        for row in rows {
                            connection.execute(
                                "INSERT INTO notification_outbox (event_id, tenant_id, account_id, amount) VALUES (?1, ?4, ?2, ?3)",
                                rusqlite::params![row.event_id, row.account_id, row.amount, row.tenant_id],
                            )?;
                        }
                        Ok(())
                    })
                    .await
            }
            ReadModels::Postgres(store) => {
                store
                    .process_once(consumer, &stream.id, move |transaction| {
                        Box::pin(async move {
                            for row in rows {
                                transaction
                                    .execute(
                                        "INSERT INTO notification_outbox (event_id, tenant_id, account_id, amount) VALUES ($1, $4, $2, $3)",
                                        &[&row.event_id, &row.account_id, &row.amount, &row.tenant_id],
                                    )
                                    .await?;
                            }
                            Ok(())
                        })
                    })
                    .await
            }
        }
    }

    /// Every outbox row, in order of event id.
    pub async fn outbox(&self) -> Result<Vec<OutboxRow>, BoxError> {
        match self {
            ReadModels::Memory(models) => Ok(models.tables.read(|tables| tables.outbox.clone())),
            ReadModels::Sqlite(store) => {
                store
                    .read(|connection| {
                        let mut statement = connection.prepare("SELECT event_id, tenant_id, account_id, amount FROM notification_outbox ORDER BY event_id")?;
                        let rows = statement.query_map([], |row| Ok(OutboxRow { event_id: row.get(0)?, tenant_id: row.get(1)?, account_id: row.get(2)?, amount: row.get(3)? }))?;
                        rows.collect()
                    })
                    .await
            }
            ReadModels::Postgres(store) => {
                let client = store.pool().get().await?;
                let rows = client.query("SELECT event_id, tenant_id, account_id, amount FROM notification_outbox ORDER BY event_id", &[]).await?;
                Ok(rows.iter().map(|row| OutboxRow { event_id: row.get(0), tenant_id: row.get(1), account_id: row.get(2), amount: row.get(3) }).collect())
            }
        }
    }
}
