//! A processor holds its partitions while its store answers, and gives them up while it
//! does not.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wow_core::eventsourcing::EventStore;
use wow_core::AggregateId;
use wow_nats::{LeaseConfig, OwnedPartitions, PartitionLeases};

/// How often a processor checks that its store answers.
const STORE_PROBE_EVERY: Duration = Duration::from_secs(1);

/// How long a probe of the store may take before it counts as failed.
const STORE_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Failed probes in a row after which a processor gives its partitions up.
const STORE_PROBE_FAILURES: u32 = 3;

/// Holds `leases` and publishes what they own into `owned`, for as long as `store` answers.
/// After [`STORE_PROBE_FAILURES`] failed probes in a row the node gives every partition up
/// (the consumers stop, the leases are released, so live processors take them at once), and
/// leases again once the store answers: a processor that cannot append would otherwise keep
/// its partitions' commands waiting. On `stop`, releases the leases.
pub(super) async fn hold_partitions(
    jetstream: async_nats::jetstream::Context,
    config: LeaseConfig,
    leases: PartitionLeases,
    store: Arc<dyn EventStore>,
    owned: watch::Sender<OwnedPartitions>,
    stop: CancellationToken,
) {
    let probe = AggregateId::new("wow", "health", "probe", "(probe)");
    let mut leases = Some(leases);
    let mut failures = 0u32;
    let mut probe_every = tokio::time::interval(STORE_PROBE_EVERY);
    loop {
        let mut leased = leases.as_ref().map(PartitionLeases::owned);
        if let Some(leased) = leased.as_mut() {
            owned.send_replace(leased.borrow_and_update().clone());
        }
        tokio::select! {
            () = stop.cancelled() => break,
            changed = async {
                match leased.as_mut() {
                    Some(leased) => leased.changed().await,
                    None => std::future::pending().await,
                }
            } => {
                if changed.is_err() {
                    tracing::error!("the lease keeper stopped; leasing again");
                    leases = None;
                }
                continue;
            }
            _ = probe_every.tick() => {}
        }
        let answers = matches!(
            tokio::time::timeout(STORE_PROBE_TIMEOUT, store.last(&probe)).await,
            Ok(Ok(_))
        );
        failures = if answers {
            0
        } else {
            failures.saturating_add(1)
        };
        if failures >= STORE_PROBE_FAILURES {
            if let Some(held) = leases.take() {
                tracing::warn!("the store does not answer: giving every partition up");
                owned.send_replace(OwnedPartitions::new());
                if let Err(error) = held.stop().await {
                    tracing::warn!(%error, "some leases were not released; they expire by themselves");
                }
            }
        } else if answers && leases.is_none() {
            match PartitionLeases::start(&jetstream, config.clone()).await {
                Ok(started) => {
                    tracing::info!("the store answers: leasing partitions again");
                    leases = Some(started);
                }
                Err(error) => tracing::warn!(%error, "cannot lease partitions yet"),
            }
        }
    }
    owned.send_replace(OwnedPartitions::new());
    if let Some(held) = leases {
        if let Err(error) = held.stop().await {
            tracing::warn!(%error, "some leases were not released; they expire by themselves");
        }
    }
}
