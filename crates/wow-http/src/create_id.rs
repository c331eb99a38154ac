//! The id of an aggregate created without one (`POST /{aggregate}/{command}` with a
//! `Command-Request-Id` and no `Command-Aggregate-Id`).
//!
//! A server-generated id would make every resend of such a create open another aggregate:
//! the request id is only unique within one aggregate (SPEC ID-3), so a new id each time
//! would never collide with the first attempt. Deriving the id from the intent instead makes
//! a resend land on the same aggregate, where the append (or the recorded decision) answers
//! it as a duplicate of the first attempt (SPEC ES-4).

use sha2::{Digest, Sha256};
use uuid::{Builder, Uuid};

/// Separates this derivation from any other hash of the same fields; bump it only with a
/// migration, since a changed derivation gives resends of old intents new aggregates.
const DOMAIN: &[u8] = b"wow-rs/create-aggregate-id/v1";

/// The aggregate id of a create of `aggregate_name` in `tenant_id` with `request_id` and no
/// id of its own: the same inputs always give the same id, different inputs different ids
/// (short of a SHA-256 collision), in hyphenated UUID form.
///
/// When `request_id` is itself a UUIDv7, the id is a UUIDv7 with the same millisecond, so
/// the ids stay ordered by the time of their intents (random keys slow the
/// stores' unique indexes); otherwise it is a UUIDv8 made of the hash alone.
pub fn derived_aggregate_id(tenant_id: &str, aggregate_name: &str, request_id: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(DOMAIN);
    // Length prefixes: ("ab", "c") and ("a", "bc") must not hash alike.
    for part in [tenant_id, aggregate_name, request_id] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let hash = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&hash[..16]);
    let uuid = match v7_millis(request_id) {
        Some(millis) => {
            let mut rest = [0u8; 10];
            rest.copy_from_slice(&hash[..10]);
            Builder::from_unix_timestamp_millis(millis, &rest).into_uuid()
        }
        None => Builder::from_custom_bytes(bytes).into_uuid(),
    };
    uuid.hyphenated().to_string()
}

/// The millisecond of `request_id` if it is a UUIDv7.
fn v7_millis(request_id: &str) -> Option<u64> {
    let uuid = Uuid::try_parse(request_id).ok()?;
    if uuid.get_version_num() != 7 {
        return None;
    }
    let b = uuid.as_bytes();
    Some(u64::from_be_bytes([
        0, 0, b[0], b[1], b[2], b[3], b[4], b[5],
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_intent_gets_the_same_id_and_another_intent_another() {
        let id = derived_aggregate_id("(0)", "account", "open-1");
        assert_eq!(id, derived_aggregate_id("(0)", "account", "open-1"));
        assert_ne!(id, derived_aggregate_id("(0)", "account", "open-2"));
        assert_ne!(id, derived_aggregate_id("t-a", "account", "open-1"));
        assert_ne!(id, derived_aggregate_id("(0)", "ledger", "open-1"));
        assert_ne!(
            derived_aggregate_id("ab", "c", "x"),
            derived_aggregate_id("a", "bc", "x")
        );
        assert!(crate::ids::Id::parse(&id).is_ok());
    }

    #[test]
    fn a_uuid_v7_request_id_keeps_its_millisecond() {
        let early = "01920000-0000-7000-8000-000000000000";
        let late = "01930000-0000-7000-8000-000000000000";
        let a = derived_aggregate_id("(0)", "account", early);
        let b = derived_aggregate_id("(0)", "account", late);
        assert!(a < b, "{a} sorts before {b}");
        assert!(a.starts_with("01920000-0000-7"), "{a}");
        let plain = derived_aggregate_id("(0)", "account", "open-1");
        assert_eq!(plain.as_bytes()[14], b'8', "a UUIDv8: {plain}");
    }
}
