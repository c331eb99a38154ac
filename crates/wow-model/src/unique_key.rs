//! Unique keys across aggregates (SPEC DM-1): a value (an email, a SKU) an aggregate holds in a
//! named key space of its tenant, so that no other aggregate of that tenant holds it too.
//!
//! An aggregate states which keys its state holds ([`Aggregate::unique_keys`]); the node
//! compares the keys before and after a decision and hands the difference ([`key_changes`])
//! to the store with the stream, which writes both in one atomic write: the store's unique
//! constraint decides between two claimants, never a read first.
//!
//! A key may be claimed for a while only ([`UniqueKey::reserved_until`], Wow's
//! `PreparedValue.ttlAt`): "hold this user name for ten minutes during sign-up". Such a
//! reservation holds the key until its time, judged by the store's clock, and frees it by
//! itself after, unless a later decision of the holder claims the key without a time (confirms
//! it). Another aggregate may take a lapsed reservation, and the first holder's confirmation is
//! then refused like any claim of a taken key.
//!
//! [`Aggregate::unique_keys`]: crate::aggregate::Aggregate::unique_keys

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::aggregate_id::AggregateId;

/// The longest key space name, in bytes.
pub const MAX_KEY_SPACE_LEN: usize = 64;

/// The longest key value, in bytes.
pub const MAX_KEY_VALUE_LEN: usize = 512;

/// One value in one key space of a tenant: `sku` = `ABC-1`. The tenant is the aggregate's.
///
/// Two keys are the same value when their space and value are; `reserved_until` says how
/// long a claim of it lasts, and two keys that differ only there are one value claimed for
/// different times ([`UniqueKey::same_value`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UniqueKey {
    /// The key space: `sku`, `email`. Lowercase ASCII letters, digits, `_`, `-` and `.`.
    pub space: String,
    /// The value, as the domain spells it (normalise it first when `A@x` and `a@x` are one).
    pub value: String,
    /// When a claim of the key lapses, in milliseconds since the Unix epoch: a reservation,
    /// held until then and free after, judged by the store's clock. `None`, the default: the
    /// claim lasts until it is released.
    #[serde(
        default,
        rename = "reservedUntil",
        skip_serializing_if = "Option::is_none"
    )]
    pub reserved_until: Option<i64>,
}

impl UniqueKey {
    /// The key `value` in `space`, claimed until it is released.
    pub fn new(space: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            space: space.into(),
            value: value.into(),
            reserved_until: None,
        }
    }

    /// This key reserved until `deadline` (milliseconds since the Unix epoch): a claim of it
    /// holds the value until then, and the value is free after, unless a later claim of the
    /// same aggregate without a time ([`UniqueKey::new`]) confirmed it first. A deadline
    /// already past reserves nothing.
    pub fn reserved_until(mut self, deadline: i64) -> Self {
        self.reserved_until = Some(deadline);
        self
    }

    /// This key with no reservation time: the value alone, as the stores look it up.
    pub fn confirmed(&self) -> Self {
        Self::new(self.space.clone(), self.value.clone())
    }

    /// Whether `other` is the same value in the same space, whatever either's reservation.
    pub fn same_value(&self, other: &UniqueKey) -> bool {
        self.space == other.space && self.value == other.value
    }

    /// Whether a claim of this key has lapsed at `now` (milliseconds since the Unix epoch):
    /// it is a reservation whose time is not after `now`.
    pub fn lapsed_at(&self, now: i64) -> bool {
        self.reserved_until.is_some_and(|until| until <= now)
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
    /// Take the key for the aggregate, until its [`reserved_until`](UniqueKey::reserved_until)
    /// when it has one. Refused when another aggregate holds it (a lapsed reservation holds
    /// nothing); when this aggregate holds it already, only its reservation time is set to
    /// the claim's (a claim without one confirms a reservation).
    Claim(UniqueKey),
    /// Give the key up. Nothing to do when this aggregate does not hold it.
    Release(UniqueKey),
}

/// The changes that take an aggregate from holding `before` to holding `after`: releases
/// first, then claims, each in key order, so that a key moved within one space (a renamed
/// SKU) is free before the new one is taken.
///
/// A value held before and after is not released; it is claimed again only when its
/// reservation time changed (a reservation confirmed, extended or shortened). A value listed
/// twice counts once, without a reservation time when one of them has none.
pub fn key_changes(before: &[UniqueKey], after: &[UniqueKey]) -> Vec<KeyChange> {
    let mut released: Vec<&UniqueKey> = before
        .iter()
        .filter(|k| !after.iter().any(|a| a.same_value(k)))
        .collect();
    let mut claimed: Vec<&UniqueKey> = after.iter().collect();
    released.sort();
    released.dedup_by(|a, b| a.same_value(b));
    // `None` sorts before `Some`: of one value's listings, the first kept is unreserved.
    claimed.sort();
    claimed.dedup_by(|a, b| a.same_value(b));
    claimed.retain(|k| !before.contains(k));
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
    /// The key, with the holder's reservation time when its claim is a reservation.
    #[serde(flatten)]
    pub key: UniqueKey,
    /// The aggregate that holds it.
    pub aggregate_id: AggregateId,
    /// The version of the aggregate's stream that claimed it.
    pub version: u64,
}

/// What `KeyIndex::claim_keys` (wow-contracts) did with
/// one key: claimed it, found it the aggregate's already, or found another holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "holder", rename_all = "camelCase")]
pub enum KeyClaim {
    /// The key was free (or a lapsed reservation) and is now the aggregate's.
    Claimed,
    /// The aggregate held the key already; nothing changed.
    Held,
    /// Another aggregate holds the key; nothing changed.
    Taken(KeyHolder),
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
    fn a_reservation_is_claimed_again_only_when_its_time_changes() {
        let reserved = sku("A").reserved_until(1_000);
        assert_eq!(
            key_changes(&[], std::slice::from_ref(&reserved)),
            vec![KeyChange::Claim(reserved.clone())]
        );
        assert!(key_changes(
            std::slice::from_ref(&reserved),
            std::slice::from_ref(&reserved)
        )
        .is_empty());
        assert_eq!(
            key_changes(std::slice::from_ref(&reserved), &[sku("A")]),
            vec![KeyChange::Claim(sku("A"))],
            "a confirmation is a claim without a time, never a release"
        );
        assert_eq!(
            key_changes(
                std::slice::from_ref(&reserved),
                &[sku("A").reserved_until(2_000)]
            ),
            vec![KeyChange::Claim(sku("A").reserved_until(2_000))]
        );
        assert_eq!(
            key_changes(std::slice::from_ref(&reserved), &[]),
            vec![KeyChange::Release(reserved.clone())]
        );
        assert_eq!(
            key_changes(&[], &[reserved.clone(), sku("A")]),
            vec![KeyChange::Claim(sku("A"))]
        );
        assert!(reserved.lapsed_at(1_000) && !reserved.lapsed_at(999));
        assert!(!sku("A").lapsed_at(i64::MAX));
        assert!(reserved.same_value(&sku("A")) && reserved.confirmed() == sku("A"));
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
