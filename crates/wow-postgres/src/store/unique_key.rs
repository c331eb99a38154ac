//! Table `unique_key`: the keys aggregates hold (SPEC DM-1), changed in the transaction of the
//! stream that claims or releases them, and looked up by `find_key`.
//!
//! Why a claim is one `INSERT ... ON CONFLICT DO UPDATE ... RETURNING` rather than a read
//! first: the primary key (tenant, key space, value) decides between concurrent claimants. A
//! claim of a key whose row another transaction has just written waits for that transaction;
//! if it rolls back, the claim inserts; if it commits, the claim finds the row, locks it
//! (the update sets no column to a new value) and returns it, so the one statement tells
//! whether the key is now this aggregate's or whose it is. A `DO NOTHING` would return
//! nothing on a conflict, and the read that then named the holder could find the key
//! released again in between.
//!
//! A reservation (a claim with a time, `reserved_until`) is judged by the database's clock
//! (`clock_timestamp()`, read once per statement through the `clock` CTE, so that every
//! column of one upsert judges by the same instant): a lapsed reservation holds nothing, a
//! claim takes its row over in the same upsert, and `find_key` does not see it. The row stays
//! until a claim takes it over or its holder releases it.
//!
//! An append's changes are made in key order (a stable sort, so that one key's release and
//! claim keep their order): two appends that claim the same keys in different orders then
//! wait for each other instead of deadlocking. Different keys' changes commute, so the
//! outcome is the one the changes make in the order given.

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::Row;
use wow_core::eventsourcing::{EventStoreError, KeyIndex, KeysToClaim};
use wow_core::unique_key::{KeyChange, KeyClaim, KeyHolder, UniqueKey};
use wow_core::{AggregateId, DomainEventStream};

use super::stream_row::corrupt;
use super::{clamp, PostgresStore};
use crate::error::store_error;

/// Claims key (`$1` tenant, `$2` space, `$3` value) for aggregate (`$4` context, `$5` name,
/// `$6` id) at version `$7`, reserved until `$8` (NULL: for good), and returns its holder
/// afterwards: this aggregate when the key was free, a lapsed reservation (taken over at
/// `$7`), or already its own (its version kept, its reservation time set to `$8`); another
/// one otherwise, whose row the conflict's update leaves as it was.
const CLAIM_KEY: &str = "WITH clock AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT AS now_ms)
    INSERT INTO unique_key (tenant_id, key_space, key_value, context_name, aggregate_name, aggregate_id, version, reserved_until) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (tenant_id, key_space, key_value) DO UPDATE SET
        version = CASE WHEN (unique_key.context_name, unique_key.aggregate_name, unique_key.aggregate_id) IS DISTINCT FROM (EXCLUDED.context_name, EXCLUDED.aggregate_name, EXCLUDED.aggregate_id)
                AND unique_key.reserved_until <= (SELECT now_ms FROM clock)
            THEN EXCLUDED.version ELSE unique_key.version END,
        context_name = CASE WHEN unique_key.reserved_until <= (SELECT now_ms FROM clock) THEN EXCLUDED.context_name ELSE unique_key.context_name END,
        aggregate_name = CASE WHEN unique_key.reserved_until <= (SELECT now_ms FROM clock) THEN EXCLUDED.aggregate_name ELSE unique_key.aggregate_name END,
        aggregate_id = CASE WHEN unique_key.reserved_until <= (SELECT now_ms FROM clock) THEN EXCLUDED.aggregate_id ELSE unique_key.aggregate_id END,
        reserved_until = CASE WHEN (unique_key.context_name, unique_key.aggregate_name, unique_key.aggregate_id) = (EXCLUDED.context_name, EXCLUDED.aggregate_name, EXCLUDED.aggregate_id)
                OR unique_key.reserved_until <= (SELECT now_ms FROM clock)
            THEN EXCLUDED.reserved_until ELSE unique_key.reserved_until END
    RETURNING context_name, aggregate_name, aggregate_id, version, reserved_until";

/// A backfill's claim (`KeyIndex::claim_keys`): as [`CLAIM_KEY`], but the aggregate's own
/// row is left as it is too, and the answer says whether the aggregate held the key before
/// (`held_before`, column 5) as well as who holds it after.
const CLAIM_FREE_KEY: &str = "WITH clock AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT AS now_ms),
    before AS (SELECT context_name, aggregate_name, aggregate_id FROM unique_key WHERE tenant_id = $1 AND key_space = $2 AND key_value = $3),
    claimed AS (
        INSERT INTO unique_key (tenant_id, key_space, key_value, context_name, aggregate_name, aggregate_id, version, reserved_until) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
        ON CONFLICT (tenant_id, key_space, key_value) DO UPDATE SET
            version = CASE WHEN unique_key.reserved_until <= (SELECT now_ms FROM clock) THEN EXCLUDED.version ELSE unique_key.version END,
            context_name = CASE WHEN unique_key.reserved_until <= (SELECT now_ms FROM clock) THEN EXCLUDED.context_name ELSE unique_key.context_name END,
            aggregate_name = CASE WHEN unique_key.reserved_until <= (SELECT now_ms FROM clock) THEN EXCLUDED.aggregate_name ELSE unique_key.aggregate_name END,
            aggregate_id = CASE WHEN unique_key.reserved_until <= (SELECT now_ms FROM clock) THEN EXCLUDED.aggregate_id ELSE unique_key.aggregate_id END,
            reserved_until = CASE WHEN unique_key.reserved_until <= (SELECT now_ms FROM clock) THEN EXCLUDED.reserved_until ELSE unique_key.reserved_until END
        RETURNING context_name, aggregate_name, aggregate_id, version, reserved_until)
    SELECT c.context_name, c.aggregate_name, c.aggregate_id, c.version, c.reserved_until,
        EXISTS (SELECT 1 FROM before b WHERE b.context_name = $4 AND b.aggregate_name = $5 AND b.aggregate_id = $6) AS held_before
    FROM claimed c";

