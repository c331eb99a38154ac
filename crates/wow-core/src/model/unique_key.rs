//! Unique keys across aggregates (SPEC DM-1): a value (an email, a SKU) an aggregate holds in a
//! named key space of its tenant, so that no other aggregate of that tenant holds it too.
//!
//! An aggregate states which keys its state holds ([`Aggregate::unique_keys`]); the node
//! compares the keys before and after a decision and hands the difference ([`key_changes`])
//! to the store with the stream, which writes both in one atomic write: the store's unique
//! constraint decides between two claimants, never a read first.
//!
//! [`Aggregate::unique_keys`]: crate::aggregate::Aggregate::unique_keys

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::aggregate_id::AggregateId;

/// The longest key space name, in bytes.
pub const MAX_KEY_SPACE_LEN: usize = 64;

/// The longest key value, in bytes.
pub const MAX_KEY_VALUE_LEN: usize = 512;

/// One value in one key space of a tenant: `sku` = `ABC-1`. The tenant is the aggregate's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UniqueKey {
    /// The key space: `sku`, `email`. Lowercase ASCII letters, digits, `_`, `-` and `.`.
    pub space: String,
    /// The value, as the domain spells it (normalise it first when `A@x` and `a@x` are one).
    pub value: String,
}

impl UniqueKey {
    /// The key `value` in `space`.
    pub fn new(space: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            space: space.into(),
            value: value.into(),
        }
    }
}

impl fmt::Display for UniqueKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} `{}`", self.space, self.value)
    }
}

/// Why a key cannot be stored: its space or value is empty, too long, or (the space) holds a
/// character outside `a-z`, `0-9`, `_`, `-` and `.`.
pub fn check_unique_key(key: &UniqueKey) -> Result<(), String> {
    let space_ok = !key.space.is_empty()
        && key.space.len() <= MAX_KEY_SPACE_LEN
        && key.space.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'.')
        });
    if !space_ok {
        return Err(format!(
            "key space `{}` must be 1 to {MAX_KEY_SPACE_LEN} of a-z, 0-9, `_`, `-`, `.`",
            key.space
        ));
    }
    if key.value.is_empty() || key.value.len() > MAX_KEY_VALUE_LEN {
        return Err(format!(
            "a value in key space `{}` must be 1 to {MAX_KEY_VALUE_LEN} bytes",
            key.space
        ));
    }
    Ok(())
}

/// What an append does to one key of its aggregate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", content = "key", rename_all = "camelCase")]
pub enum KeyChange {
    /// Take the key for the aggregate. Refused when another aggregate holds it; nothing to do
    /// when this aggregate holds it already.
    Claim(UniqueKey),
    /// Give the key up. Nothing to do when this aggregate does not hold it.
    Release(UniqueKey),
}

/// The changes that take an aggregate from holding `before` to holding `after`: releases
/// first, then claims, each in key order, so that a key moved within one space (a renamed
/// SKU) is free before the new one is taken.
pub fn key_changes(before: &[UniqueKey], after: &[UniqueKey]) -> Vec<KeyChange> {
    let mut released: Vec<&UniqueKey> = before.iter().filter(|k| !after.contains(k)).collect();
    let mut claimed: Vec<&UniqueKey> = after.iter().filter(|k| !before.contains(k)).collect();
    released.sort();
    released.dedup();
    claimed.sort();
    claimed.dedup();
    released
        .into_iter()
        .map(|k| KeyChange::Release(k.clone()))
        .chain(claimed.into_iter().map(|k| KeyChange::Claim(k.clone())))
        .collect()
}

/// Who holds a key: the aggregate, and the version of the stream that claimed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyHolder {
    /// The key.
    #[serde(flatten)]
    pub key: UniqueKey,
    /// The aggregate that holds it.
    pub aggregate_id: AggregateId,
    /// The version of the aggregate's stream that claimed it.
    pub version: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sku(value: &str) -> UniqueKey {
        UniqueKey::new("sku", value)
    }

    #[test]
    fn a_moved_key_is_released_before_the_new_one_is_claimed() {
        assert_eq!(
            key_changes(&[sku("A")], &[sku("B")]),
            vec![KeyChange::Release(sku("A")), KeyChange::Claim(sku("B"))]
        );
        assert!(key_changes(&[sku("A")], &[sku("A")]).is_empty());
        assert_eq!(
            key_changes(&[], &[sku("B"), sku("A"), sku("A")]),
            vec![KeyChange::Claim(sku("A")), KeyChange::Claim(sku("B"))]
        );
    }

    #[test]
    fn a_key_space_is_a_plain_name_and_a_value_is_bounded() {
        assert!(check_unique_key(&sku("ABC-1")).is_ok());
        assert!(check_unique_key(&UniqueKey::new("Sku", "x")).is_err());
        assert!(check_unique_key(&UniqueKey::new("", "x")).is_err());
        assert!(check_unique_key(&sku("")).is_err());
        assert!(check_unique_key(&sku(&"x".repeat(MAX_KEY_VALUE_LEN + 1))).is_err());
    }
}
