//! Table `unique_key`: the keys aggregates hold (SPEC DM-1), changed in the writer's
//! transaction: the key changes of one append, made with its stream inside one savepoint, a
//! backfill's claims and an operator's release; and the look-up of a key's holder.
//!
//! A reservation (a claim with a time, `reserved_until`) is judged by the process's clock,
//! read when the writer makes the change: one process writes the file. A lapsed reservation
//! stays a row until a claim takes it over or its holder releases it; it holds nothing.

use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use wow_core::eventsourcing::{EventStoreError, KeyIndex, KeyTaken, KeysToClaim, RejectedStream};

use rusqlite::{params, Connection, OptionalExtension, Row};
use tokio::sync::oneshot;
use wow_core::event::ProcessError;
use wow_core::unique_key::{KeyChange, KeyClaim, KeyHolder, UniqueKey};
use wow_core::AggregateId;

use super::{clamp, SqliteStore};
use crate::error::{gone, store_error};

/// Takes a key (`?1` tenant, `?2` space, `?3` value) for an aggregate (`?4` context, `?5`
/// name, `?6` id) at version `?7`, reserved until `?8` (NULL: for good): a free key is
/// inserted; the aggregate's own row takes the new reservation time and keeps its version; a
/// reservation that lapsed by `?9` (now) is taken over. Another holder's live row is left as
/// it is (no row changed), and the caller reads who holds it.
const CLAIM: &str = "INSERT INTO unique_key (tenant_id, key_space, key_value, context_name, aggregate_name, aggregate_id, version, reserved_until)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (tenant_id, key_space, key_value) DO UPDATE SET
        version = CASE WHEN unique_key.context_name = excluded.context_name AND unique_key.aggregate_name = excluded.aggregate_name AND unique_key.aggregate_id = excluded.aggregate_id
            THEN unique_key.version ELSE excluded.version END,
        context_name = excluded.context_name, aggregate_name = excluded.aggregate_name,
        aggregate_id = excluded.aggregate_id, reserved_until = excluded.reserved_until
    WHERE (unique_key.context_name = excluded.context_name AND unique_key.aggregate_name = excluded.aggregate_name AND unique_key.aggregate_id = excluded.aggregate_id)
        OR unique_key.reserved_until <= ?9";

/// A backfill's claim ([`claim_free`]): as [`CLAIM`], but the aggregate's own row is left as
/// it is too; only a free key or a lapsed reservation (by `?9`) changes.
const CLAIM_FREE: &str = "INSERT INTO unique_key (tenant_id, key_space, key_value, context_name, aggregate_name, aggregate_id, version, reserved_until)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (tenant_id, key_space, key_value) DO UPDATE SET
        context_name = excluded.context_name, aggregate_name = excluded.aggregate_name,
        aggregate_id = excluded.aggregate_id, version = excluded.version,
        reserved_until = excluded.reserved_until
    WHERE unique_key.reserved_until <= ?9
        AND NOT (unique_key.context_name = excluded.context_name AND unique_key.aggregate_name = excluded.aggregate_name AND unique_key.aggregate_id = excluded.aggregate_id)";

/// Gives a key up, only when this aggregate holds it.
const RELEASE: &str = "DELETE FROM unique_key WHERE tenant_id = ?1 AND key_space = ?2 AND key_value = ?3 AND context_name = ?4 AND aggregate_name = ?5 AND aggregate_id = ?6";

/// Gives a key up whoever holds it (an operator's release), and returns the row it deleted.
const RELEASE_ANY: &str = "DELETE FROM unique_key WHERE tenant_id = ?1 AND key_space = ?2 AND key_value = ?3 RETURNING context_name, aggregate_name, aggregate_id, version, reserved_until";

