//! Unique keys (SPEC DM-1) in the writer's transaction: the key changes of one append, made
//! with its stream inside one savepoint, and the look-up of a key's holder.

use rusqlite::{params, Connection, OptionalExtension};
use wow_core::eventsourcing::{EventStoreError, KeyTaken, RejectedStream};
use wow_core::unique_key::{KeyChange, KeyHolder, UniqueKey};
use wow_core::AggregateId;

/// Takes a key for an aggregate; a key held already (by anyone) is left as it is, and the
/// caller reads who holds it.
const CLAIM: &str = "INSERT INTO unique_key (tenant_id, key_space, key_value, context_name, aggregate_name, aggregate_id, version)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (tenant_id, key_space, key_value) DO NOTHING";

/// Gives a key up, only when this aggregate holds it.
const RELEASE: &str = "DELETE FROM unique_key WHERE tenant_id = ?1 AND key_space = ?2 AND key_value = ?3 AND context_name = ?4 AND aggregate_name = ?5 AND aggregate_id = ?6";

/// Who holds a key.
pub(crate) const HOLDER: &str = "SELECT context_name, aggregate_name, aggregate_id, version FROM unique_key WHERE tenant_id = ?1 AND key_space = ?2 AND key_value = ?3";

/// Why an append's key changes were not made.
pub(crate) enum KeysRefused {
    /// Another aggregate holds a key the append claims.
    Taken(EventStoreError),
    /// SQLite failed.
    Failed(rusqlite::Error),
}

impl From<rusqlite::Error> for KeysRefused {
    fn from(error: rusqlite::Error) -> Self {
        KeysRefused::Failed(error)
    }
}

/// Makes `keys`, the key changes of the stream `rejected` names, in order: a release deletes
/// the aggregate's own row, a claim inserts one, and a claim the primary key turned away is
/// refused unless the row found is this aggregate's. The caller runs this inside the
/// savepoint of the stream's insert and rolls both back on any refusal.
pub(crate) fn change_keys(
    connection: &Connection,
    rejected: &RejectedStream,
    keys: &[KeyChange],
) -> Result<(), KeysRefused> {
    let aggregate = &rejected.aggregate_id;
    for change in keys {
        match change {
            KeyChange::Release(key) => {
                connection.prepare_cached(RELEASE)?.execute(params![
                    aggregate.tenant_id,
                    key.space,
                    key.value,
                    aggregate.context_name,
                    aggregate.aggregate_name,
                    aggregate.id,
                ])?;
            }
            KeyChange::Claim(key) => {
                let taken = connection.prepare_cached(CLAIM)?.execute(params![
                    aggregate.tenant_id,
                    key.space,
                    key.value,
                    aggregate.context_name,
                    aggregate.aggregate_name,
                    aggregate.id,
                    i64::try_from(rejected.version).unwrap_or(i64::MAX),
                ])?;
                if taken == 1 {
                    continue;
                }
                let holder = holder(connection, &aggregate.tenant_id, key)?;
                match holder {
                    Some(holder) if holder.aggregate_id != *aggregate => {
                        return Err(KeysRefused::Taken(EventStoreError::DuplicateKey(Box::new(
                            KeyTaken {
                                stream: rejected.clone(),
                                holder,
                            },
                        ))));
                    }
                    // This aggregate's already (or released meanwhile: cannot happen under
                    // the one writer, and changes nothing either way).
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

/// Who holds `key` in `tenant_id`, on `connection`.
pub(crate) fn holder(
    connection: &Connection,
    tenant_id: &str,
    key: &UniqueKey,
) -> rusqlite::Result<Option<KeyHolder>> {
    connection
        .prepare_cached(HOLDER)?
        .query_row(params![tenant_id, key.space, key.value], |row| {
            let version: i64 = row.get(3)?;
            Ok(KeyHolder {
                key: key.clone(),
                aggregate_id: AggregateId::new(
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    tenant_id,
                ),
                version: u64::try_from(version).unwrap_or(0),
            })
        })
        .optional()
}

/// Gives a key up whoever holds it (an operator's release), and returns the row it deleted.
const RELEASE_ANY: &str = "DELETE FROM unique_key WHERE tenant_id = ?1 AND key_space = ?2 AND key_value = ?3 RETURNING context_name, aggregate_name, aggregate_id, version";

/// An operator's release of `key` in `tenant_id` (`EventStore::release_key`): one `DELETE`
/// in the writer's transaction, so that it comes wholly before or after any append's claims;
/// the holder it had, if any.
pub(crate) async fn release_any(
    store: &crate::SqliteStore,
    tenant_id: &str,
    key: &UniqueKey,
) -> Result<Option<KeyHolder>, EventStoreError> {
    use std::sync::{Arc, Mutex};
    use wow_core::event::ProcessError;
    wow_core::unique_key::check_unique_key(key).map_err(EventStoreError::IllegalArgument)?;
    let released = Arc::new(Mutex::new(None));
    let slot = released.clone();
    let (tenant, key) = (tenant_id.to_owned(), key.clone());
    store
        .transact(move |connection| {
            let holder = connection
                .prepare_cached(RELEASE_ANY)?
                .query_row(params![tenant, key.space, key.value], |row| {
                    let version: i64 = row.get(3)?;
                    Ok(KeyHolder {
                        key: key.clone(),
                        aggregate_id: AggregateId::new(
                            row.get::<_, String>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, String>(2)?,
                            &tenant,
                        ),
                        version: u64::try_from(version).unwrap_or(0),
                    })
                })
                .optional()?;
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(holder);
            Ok(())
        })
        .await
        .map_err(|error| match error {
            ProcessError::Store(error) => EventStoreError::Unavailable(error),
            other => EventStoreError::Internal(Box::new(other)),
        })?;
    let released = released.lock().unwrap_or_else(|p| p.into_inner()).take();
    released.ok_or_else(|| EventStoreError::Internal("the writer ran no release".into()))
}