/// Releases key (`$1` tenant, `$2` space, `$3` value) when aggregate (`$4` context, `$5`
/// name, `$6` id) holds it; deletes nothing otherwise.
const RELEASE_KEY: &str = "DELETE FROM unique_key WHERE tenant_id = $1 AND key_space = $2 AND key_value = $3 AND context_name = $4 AND aggregate_name = $5 AND aggregate_id = $6";

/// The holder of key (`$1` tenant, `$2` space, `$3` value), if it is held (a reservation
/// lapsed by the database's clock is not): one read of `unique_key_pk`.
const FIND_KEY: &str = "SELECT context_name, aggregate_name, aggregate_id, version, reserved_until FROM unique_key WHERE tenant_id = $1 AND key_space = $2 AND key_value = $3
    AND (reserved_until IS NULL OR reserved_until > (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT)";

/// The key a change is about.
fn key_of(change: &KeyChange) -> &UniqueKey {
    let (KeyChange::Claim(key) | KeyChange::Release(key)) = change;
    key
}

/// Decodes a row of [`CLAIM_KEY`] or [`FIND_KEY`]: the holder of `key` in `tenant_id`.
fn decode_holder(
    row: &Row,
    tenant_id: &str,
    key: &UniqueKey,
) -> Result<KeyHolder, EventStoreError> {
    let version: i64 = row.try_get(3).map_err(store_error)?;
    let mut key = key.confirmed();
    key.reserved_until = row.try_get(4).map_err(store_error)?;
    Ok(KeyHolder {
        aggregate_id: AggregateId {
            context_name: row.try_get(0).map_err(store_error)?,
            aggregate_name: row.try_get(1).map_err(store_error)?,
            id: row.try_get(2).map_err(store_error)?,
            tenant_id: tenant_id.to_owned(),
        },
        version: u64::try_from(version)
            .map_err(|_| corrupt(format!("key {key} is held at version {version}")))?,
        key,
    })
}

/// Makes `stream`'s key changes in `transaction`, the one its stream was inserted in: each
/// claim takes its key for the stream's aggregate unless another aggregate holds it, each
/// release gives up a key the aggregate holds.
///
/// When another aggregate holds a claimed key, the error is
/// [`EventStoreError::key_taken`] naming the holder of the first such claim in `keys`'
/// order, and the caller must roll `transaction` back. Once one is found, only earlier
/// claims are still tried (they could name an earlier holder); nothing else is written.
pub(super) async fn change(
    transaction: &Transaction<'_>,
    stream: &DomainEventStream,
    keys: &[KeyChange],
) -> Result<(), EventStoreError> {
    let mut ordered: Vec<(usize, &KeyChange)> = keys.iter().enumerate().collect();
    ordered.sort_by(|(_, a), (_, b)| key_of(a).cmp(key_of(b)));
    let mut taken: Option<(usize, KeyHolder)> = None;
    for (index, change) in ordered {
        if taken.as_ref().is_some_and(|(first, _)| index > *first) {
            continue;
        }
        match change {
            KeyChange::Release(key) if taken.is_none() => release(transaction, stream, key).await?,
            KeyChange::Release(_) => {}
            KeyChange::Claim(key) => {
                let holder = claim(transaction, stream, key).await?;
                if holder.aggregate_id != stream.aggregate_id {
                    taken = Some((index, holder));
                }
            }
        }
    }
    match taken {
        Some((_, holder)) => Err(EventStoreError::key_taken(stream, holder)),
        None => Ok(()),
    }
}

/// Claims `key` for `stream`'s aggregate at its version ([`CLAIM_KEY`]); its holder after.
async fn claim(
    client: &impl GenericClient,
    stream: &DomainEventStream,
    key: &UniqueKey,
) -> Result<KeyHolder, EventStoreError> {
    let aggregate = &stream.aggregate_id;
    let statement = client
        .prepare_cached(CLAIM_KEY)
        .await
        .map_err(store_error)?;
    let row = client
        .query_one(
            &statement,
            &[
                &aggregate.tenant_id,
                &key.space,
                &key.value,
                &aggregate.context_name,
                &aggregate.aggregate_name,
                &aggregate.id,
                &clamp(stream.version),
                &key.reserved_until,
            ],
        )
        .await
        .map_err(store_error)?;
    decode_holder(&row, &aggregate.tenant_id, key)
}

/// Claims each of `keys` for `aggregate_id` at `version` when it is free or a lapsed
/// reservation ([`CLAIM_FREE_KEY`]), in one transaction, each key on its own: what
/// `KeyIndex::claim_keys` answers.
pub(super) async fn claim_free(
    store: &PostgresStore,
    aggregate_id: &AggregateId,
    version: u64,
    keys: &[UniqueKey],
) -> Result<Vec<KeyClaim>, EventStoreError> {
    let mut client = store.client().await?;
    let transaction = client.transaction().await.map_err(store_error)?;
    let statement = transaction
        .prepare_cached(CLAIM_FREE_KEY)
        .await
        .map_err(store_error)?;
    let mut claims = Vec::with_capacity(keys.len());
    for key in keys {
        let row = transaction
            .query_one(
                &statement,
                &[
                    &aggregate_id.tenant_id,
                    &key.space,
                    &key.value,
                    &aggregate_id.context_name,
                    &aggregate_id.aggregate_name,
                    &aggregate_id.id,
                    &clamp(version),
                    &key.reserved_until,
                ],
            )
            .await
            .map_err(store_error)?;
        let holder = decode_holder(&row, &aggregate_id.tenant_id, key)?;
        let held_before: bool = row.try_get(5).map_err(store_error)?;
        claims.push(if holder.aggregate_id != *aggregate_id {
            KeyClaim::Taken(holder)
        } else if held_before {
            KeyClaim::Held
        } else {
            KeyClaim::Claimed
        });
    }
    transaction.commit().await.map_err(store_error)?;
    Ok(claims)
}

/// Releases `key` when `stream`'s aggregate holds it ([`RELEASE_KEY`]).
async fn release(
    client: &impl GenericClient,
    stream: &DomainEventStream,
    key: &UniqueKey,
) -> Result<(), EventStoreError> {
    let aggregate = &stream.aggregate_id;
    let statement = client
        .prepare_cached(RELEASE_KEY)
        .await
        .map_err(store_error)?;
    client
        .execute(
            &statement,
            &[
                &aggregate.tenant_id,
                &key.space,
                &key.value,
                &aggregate.context_name,
                &aggregate.aggregate_name,
                &aggregate.id,
            ],
        )
        .await
        .map_err(store_error)?;
    Ok(())
}

/// Who holds `key` in `tenant_id`, if an aggregate does: one read of `unique_key_pk`.
pub(super) async fn find(
    store: &PostgresStore,
    tenant_id: &str,
    key: &UniqueKey,
) -> Result<Option<KeyHolder>, EventStoreError> {
    let client = store.client().await?;
    let statement = client.prepare_cached(FIND_KEY).await.map_err(store_error)?;
    let row = client
        .query_opt(&statement, &[&tenant_id, &key.space, &key.value])
        .await
        .map_err(store_error)?;
    row.map(|row| decode_holder(&row, tenant_id, key))
        .transpose()
}

/// Deletes key (`$1` tenant, `$2` space, `$3` value) whoever holds it, returning the row.
const RELEASE_ANY_KEY: &str = "DELETE FROM unique_key WHERE tenant_id = $1 AND key_space = $2 AND key_value = $3 RETURNING context_name, aggregate_name, aggregate_id, version, reserved_until";

/// An operator's release of `key` in `tenant_id` (`KeyIndex::release_key`): one autocommit
/// `DELETE ... RETURNING`. A claim in flight on the row waits for it and then inserts anew
/// (or the release waits for the claim's transaction and deletes what it wrote); the holder
/// it had, if any.
pub(super) async fn release_any(
    store: &PostgresStore,
    tenant_id: &str,
    key: &UniqueKey,
) -> Result<Option<KeyHolder>, EventStoreError> {
    wow_core::unique_key::check_unique_key(key).map_err(EventStoreError::IllegalArgument)?;
    let client = store.client().await?;
    let statement = client
        .prepare_cached(RELEASE_ANY_KEY)
        .await
        .map_err(store_error)?;
    let row = client
        .query_opt(&statement, &[&tenant_id, &key.space, &key.value])
        .await
        .map_err(store_error)?;
    row.map(|row| decode_holder(&row, tenant_id, key))
        .transpose()
}

#[async_trait]
impl KeyIndex for PostgresStore {
    async fn find_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        self.within(async { find(self, tenant_id, key).await })
            .await
    }

    /// One transaction, one upsert per key (see `store/unique_key.rs`).
    async fn claim_keys(&self, claim: KeysToClaim<'_>) -> Result<Vec<KeyClaim>, EventStoreError> {
        self.within(async {
            claim.check()?;
            claim_free(self, claim.aggregate_id, claim.version, claim.keys).await
        })
        .await
    }

    async fn release_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        self.within(async { release_any(self, tenant_id, key).await })
            .await
    }
}
