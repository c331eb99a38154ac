//! Writes consumer positions in the background: runs of versions, many per write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use wow_core::event::{ConsumerPositions, HandledVersions, PositionRun};
use wow_core::AggregateId;

/// The versions one consumer handled of one aggregate in this round.
type ConsumerRuns = (Arc<str>, HandledVersions);

/// Positions not written yet, and the callers waiting for them to be.
#[derive(Debug, Default)]
struct Pending {
    /// Per aggregate, per consumer, the versions handled, as sorted runs.
    runs: HashMap<AggregateId, Vec<ConsumerRuns>>,
    /// The consumers' names, each allocated once.
    names: Vec<Arc<str>>,
    flushed: Vec<oneshot::Sender<()>>,
}

impl Pending {
    /// Adds that `consumer` handled `from..=to` of `aggregate`.
    fn add(&mut self, consumer: &str, aggregate: &AggregateId, from: u64, to: u64) {
        let name = match self.names.iter().find(|name| &***name == consumer) {
            Some(name) => name.clone(),
            None => {
                let name: Arc<str> = Arc::from(consumer);
                self.names.push(name.clone());
                name
            }
        };
        let consumers = match self.runs.get_mut(aggregate) {
            Some(consumers) => consumers,
            None => self.runs.entry(aggregate.clone()).or_default(),
        };
        let at = match consumers.iter().position(|(of, _)| *of == name) {
            Some(at) => at,
            None => {
                consumers.push((name, HandledVersions::new()));
                consumers.len() - 1
            }
        };
        consumers[at].1.add(from, to);
    }

    /// The round's runs, borrowing the names and aggregates this round holds.
    fn runs(&self) -> Vec<PositionRun<'_>> {
        self.runs
            .iter()
            .flat_map(|(aggregate, consumers)| {
                consumers.iter().flat_map(move |(consumer, handled)| {
                    handled.runs().map(move |(from, to)| PositionRun {
                        consumer,
                        aggregate,
                        from,
                        to,
                    })
                })
            })
            .collect()
    }
}

/// Hands position updates to a task that writes them with one
/// [`ConsumerPositions::advance_runs`] per round. While a round is being written the next
/// one gathers, folding each consumer's consecutive versions of an aggregate into one run:
/// the store sees one write per aggregate per round however fast events come (versions that
/// arrive out of order, from catch-up and live deliveries side by side, are merged too), and
/// memory is bounded by the aggregates in flight, not by the events. A delivery never waits
/// for its position. A round the store could not take is put back and written with a later
/// round (writes are order-free), so an outage of the store loses no position. A position is
/// a resume point, so one lost in a crash only makes catch-up deliver a stream again, which
/// the consumer's processed-message record ignores.
#[derive(Debug, Clone)]
pub(crate) struct PositionWriter {
    /// What is to be written, and the task's wake-up (one pending wake-up is enough); the
    /// task ends once every writer is dropped.
    background: Option<(Arc<Mutex<Pending>>, mpsc::Sender<()>)>,
    positions: Arc<dyn ConsumerPositions>,
}

impl PositionWriter {
    /// A writer into `positions`: a background task when a tokio runtime is running, else
    /// writes in line.
    pub(crate) fn start(positions: Arc<dyn ConsumerPositions>) -> Self {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Self {
                background: None,
                positions,
            };
        };
        let pending = Arc::new(Mutex::new(Pending::default()));
        let (wake, woken) = mpsc::channel(1);
        runtime.spawn(write_rounds(pending.clone(), woken, positions.clone()));
        Self {
            background: Some((pending, wake)),
            positions,
        }
    }

    /// Queues that `consumer` handled `version` of `aggregate` (written in line when there
    /// is no background task).
    pub(crate) async fn advance(&self, consumer: &str, aggregate: &AggregateId, version: u64) {
        let Some((pending, wake)) = &self.background else {
            if let Err(error) = self.positions.advance(consumer, aggregate, version).await {
                tracing::warn!(%error, "could not record a consumer position");
            }
            return;
        };
        pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(consumer, aggregate, version, version);
        let _ = wake.try_send(());
    }

    /// Returns once every position queued before it is written (or failed to be).
    pub(crate) async fn flush(&self) {
        let Some((pending, wake)) = &self.background else {
            return;
        };
        let (done, written) = oneshot::channel();
        pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .flushed
            .push(done);
        let _ = wake.try_send(());
        let _ = written.await;
    }

    /// The positions written to.
    pub(crate) fn positions(&self) -> &Arc<dyn ConsumerPositions> {
        &self.positions
    }
}

/// The longest wait before a round the store refused is written again.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(2);