/// Who holds a key, and until when when it is a reservation.
const HOLDER: &str = "SELECT context_name, aggregate_name, aggregate_id, version, reserved_until FROM unique_key WHERE tenant_id = ?1 AND key_space = ?2 AND key_value = ?3";

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
/// the aggregate's own row, a claim inserts one (or sets the reservation time of the
/// aggregate's own, or takes over a lapsed reservation), and a claim that changed no row is
/// refused: another aggregate holds the key. The caller runs this inside the
/// savepoint of the stream's insert and rolls both back on any refusal.
pub(crate) fn change_keys(
    connection: &Connection,
    rejected: &RejectedStream,
    keys: &[KeyChange],
) -> Result<(), KeysRefused> {
    let aggregate = &rejected.aggregate_id;
    let now = wow_core::id::exact_now_millis();
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
                    key.reserved_until,
                    now,
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
                    // Cannot happen under the one writer (the claim changed no row, so the
                    // row is another aggregate's), and changes nothing either way.
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

/// Claims each of `keys` for `aggregate` at `version` when it is free or a lapsed
/// reservation, by the process's clock, and says what it found (SPEC DM-1, the backfill of
/// `KeyIndex::claim_keys`): the aggregate's own row and another holder's are left alone.
fn claim_free(
    connection: &Connection,
    aggregate: &AggregateId,
    version: i64,
    keys: &[UniqueKey],
) -> rusqlite::Result<Vec<KeyClaim>> {
    let now = wow_core::id::exact_now_millis();
    let mut claims = Vec::with_capacity(keys.len());
    for key in keys {
        let claimed = connection.prepare_cached(CLAIM_FREE)?.execute(params![
            aggregate.tenant_id,
            key.space,
            key.value,
            aggregate.context_name,
            aggregate.aggregate_name,
            aggregate.id,
            version,
            key.reserved_until,
            now,
        ])?;
        claims.push(if claimed == 1 {
            KeyClaim::Claimed
        } else {
            match holder(connection, &aggregate.tenant_id, key)? {
                Some(holder) if holder.aggregate_id != *aggregate => KeyClaim::Taken(holder),
                // The aggregate's own row (a row was there: the insert changed nothing).
                _ => KeyClaim::Held,
            }
        });
    }
    Ok(claims)
}

/// Decodes a row of [`HOLDER`] or [`RELEASE_ANY`]: the holder of `key` in `tenant_id`.
fn decode_holder(row: &Row<'_>, tenant_id: &str, key: &UniqueKey) -> rusqlite::Result<KeyHolder> {
    let version: i64 = row.get(3)?;
    let mut key = key.confirmed();
    key.reserved_until = row.get(4)?;
    Ok(KeyHolder {
        key,
        aggregate_id: AggregateId::new(
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
            tenant_id,
        ),
        version: u64::try_from(version).unwrap_or(0),
    })
}

/// Who holds `key` in `tenant_id`, on `connection`, whether or not a reservation lapsed (see
/// [`live_holder`]).
fn holder(
    connection: &Connection,
    tenant_id: &str,
    key: &UniqueKey,
) -> rusqlite::Result<Option<KeyHolder>> {
    connection
        .prepare_cached(HOLDER)?
        .query_row(params![tenant_id, key.space, key.value], |row| {
            decode_holder(row, tenant_id, key)
        })
        .optional()
}

/// An operator's release of `key` in `tenant_id` (`KeyIndex::release_key`): one `DELETE`
/// in the writer's transaction, so that it comes wholly before or after any append's claims;
/// the holder it had, if any.
pub(super) async fn release_any(
    store: &SqliteStore,
    tenant_id: &str,
    key: &UniqueKey,
) -> Result<Option<KeyHolder>, EventStoreError> {
    wow_core::unique_key::check_unique_key(key).map_err(EventStoreError::IllegalArgument)?;
    let released = Arc::new(Mutex::new(None));
    let slot = released.clone();
    let (tenant, key) = (tenant_id.to_owned(), key.clone());
    store
        .transact(move |connection| {
            let holder = connection
                .prepare_cached(RELEASE_ANY)?
                .query_row(params![tenant, key.space, key.value], |row| {
                    decode_holder(row, &tenant, &key)
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

/// Who holds `key` in `tenant_id` now, on `connection`: a reservation that lapsed by the
/// process's clock holds nothing.
fn live_holder(
    connection: &Connection,
    tenant_id: &str,
    key: &UniqueKey,
) -> rusqlite::Result<Option<KeyHolder>> {
    let now = wow_core::id::exact_now_millis();
    Ok(holder(connection, tenant_id, key)?.filter(|holder| !holder.key.lapsed_at(now)))
}

/// Who holds `key` in `tenant_id` now (`KeyIndex::find_key`), read on the read pool.
pub(super) async fn find(
    store: &SqliteStore,
    tenant_id: &str,
    key: &UniqueKey,
) -> Result<Option<KeyHolder>, EventStoreError> {
    let (tenant, key) = (tenant_id.to_owned(), key.clone());
    store
        .reads
        .read(move |connection| live_holder(connection, &tenant, &key))
        .await
        .map_err(store_error)
}

/// The backfill of `KeyIndex::claim_keys` ([`claim_free`]) in the writer's transaction,
/// each key by one upsert; the caller has checked `version` and `keys`.
pub(super) async fn claim_keys(
    store: &SqliteStore,
    aggregate_id: &AggregateId,
    version: u64,
    keys: &[UniqueKey],
) -> Result<Vec<KeyClaim>, EventStoreError> {
    let (aggregate, keys) = (aggregate_id.clone(), keys.to_vec());
    let (answer, claims) = oneshot::channel();
    store
        .submit(
            None,
            true,
            Box::new(move |connection| {
                let made = claim_free(connection, &aggregate, clamp(version), &keys)?;
                // The receiver waits for the submission's reply first; it is not dropped.
                let _ = answer.send(made);
                Ok(())
            }),
        )
        .await
        .map_err(|error| match error {
            ProcessError::Work(error) => EventStoreError::Internal(error),
            ProcessError::Store(error) => EventStoreError::Unavailable(error),
            other => EventStoreError::Internal(Box::new(other)),
        })?;
    claims
        .await
        .map_err(|_| EventStoreError::Unavailable(gone()))
}

#[async_trait]
impl KeyIndex for SqliteStore {
    async fn find_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        find(self, tenant_id, key).await
    }

    /// Claims the free keys in the writer's transaction, each by one upsert (see
    /// `store/unique_key.rs`).
    async fn claim_keys(&self, claim: KeysToClaim<'_>) -> Result<Vec<KeyClaim>, EventStoreError> {
        claim.check()?;
        claim_keys(self, claim.aggregate_id, claim.version, claim.keys).await
    }

    async fn release_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        release_any(self, tenant_id, key).await
    }
}
