//! Where the bank's read models live: in the store's own database when it has one, so that
//! each consumer's write and its processed-message record commit together (SPEC DS-2).

use std::collections::HashMap;
use std::sync::Arc;

use wow_core::aggregate::Aggregate;
use wow_core::compensation::{CompensationStore, InMemoryCompensationStore};
use wow_core::event::{
    ConsumerPositions, EffectJournal, InMemoryConsumerPositions, InMemoryEffectJournal,
    InMemoryProcessedMessages, ProcessError, Processed,
};
use wow_core::eventsourcing::BoxError;
use wow_core::DomainEventStream;
use wow_postgres::PostgresStore;
use wow_sqlite::SqliteStore;

use crate::account::{Account, AccountEvent, AccountState};
use crate::notifications::OutboxRow;
use crate::projection::AccountView;

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
    balances: HashMap<String, (AccountState, u64)>,
    outbox: Vec<OutboxRow>,
}

/// The read models and consumer records in memory.
#[derive(Debug, Default)]
pub struct MemoryModels {
    tables: InMemoryProcessedMessages<MemoryTables>,
    compensation: Arc<InMemoryCompensationStore>,
    positions: Arc<InMemoryConsumerPositions>,
    effects: Arc<InMemoryEffectJournal>,
}

/// Why a stream cannot be folded into a balance row: an earlier stream of the account has
/// not been applied (it failed, and waits for its retry), so applying this one would skip it.
#[derive(Debug, thiserror::Error)]
#[error("account {account} is at version {at}; version {got} must wait for the versions before it")]
pub struct OutOfOrder {
    account: String,
    at: u64,
    got: u64,
}

/// Checks that `stream` is the next version after `at`; `Ok(false)` when it is already in.
fn next_in_order(stream: &DomainEventStream, at: u64) -> Result<bool, BoxError> {
    if stream.version <= at {
        return Ok(false);
    }
    if stream.version != at + 1 {
        return Err(Box::new(OutOfOrder {
            account: stream.aggregate_id.id.clone(),
            at,
            got: stream.version,
        }));
    }
    Ok(true)
}

fn fold(state: &mut AccountState, stream: &DomainEventStream) -> Result<(), BoxError> {
    for event in wow_core::aggregate::typed_events::<Account>(stream)? {
        Account::apply(state, &event);
    }
    Ok(())
}

fn withdrawals(stream: &DomainEventStream) -> Vec<OutboxRow> {
    stream
        .body
        .iter()
        .filter(|event| event.name == "Withdrawn")
        .filter_map(|event| match event.decode::<AccountEvent>() {
            Ok(AccountEvent::Withdrawn(moved)) => Some(OutboxRow {
                event_id: event.id.clone(),
                account_id: stream.aggregate_id.id.clone(),
                amount: moved.amount,
            }),
            _ => None,
        })
        .collect()
}

