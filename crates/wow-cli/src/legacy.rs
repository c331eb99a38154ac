//! Brings a store written by an earlier build of the bank to today's shape, before the bank
//! starts on it. The bank's domain knows no database; what earlier builds left in one is
//! upgraded here, where the database is chosen.
//!
//! - `account_balance`, a table of its own before the balances became a portable view: the
//!   view is emptied in the view store and its positions reset (so the catch-up at start
//!   rebuilds it from history under each account's tenant), then the table is dropped.
//! - `notification_outbox`, a table of its own before the outbox became portable: it records
//!   effects still owed, so no row may be lost. Each row is copied into the view store as a
//!   row of the `notifications` outbox with its event id, which is also the key of its send
//!   in the effect journal, so a row sent before is not sent again. A table made before
//!   tenants led the keys takes each account's tenant from its first stream (one account id
//!   was one account then). The table is dropped after the copy.
//!
//! Every step can be repeated: a copy is written once per event id (its processed-message
//! record goes with it), clearing and resetting twice is clearing once, and the drops say
//! `IF EXISTS`. A crash half way is finished by the next start.

use wow_core::event::ConsumerStoreError;
use wow_core::eventsourcing::BoxError;
use wow_core::view::{ViewKey, ViewRow, ViewStoreError};
use wow_core::Stores;
use wow_example_bank::notifications::{self, OutboxRow};
use wow_example_bank::projection;
use wow_postgres::PostgresStore;
use wow_sqlite::SqliteStore;

/// Why a store of an earlier build could not be upgraded. What was done before the failure
/// stays done, and the next start goes on from there.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LegacyError {
    /// The old tables could not be read or dropped.
    #[error("the tables of an earlier build could not be read or dropped: {0}")]
    Database(BoxError),
    /// The view store refused the copy or the clear.
    #[error("the view store failed during the upgrade: {0}")]
    Views(#[source] BoxError),
    /// The consumer positions could not be reset.
    #[error("the positions could not be reset: {0}")]
    Positions(#[from] ConsumerStoreError),
}

impl From<ViewStoreError> for LegacyError {
    fn from(error: ViewStoreError) -> Self {
        LegacyError::Views(Box::new(error))
    }
}

/// The database a store was opened on, for the SQL of the upgrade.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Database<'a> {
    /// A SQLite file.
    Sqlite(&'a SqliteStore),
    /// A PostgreSQL schema.
    Postgres(&'a PostgresStore),
}

/// What an earlier build left: the old balance table, and the rows of the old outbox.
#[derive(Debug, Default)]
struct Found {
    balances: bool,
    outbox: Option<Vec<OutboxRow>>,
}

/// The old outbox's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OutboxShape {
    WithTenant,
    WithoutTenant,
}

/// The old outbox's rows, with each row's tenant; the tenant of a table made before tenants
/// is its account's first stream's (or the default tenant when there is none).
fn outbox_select(shape: OutboxShape) -> &'static str {
    match shape {
        OutboxShape::WithTenant => {
            "SELECT event_id, tenant_id, account_id, amount FROM notification_outbox ORDER BY event_id"
        }
        OutboxShape::WithoutTenant => {
            "SELECT o.event_id,
                COALESCE((SELECT e.tenant_id FROM event_stream e WHERE e.aggregate_name = 'account'
                    AND e.aggregate_id = o.account_id AND e.version = 1 LIMIT 1), '(0)'),
                o.account_id, o.amount
             FROM notification_outbox o ORDER BY o.event_id"
        }
    }
}

/// Upgrades what an earlier build left in `database` (whose contracts `stores` serves), and
/// logs what it did. A store of today's build is left as it is.
pub(crate) async fn upgrade(database: Database<'_>, stores: &Stores) -> Result<(), LegacyError> {
    let found = find(database).await?;
    if found.balances {
        tracing::info!("account_balance is a portable view now: rebuilding it from history");
        stores.views.clear(projection::NAME).await?;
        stores.positions.reset(projection::NAME).await?;
        drop_table(database, "account_balance").await?;
    }
    if let Some(rows) = found.outbox {
        tracing::info!(
            rows = rows.len(),
            "notification_outbox is a portable outbox now: copying its rows"
        );
        for row in rows {
            copy(stores, row).await?;
        }
        drop_table(database, "notification_outbox").await?;
    }
    Ok(())
}

