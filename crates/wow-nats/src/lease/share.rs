//! How many partitions a node aims to hold.

use std::collections::BTreeSet;

/// This node's share: with `L` live nodes sorted by id, the first `N mod L` get
/// `ceil(N / L)`, the rest `floor(N / L)`, so the shares sum to `N`.
pub(crate) fn share_of(partitions: u32, live: &BTreeSet<String>, node_id: &str) -> u32 {
    let nodes = u32::try_from(live.len()).unwrap_or(u32::MAX).max(1);
    let rank = live.iter().position(|id| id == node_id).unwrap_or(0);
    let rank = u32::try_from(rank).unwrap_or(u32::MAX);
    partitions / nodes + u32::from(rank < partitions % nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|id| (*id).to_owned()).collect()
    }

    #[test]
    fn shares_sum_to_the_partition_count() {
        for partitions in 1..20 {
            for count in 1..6 {
                let ids: Vec<String> = (0..count).map(|i| format!("n{i}")).collect();
                let live: BTreeSet<String> = ids.iter().cloned().collect();
                let total: u32 = ids.iter().map(|id| share_of(partitions, &live, id)).sum();
                assert_eq!(
                    total, partitions,
                    "{partitions} partitions over {count} nodes"
                );
            }
        }
    }

    #[test]
    fn a_third_node_gets_a_share_of_four_partitions() {
        let live = nodes(&["a", "b", "c"]);
        assert_eq!(share_of(4, &live, "a"), 2);
        assert_eq!(share_of(4, &live, "b"), 1);
        assert_eq!(share_of(4, &live, "c"), 1);
    }
}
