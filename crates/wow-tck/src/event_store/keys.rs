//! What the unique-key cases share: fresh values, look-ups in one key space, and appends that
//! carry key changes.

use wow_core::eventsourcing::{AppendChanges, EventStoreError};
use wow_core::unique_key::{KeyChange, KeyHolder, UniqueKey};
use wow_core::AggregateId;

use super::Store;
use crate::fixtures::stream;

/// One key space of the cases' keys.
#[derive(Debug, Clone, Copy)]
pub(super) struct KeySpace(pub(super) &'static str);

impl KeySpace {
    /// `value` in this space.
    pub(super) fn key(self, value: &str) -> UniqueKey {
        UniqueKey::new(self.0, value)
    }

    /// Who holds `value` in `tenant`, as the store answers.
    pub(super) async fn holder(
        self,
        store: &Store,
        tenant: &str,
        value: &str,
    ) -> Option<KeyHolder> {
        store
            .find_key(tenant, &self.key(value))
            .await
            .expect("a key can be looked up")
    }

    /// The aggregate that holds `value` in `tenant`.
    pub(super) async fn holder_id(
        self,
        store: &Store,
        tenant: &str,
        value: &str,
    ) -> Option<AggregateId> {
        self.holder(store, tenant, value)
            .await
            .map(|held| held.aggregate_id)
    }
}

/// A value no other case uses, so cases may share a store's key table.
pub(super) fn fresh(label: &str) -> String {
    format!("{label}-{}", wow_core::id::new_id())
}

/// Appends a stream of `aggregate` at `version` with `keys`, under a fresh request id.
pub(super) async fn append_keys(
    store: &Store,
    aggregate: &AggregateId,
    version: u64,
    keys: Vec<KeyChange>,
) -> Result<(), EventStoreError> {
    let request_id = format!("r-{version}-{}", wow_core::id::new_id());
    store
        .append_with(
            &stream(aggregate, version, &request_id),
            &AppendChanges::keys(keys),
        )
        .await
}
