//! Runs a [`PartitionConsumer`] for every partition the node owns, and stops each as soon as
//! the node no longer does.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::lease::{Fence, OwnedPartitions};
use crate::worker::PartitionConsumer;

/// How long a partition whose consumer failed waits before it is consumed again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Follows `owned` (a [`PartitionLeases`](crate::PartitionLeases)' set) until it closes or
/// `stop` is cancelled: starts consuming each partition whose lease appears, and stops each
/// one the moment its [`Fence`] is lost (the lease ended, expired locally, or was given
/// up), whether or not the set has changed yet. Returns once every partition consumer has
/// ended.
pub async fn supervise(
    consumer: PartitionConsumer,
    mut owned: watch::Receiver<OwnedPartitions>,
    stop: CancellationToken,
) {
    let mut running: BTreeMap<u32, (Fence, CancellationToken)> = BTreeMap::new();
    let mut tasks = JoinSet::new();
    loop {
        let now: OwnedPartitions = owned.borrow_and_update().clone();
        running.retain(|partition, (fence, token)| {
            let kept =
                now.get(partition) == Some(fence) && fence.is_valid() && !token.is_cancelled();
            if !kept {
                token.cancel();
            }
            kept
        });
        for (&partition, fence) in &now {
            if running.contains_key(&partition) || !fence.is_valid() {
                continue;
            }
            // Cancelled when the fence is lost, and with the whole node.
            let mine = stop.child_token();
            running.insert(partition, (fence.clone(), mine.clone()));
            let lost = fence.clone();
            let cancel = mine.clone();
            tasks.spawn(async move {
                tokio::select! {
                    () = lost.lost() => cancel.cancel(),
                    () = cancel.cancelled() => {}
                }
            });
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
                consumer.stalled().clear(partition);
                tracing::info!(partition, "stopped consuming the partition");
            });
        }
        tokio::select! {
            changed = owned.changed() => if changed.is_err() { break },
            () = stop.cancelled() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    for (_, token) in running.values() {
        token.cancel();
    }
    while tasks.join_next().await.is_some() {}
}
