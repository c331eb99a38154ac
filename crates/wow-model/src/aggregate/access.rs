//! Owners and spaces as access boundaries inside a tenant (SPEC TN-2): the owner and space an
//! aggregate was created for, and whether a caller bound to an owner or a space reaches it.

use std::collections::BTreeMap;

use crate::aggregate_id::AggregateId;
use crate::command::{OWNER_ID_HEADER, SPACE_ID_HEADER};
use crate::error_code::ErrorCode;
use crate::event::DomainEventStream;

/// The owner and space an aggregate belongs to (Wow's `ownerId`, `spaceId`), fixed by its
/// first stream; empty when its create named none (an aggregate created before callers were
/// bound to owners).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AggregateScope {
    /// The owner, empty for none.
    pub owner_id: String,
    /// The space, empty for none.
    pub space_id: String,
}

impl AggregateScope {
    /// The scope a stream's header records (its command's owner and space).
    pub fn of_header(header: &BTreeMap<String, String>) -> Self {
        let named = |key: &str| header.get(key).cloned().unwrap_or_default();
        Self {
            owner_id: named(OWNER_ID_HEADER),
            space_id: named(SPACE_ID_HEADER),
        }
    }

    /// The scope of the aggregate whose first stream is `first`.
    pub fn of_first_stream(first: &DomainEventStream) -> Self {
        Self::of_header(&first.header)
    }
}

/// Why a caller may not reach an aggregate: `IllegalAccessOwnerAggregate` or
/// `IllegalAccessSpaceAggregate`, with a message that names only the aggregate the caller
/// itself named (nothing of its state, version or request ids).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AccessRefused {
    /// `IllegalAccessOwnerAggregate` or `IllegalAccessSpaceAggregate`.
    pub code: ErrorCode,
    /// For a person.
    pub message: String,
}

/// Whether a caller that names `owner` and `space` (its binding, or the command's
/// `Command-Owner-Id` / `Wow-Space-Id`) reaches the existing aggregate `aggregate_id` of
/// `recorded` scope, as Wow decides it: an owner named and not the aggregate's is
/// `IllegalAccessOwnerAggregate` (an aggregate that records no owner is reached only by a
/// caller naming none); a space named and not the aggregate's, when the aggregate is in a
/// space, is `IllegalAccessSpaceAggregate` (an aggregate whose create named no space is in
/// none, as Wow's aggregates that are not spaced: every space of its owner reaches it).
pub fn check_access(
    owner: Option<&str>,
    space: Option<&str>,
    recorded: &AggregateScope,
    aggregate_id: &AggregateId,
) -> Result<(), AccessRefused> {
    let foreign = |named: Option<&str>, recorded: &str| {
        named.is_some_and(|named| !named.is_empty() && named != recorded)
    };
    if foreign(owner, &recorded.owner_id) {
        return Err(AccessRefused {
            code: ErrorCode::IllegalAccessOwnerAggregate,
            message: format!(
                "aggregate {} of {} is not the caller's owner's",
                aggregate_id.id, aggregate_id.aggregate_name
            ),
        });
    }
    if !recorded.space_id.is_empty() && foreign(space, &recorded.space_id) {
        return Err(AccessRefused {
            code: ErrorCode::IllegalAccessSpaceAggregate,
            message: format!(
                "aggregate {} of {} is not in the caller's space",
                aggregate_id.id, aggregate_id.aggregate_name
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(owner: &str, space: &str) -> AggregateScope {
        AggregateScope {
            owner_id: owner.to_owned(),
            space_id: space.to_owned(),
        }
    }

    #[test]
    fn a_named_owner_or_space_reaches_only_its_own_aggregates() {
        let id = AggregateId::new("bank", "account", "a-1", "t");
        let alice = scope("alice", "s1");
        assert!(check_access(None, None, &alice, &id).is_ok());
        assert!(check_access(Some("alice"), Some("s1"), &alice, &id).is_ok());
        assert!(check_access(Some("alice"), None, &alice, &id).is_ok());
        let owner = check_access(Some("bob"), None, &alice, &id).unwrap_err();
        assert_eq!(owner.code, ErrorCode::IllegalAccessOwnerAggregate);
        let space = check_access(Some("alice"), Some("s2"), &alice, &id).unwrap_err();
        assert_eq!(space.code, ErrorCode::IllegalAccessSpaceAggregate);
        // An aggregate in no space is reached from every space of its owner.
        let spaceless = scope("alice", "");
        assert!(check_access(Some("alice"), Some("s2"), &spaceless, &id).is_ok());
        // An aggregate that records no owner is reached only by a caller naming none.
        let unowned = scope("", "");
        assert!(check_access(None, None, &unowned, &id).is_ok());
        assert!(check_access(Some("alice"), None, &unowned, &id).is_err());
        assert!(check_access(Some(""), Some(""), &unowned, &id).is_ok());
    }
}
