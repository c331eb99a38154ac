//! Runs a [`PartitionConsumer`] for every partition the node owns, and stops each as soon as
//! the node no longer does.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::worker::PartitionConsumer;

/// How long a partition whose consumer failed waits before it is consumed again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The partitions a node owns now, each with the token that is cancelled when the node must
/// stop handling it (its lease ends, or the node gives it up).
pub type OwnedPartitions = BTreeMap<u32, CancellationToken>;

/// Follows `owned` until it closes or `stop` is cancelled: starts consuming each partition
/// that appears, and leaves each one whose token is cancelled. Returns once every partition
/// consumer has ended.
pub async fn supervise(
    consumer: PartitionConsumer,
    mut owned: watch::Receiver<OwnedPartitions>,
    stop: CancellationToken,
) {
    let mut running: BTreeMap<u32, CancellationToken> = BTreeMap::new();
    let mut tasks = JoinSet::new();
    loop {
        let now = owned.borrow_and_update().clone();
        running.retain(|partition, token| {
            let kept = now
                .get(partition)
                .is_some_and(|current| !current.is_cancelled() && !token.is_cancelled());
            if !kept {
                token.cancel();
            }
            kept
        });
        for (&partition, token) in &now {
            if running.contains_key(&partition) || token.is_cancelled() {
                continue;
            }
            // A child: cancelled with the lease, and with the whole node.
            let mine = token.child_token();
            running.insert(partition, mine.clone());
            let consumer = consumer.clone();
            let stop = stop.clone();
            tasks.spawn(async move {
                while !mine.is_cancelled() && !stop.is_cancelled() {
                    // Dropping the run on the node's stop abandons its batch unacknowledged.
                    let ended = tokio::select! {
                        ended = consumer.run(partition, mine.clone()) => ended,
                        () = stop.cancelled() => Ok(()),
                    };
                    if let Err(error) = ended {
                        tracing::warn!(%error, partition, "the partition's consumer failed; starting it again");
                        tokio::select! {
                            () = tokio::time::sleep(RETRY_AFTER) => {}
                            () = mine.cancelled() => {}
                            () = stop.cancelled() => {}
                        }
                    }
                }
                tracing::info!(partition, "stopped consuming the partition");
            });
        }
        tokio::select! {
            changed = owned.changed() => if changed.is_err() { break },
            () = stop.cancelled() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    for token in running.values() {
        token.cancel();
    }
    while tasks.join_next().await.is_some() {}
}