/// Writes what has gathered, round after round, until every writer is dropped. A round the
/// store refuses is put back into what is pending and tried again after a pause that doubles
/// up to [`MAX_RETRY_DELAY`].
async fn write_rounds(
    pending: Arc<Mutex<Pending>>,
    mut woken: mpsc::Receiver<()>,
    store: Arc<dyn ConsumerPositions>,
) {
    let mut failures = 0u32;
    let mut again = false;
    while again || woken.recv().await.is_some() {
        let mut round = {
            let mut pending = pending.lock().unwrap_or_else(|p| p.into_inner());
            let names = pending.names.clone();
            std::mem::replace(
                &mut *pending,
                Pending {
                    names,
                    ..Pending::default()
                },
            )
        };
        let flushed = std::mem::take(&mut round.flushed);
        let runs = round.runs();
        let written = if runs.is_empty() {
            Ok(())
        } else {
            store.advance_runs(&runs).await
        };
        for done in flushed {
            let _ = done.send(());
        }
        again = false;
        if let Err(error) = written {
            failures = failures.saturating_add(1);
            tracing::warn!(%error, runs = runs.len(), failures, "could not record consumer positions; trying again");
            {
                let mut pending = pending.lock().unwrap_or_else(|p| p.into_inner());
                for run in &runs {
                    pending.add(run.consumer, run.aggregate, run.from, run.to);
                }
            }
            drop(runs);
            let pause = Duration::from_millis(50 << failures.min(6)).min(MAX_RETRY_DELAY);
            tokio::time::sleep(pause).await;
            // Once every writer is gone nobody reads these positions here any more.
            again = !woken.is_closed();
        } else {
            failures = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_fold_into_sorted_runs_and_a_gap_starts_another() {
        let aggregate = AggregateId::new("c", "a", "x", "t");
        let mut pending = Pending::default();
        for version in [1, 2, 3, 6, 5, 9] {
            pending.add("p", &aggregate, version, version);
        }
        pending.add("q", &aggregate, 4, 4);
        let mut spans: Vec<(&str, u64, u64)> = pending
            .runs()
            .iter()
            .map(|run| (run.consumer, run.from, run.to))
            .collect();
        spans.sort();
        assert_eq!(
            spans,
            vec![("p", 1, 3), ("p", 5, 6), ("p", 9, 9), ("q", 4, 4)]
        );
        assert_eq!(pending.names.len(), 2, "each name is kept once");
    }
}

#[cfg(test)]
mod retry_tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use async_trait::async_trait;

    use super::*;
    use wow_core::event::{ConsumerStoreError, InMemoryConsumerPositions};
    use wow_core::eventsourcing::GlobalPosition;

    /// Positions in memory that refuse the first `refusals` writes.
    #[derive(Debug, Default)]
    struct Refusing {
        inner: InMemoryConsumerPositions,
        refusals: AtomicU32,
    }

    #[async_trait]
    impl ConsumerPositions for Refusing {
        async fn positions(
            &self,
            consumer: &str,
            aggregates: &[AggregateId],
        ) -> Result<std::collections::HashMap<AggregateId, u64>, ConsumerStoreError> {
            self.inner.positions(consumer, aggregates).await
        }

        async fn advance_runs(&self, runs: &[PositionRun<'_>]) -> Result<(), ConsumerStoreError> {
            let left = self.refusals.load(Ordering::SeqCst);
            if left > 0 {
                self.refusals.store(left - 1, Ordering::SeqCst);
                return Err(ConsumerStoreError::Unavailable(
                    "the database is down".into(),
                ));
            }
            self.inner.advance_runs(runs).await
        }

        async fn reset(&self, consumer: &str) -> Result<(), ConsumerStoreError> {
            self.inner.reset(consumer).await
        }

        async fn feed_cursor(&self, reader: &str) -> Result<GlobalPosition, ConsumerStoreError> {
            self.inner.feed_cursor(reader).await
        }

        async fn save_feed_cursor(
            &self,
            reader: &str,
            position: GlobalPosition,
        ) -> Result<(), ConsumerStoreError> {
            self.inner.save_feed_cursor(reader, position).await
        }
    }

    #[tokio::test]
    async fn a_round_the_store_refused_is_written_later() {
        let store = Arc::new(Refusing {
            refusals: AtomicU32::new(2),
            ..Refusing::default()
        });
        let writer = PositionWriter::start(store.clone());
        let aggregate = AggregateId::new("c", "a", "x", "t");
        for version in 1..=5 {
            writer.advance("view", &aggregate, version).await;
        }
        writer.flush().await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let found = store
                .positions("view", std::slice::from_ref(&aggregate))
                .await
                .unwrap_or_default();
            if found.get(&aggregate) == Some(&5) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the refused round was never written again: {found:?}"
            );
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
