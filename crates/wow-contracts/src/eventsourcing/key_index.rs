//! The key index: which aggregate holds each unique key of a tenant (SPEC DM-1).

use async_trait::async_trait;

use crate::eventsourcing::{check_claimable, EventStoreError};
use wow_model::aggregate_id::AggregateId;
use wow_model::unique_key::{KeyClaim, KeyHolder, UniqueKey};

/// Who holds each unique key, read and changed outside an append; an append's own claims and
/// releases are written by [`History::append_with`](crate::eventsourcing::History::append_with).
#[async_trait]
pub trait KeyIndex: Send + Sync + std::fmt::Debug {
    /// Who holds `key` in `tenant_id`, if an aggregate does (SPEC DM-1): the value alone is
    /// looked up (`key`'s reservation time is ignored), a reservation that lapsed by the
    /// store's clock is not held, and the holder's key carries its reservation time when it
    /// has one. One indexed read.
    async fn find_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        let _ = (tenant_id, key);
        Err(EventStoreError::IllegalArgument(
            "this event store holds no unique keys".to_owned(),
        ))
    }

    /// Claims the claim's `keys` for its `aggregate_id` at its `version`, outside an append:
    /// a backfill of keys an aggregate type declared after its aggregates were made (SPEC
    /// DM-1). Each key on its own, in order: claimed when free or a lapsed reservation
    /// ([`KeyClaim::Claimed`], held from then on as by an append at `version`, with the key's
    /// reservation time); left alone when the aggregate holds it already ([`KeyClaim::Held`]);
    /// reported and left alone when another aggregate holds it ([`KeyClaim::Taken`], naming
    /// the holder). So running it twice changes nothing the second time. The store's unique
    /// constraint decides against a concurrent claimant, as in
    /// [`History::append_with`](crate::eventsourcing::History::append_with).
    ///
    /// A claim [`KeysToClaim::check`] refuses (version 0, or a key
    /// [`check_claimable`](crate::eventsourcing::check_claimable) refuses) is
    /// [`EventStoreError::IllegalArgument`], as is every call on a store that keeps no keys
    /// (the default).
    async fn claim_keys(&self, claim: KeysToClaim<'_>) -> Result<Vec<KeyClaim>, EventStoreError> {
        let _ = claim;
        Err(EventStoreError::IllegalArgument(
            "this event store holds no unique keys".to_owned(),
        ))
    }

    /// An operator's release (SPEC DM-1): frees `key` in `tenant_id` whoever holds it, and
    /// answers the holder it had (`None`: the key was free, and nothing changed). One atomic
    /// write: a claim racing it either took the key before (and is what is released) or
    /// finds it free after.
    ///
    /// History is not touched: the holder's state still names the key, and no event says it
    /// was released. Until that aggregate gives the key up by a decision of its own, another
    /// aggregate may claim it; the holder's later releases of it change nothing, and a
    /// recover of the holder claims it again (refused `DuplicateKey` when another aggregate
    /// took it meanwhile). A key
    /// [`check_unique_key`](wow_model::unique_key::check_unique_key) refuses is
    /// [`EventStoreError::IllegalArgument`]; so is any key on a store that keeps none (the
    /// default).
    async fn release_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        let _ = (tenant_id, key);
        Err(EventStoreError::IllegalArgument(
            "this event store holds no unique keys".to_owned(),
        ))
    }
}

/// A claim of keys outside an append ([`KeyIndex::claim_keys`]): `keys` for `aggregate_id`,
/// each held from then on as by an append at `version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeysToClaim<'a> {
    /// The aggregate that claims the keys.
    pub aggregate_id: &'a AggregateId,
    /// The version the keys are held at, as by an append of it (from 1).
    pub version: u64,
    /// The keys, each claimed on its own, in order.
    pub keys: &'a [UniqueKey],
}

impl KeysToClaim<'_> {
    /// Checks what every store checks before it claims anything ([`check_claimable`]): a
    /// version from 1, and keys [`check_unique_key`](wow_model::unique_key::check_unique_key)
    /// accepts. Fails with [`EventStoreError::IllegalArgument`] naming the first thing
    /// refused.
    pub fn check(&self) -> Result<(), EventStoreError> {
        check_claimable(self.version, self.keys)
    }
}