/// Stores `row` as a row of the `notifications` outbox under its event id, once.
async fn copy(stores: &Stores, row: OutboxRow) -> Result<(), LegacyError> {
    let key = ViewKey::new(notifications::NAME, &row.tenant_id, &row.event_id);
    let state = serde_json::to_value(&row).map_err(|error| LegacyError::Views(Box::new(error)))?;
    let stored = ViewRow {
        key: key.clone(),
        version: 0,
        state,
        updated_at: wow_core::id::now_millis(),
    };
    stores
        .views
        .update(
            &key,
            &row.event_id,
            Box::new(move |current| Ok(current.is_none().then_some(stored))),
        )
        .await
        .map_err(|error| LegacyError::Views(Box::new(error)))?;
    Ok(())
}

/// The lock (PostgreSQL, transaction-scoped) under which nodes starting together look at the
/// old tables and drop them, so that none reads a table another is dropping.
const LOCK: i64 = 7_005_000_001;

async fn find(database: Database<'_>) -> Result<Found, LegacyError> {
    match database {
        Database::Sqlite(store) => store
            .read(|connection| {
                let columns = |table: &str| -> rusqlite::Result<(i64, i64)> {
                    connection.query_row(
                        "SELECT COUNT(*), COALESCE(SUM(name = 'tenant_id'), 0) FROM pragma_table_info(?1)",
                        [table],
                        |row| Ok((row.get(0)?, row.get(1)?)),
                    )
                };
                let (balances, _) = columns("account_balance")?;
                let (outbox, tenant) = columns("notification_outbox")?;
                let Some(shape) = shape(outbox > 0, tenant > 0) else {
                    return Ok(Found { balances: balances > 0, outbox: None });
                };
                let mut statement = connection.prepare(outbox_select(shape))?;
                let rows = statement.query_map([], |row| {
                    Ok(OutboxRow {
                        event_id: row.get(0)?,
                        tenant_id: row.get(1)?,
                        account_id: row.get(2)?,
                        amount: row.get(3)?,
                    })
                })?;
                Ok(Found {
                    balances: balances > 0,
                    outbox: Some(rows.collect::<rusqlite::Result<_>>()?),
                })
            })
            .await
            .map_err(LegacyError::Database),
        Database::Postgres(store) => find_postgres(store).await.map_err(LegacyError::Database),
    }
}

async fn find_postgres(store: &PostgresStore) -> Result<Found, BoxError> {
    let mut client = store.pool().get().await?;
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK])
        .await?;
    let found = transaction
        .query_one(
            "SELECT
               EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                   AND table_name = 'account_balance'),
               EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                   AND table_name = 'notification_outbox'),
               EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                   AND table_name = 'notification_outbox' AND column_name = 'tenant_id')",
            &[],
        )
        .await?;
    let balances: bool = found.try_get(0)?;
    let Some(shape) = shape(found.try_get(1)?, found.try_get(2)?) else {
        return Ok(Found {
            balances,
            outbox: None,
        });
    };
    let rows = transaction.query(outbox_select(shape), &[]).await?;
    let rows = rows
        .iter()
        .map(|row| {
            Ok(OutboxRow {
                event_id: row.try_get(0)?,
                tenant_id: row.try_get(1)?,
                account_id: row.try_get(2)?,
                amount: row.try_get(3)?,
            })
        })
        .collect::<Result<_, tokio_postgres::Error>>()?;
    transaction.commit().await?;
    Ok(Found {
        balances,
        outbox: Some(rows),
    })
}

/// The old outbox's shape, when there is one.
fn shape(exists: bool, has_tenant: bool) -> Option<OutboxShape> {
    exists.then_some(if has_tenant {
        OutboxShape::WithTenant
    } else {
        OutboxShape::WithoutTenant
    })
}

async fn drop_table(database: Database<'_>, table: &'static str) -> Result<(), LegacyError> {
    let sql = format!("DROP TABLE IF EXISTS {table}");
    match database {
        Database::Sqlite(store) => store
            .transact(move |connection| Ok(connection.execute_batch(&sql)?))
            .await
            .map_err(|error| LegacyError::Database(Box::new(error))),
        Database::Postgres(store) => drop_postgres(store, &sql)
            .await
            .map_err(LegacyError::Database),
    }
}

async fn drop_postgres(store: &PostgresStore, sql: &str) -> Result<(), BoxError> {
    let mut client = store.pool().get().await?;
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK])
        .await?;
    transaction.batch_execute(sql).await?;
    transaction.commit().await?;
    Ok(())
}
