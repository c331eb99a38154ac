//! Which partition a command belongs to: a stable hash of its aggregate, the same in every
//! process and every build, so that one aggregate's commands always meet one processor.

use wow_core::command::JsonCommand;
use wow_core::deadline::aggregate_hash;
use wow_core::AggregateId;
use xxhash_rust::xxh3::Xxh3;

/// The partition of the aggregate (tenant, aggregate name, id) among `partitions` (at
/// least 1).
///
/// The hash is [`aggregate_hash`], which the stores also keep with each deadline row, so a
/// processor reads only its own partitions' deadlines (SPEC DM-6).
pub fn partition_of(tenant_id: &str, aggregate_name: &str, id: &str, partitions: u32) -> u32 {
    (aggregate_hash(tenant_id, aggregate_name, id) % u64::from(partitions.max(1))) as u32
}

/// The partition of `command`'s aggregate.
pub fn command_partition(command: &JsonCommand, partitions: u32) -> u32 {
    let aggregate = &command.aggregate_id;
    partition_of(
        &aggregate.tenant_id,
        &aggregate.aggregate_name,
        &aggregate.id,
        partitions,
    )
}

/// A request's token in its command's subject: 32 hex digits of a 128-bit hash of (context,
/// tenant, aggregate name, aggregate id, request id), so that any request id (any
/// character, any length) makes a valid subject token of one length. Two requests in
/// transit at once share a token with odds of about 2^-128; the cost would be a look-up of
/// one answering `IN_FLIGHT` while the other is in transit.
pub fn request_token(aggregate_id: &AggregateId, request_id: &str) -> String {
    let mut hasher = Xxh3::new();
    for part in [
        aggregate_id.context_name.as_str(),
        &aggregate_id.tenant_id,
        &aggregate_id.aggregate_name,
        &aggregate_id.id,
        request_id,
    ] {
        hasher.update(part.as_bytes());
        hasher.update(&[0xff]);
    }
    format!("{:032x}", hasher.digest128())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where ("t", "account", "a-1") goes among 2^20 partitions, in every build.
    const PINNED: u32 = 12338;

    #[test]
    fn the_partition_is_stable_and_within_range() {
        // Pinned: a change here would send a running deployment's aggregates elsewhere.
        assert_eq!(partition_of("t", "account", "a-1", 1 << 20), PINNED);
        for id in 0..1000 {
            assert!(partition_of("t", "account", &id.to_string(), 7) < 7);
        }
        assert_ne!(
            partition_of("ab", "c", "x", 1 << 30),
            partition_of("a", "bc", "x", 1 << 30)
        );
        assert_eq!(partition_of("t", "account", "a", 0), 0);
    }

    #[test]
    fn a_request_token_is_stable_fixed_length_hex_and_names_one_request() {
        let account = AggregateId::new("bank", "account", "a-1", "t");
        let token = request_token(&account, "dep 1.*>");
        assert_eq!(token.len(), 32);
        assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(token, request_token(&account, "dep 1.*>"));
        assert_ne!(token, request_token(&account, "dep 2"));
        let other_tenant = AggregateId::new("bank", "account", "a-1", "u");
        assert_ne!(token, request_token(&other_tenant, "dep 1.*>"));
    }

    #[test]
    fn aggregates_spread_over_the_partitions() {
        let mut counts = [0u32; 16];
        for id in 0..16_000 {
            counts[partition_of("tenant", "account", &format!("acc-{id}"), 16) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&n| (800..1200).contains(&n)),
            "{counts:?}"
        );
    }
}