const SQL_TABLES: &str = "
    CREATE TABLE IF NOT EXISTS account_balance (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, balance BIGINT NOT NULL, held BIGINT NOT NULL,
        frozen BOOLEAN NOT NULL, version BIGINT NOT NULL);
    CREATE TABLE IF NOT EXISTS notification_outbox (
        event_id TEXT PRIMARY KEY, account_id TEXT NOT NULL, amount BIGINT NOT NULL);";

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

    /// Where external effects are journaled (SPEC DS-2).
    pub fn effects(&self) -> Arc<dyn EffectJournal> {
        match self {
            ReadModels::Memory(models) => models.effects.clone(),
            ReadModels::Sqlite(store) => Arc::new(store.clone()),
            ReadModels::Postgres(store) => Arc::new(store.clone()),
        }
    }

    /// Creates the tables when missing.
    pub async fn prepare(&self) -> Result<(), BoxError> {
        match self {
            ReadModels::Memory(_) => Ok(()),
            ReadModels::Sqlite(store) => store
                .transact(|connection| Ok(connection.execute_batch(SQL_TABLES)?))
                .await
                .map_err(Into::into),
            ReadModels::Postgres(store) => {
                let client = store.pool().get().await?;
                client.batch_execute(SQL_TABLES).await?;
                Ok(())
            }
        }
    }

    /// Empties the table of `consumer` (`account_balance` or `notifications`) with its
    /// processed-message records and positions, so that the next catch-up rebuilds it from
    /// history. Other consumers keep theirs.
    pub async fn rebuild(&self, consumer: &str) -> Result<(), BoxError> {
        let table = match consumer {
            crate::projection::NAME => "account_balance",
            crate::notifications::NAME => "notification_outbox",
            other => return Err(format!("no read model is named `{other}`").into()),
        };
        match self {
            ReadModels::Memory(models) => {
                models.tables.forget(consumer, |tables| match table {
                    "account_balance" => tables.balances.clear(),
                    _ => tables.outbox.clear(),
                });
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

    /// Folds `stream` into the account's balance row, once per stream.
    pub async fn project_balance(
        &self,
        consumer: &str,
        stream: &DomainEventStream,
    ) -> Result<Processed, ProcessError> {
        let id = stream.aggregate_id.id.clone();
        match self {
            ReadModels::Memory(models) => {
                models.tables.process_once(consumer, &stream.id, |tables| {
                    let (state, version) = tables.balances.entry(id).or_default();
                    if next_in_order(stream, *version)? {
                        fold(state, stream)?;
                        *version = stream.version;
                    }
                    Ok(())
                })
            }
            ReadModels::Sqlite(store) => {
                let stream = stream.clone();
                store
                    .process_once(consumer, &stream.id.clone(), move |connection| {
                        let (mut state, at) = connection
                            .query_row(
                                "SELECT name, balance, held, frozen, version FROM account_balance WHERE id = ?1",
                                [&id],
                                |row| Ok((AccountState { name: row.get(0)?, balance: row.get(1)?, held: row.get(2)?, frozen: row.get(3)? }, row.get::<_, i64>(4)?)),
                            )
                            .or_else(|error| match error {
                                rusqlite::Error::QueryReturnedNoRows => Ok((AccountState::default(), 0)),
                                other => Err(other),
                            })?;
                        if !next_in_order(&stream, u64::try_from(at).unwrap_or(0))? {
                            return Ok(());
                        }
                        fold(&mut state, &stream)?;
                        connection.execute(
                            "INSERT INTO account_balance (id, name, balance, held, frozen, version) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                             ON CONFLICT (id) DO UPDATE SET name = excluded.name, balance = excluded.balance, held = excluded.held, frozen = excluded.frozen, version = excluded.version",
                            rusqlite::params![id, state.name, state.balance, state.held, state.frozen, stream.version as i64],
                        )?;
                        Ok(())
                    })
                    .await
            }
            ReadModels::Postgres(store) => {
                let stream = stream.clone();
                store
                    .process_once(consumer, &stream.id.clone(), move |transaction| {
                        Box::pin(async move {
                            let row = transaction
                                .query_opt("SELECT name, balance, held, frozen, version FROM account_balance WHERE id = $1 FOR UPDATE", &[&id])
                                .await?;
                            let (mut state, at) = match row {
                                Some(row) => (AccountState { name: row.get(0), balance: row.get(1), held: row.get(2), frozen: row.get(3) }, row.get::<_, i64>(4)),
                                None => (AccountState::default(), 0),
                            };
                            if !next_in_order(&stream, u64::try_from(at).unwrap_or(0))? {
                                return Ok(());
                            }
                            fold(&mut state, &stream)?;
                            let version = i64::try_from(stream.version).unwrap_or(i64::MAX);
                            transaction
                                .execute(
                                    "INSERT INTO account_balance (id, name, balance, held, frozen, version) VALUES ($1, $2, $3, $4, $5, $6)
                                     ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, balance = EXCLUDED.balance, held = EXCLUDED.held, frozen = EXCLUDED.frozen, version = EXCLUDED.version",
                                    &[&id, &state.name, &state.balance, &state.held, &state.frozen, &version],
                                )
                                .await?;
                            Ok(())
                        })
                    })
                    .await
            }
        }
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
                                "INSERT INTO notification_outbox (event_id, account_id, amount) VALUES (?1, ?2, ?3)",
                                rusqlite::params![row.event_id, row.account_id, row.amount],
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
                                        "INSERT INTO notification_outbox (event_id, account_id, amount) VALUES ($1, $2, $3)",
                                        &[&row.event_id, &row.account_id, &row.amount],
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

    /// The balance row of account `id`.
    pub async fn view(&self, id: &str) -> Result<Option<AccountView>, BoxError> {
        let id = id.to_owned();
        match self {
            ReadModels::Memory(models) => Ok(models.tables.read(|tables| {
                tables.balances.get(&id).map(|(state, version)| AccountView {
                    id: id.clone(),
                    name: state.name.clone(),
                    balance: state.balance,
                    held: state.held,
                    version: *version,
                })
            })),
            ReadModels::Sqlite(store) => {
                store
                    .read(move |connection| {
                        connection
                            .query_row("SELECT id, name, balance, held, version FROM account_balance WHERE id = ?1", [&id], |row| {
                                Ok(AccountView { id: row.get(0)?, name: row.get(1)?, balance: row.get(2)?, held: row.get(3)?, version: row.get::<_, i64>(4)? as u64 })
                            })
                            .map(Some)
                            .or_else(|error| match error {
                                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                                other => Err(other),
                            })
                    })
                    .await
            }
            ReadModels::Postgres(store) => {
                let client = store.pool().get().await?;
                let row = client.query_opt("SELECT id, name, balance, held, version FROM account_balance WHERE id = $1", &[&id]).await?;
                Ok(row.map(|row| AccountView { id: row.get(0), name: row.get(1), balance: row.get(2), held: row.get(3), version: u64::try_from(row.get::<_, i64>(4)).unwrap_or(0) }))
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
                        let mut statement = connection.prepare("SELECT event_id, account_id, amount FROM notification_outbox ORDER BY event_id")?;
                        let rows = statement.query_map([], |row| Ok(OutboxRow { event_id: row.get(0)?, account_id: row.get(1)?, amount: row.get(2)? }))?;
                        rows.collect()
                    })
                    .await
            }
            ReadModels::Postgres(store) => {
                let client = store.pool().get().await?;
                let rows = client.query("SELECT event_id, account_id, amount FROM notification_outbox ORDER BY event_id", &[]).await?;
                Ok(rows.iter().map(|row| OutboxRow { event_id: row.get(0), account_id: row.get(1), amount: row.get(2) }).collect())
            }
        }
    }
}
