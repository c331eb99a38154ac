//! Writes consumer positions in the background: runs of versions, many per write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use crate::contracts::event::{ConsumerPositions, PositionRun};
use crate::model::aggregate_id::AggregateId;

/// One position to record: `consumer` handled `version` of `aggregate`.
pub(crate) type Advance = (String, AggregateId, u64);

/// Positions not written yet, and the callers waiting for them to be.
#[derive(Debug, Default)]
struct Pending {
    /// Per consumer and aggregate, the runs of versions handled, in order.
    runs: HashMap<(String, AggregateId), Vec<(u64, u64)>>,
    flushed: Vec<oneshot::Sender<()>>,
}

impl Pending {
    fn add(&mut self, (consumer, aggregate, version): Advance) {
        let runs = self.runs.entry((consumer, aggregate)).or_default();
        match runs.last_mut() {
            Some((_, to)) if version == *to + 1 => *to = version,
            _ => runs.push((version, version)),
        }
    }

    fn into_runs(self) -> (Vec<PositionRun>, Vec<oneshot::Sender<()>>) {
        let runs = self
            .runs
            .into_iter()
            .flat_map(|((consumer, aggregate), runs)| {
                runs.into_iter().map(move |(from, to)| PositionRun {
                    consumer: consumer.clone(),
                    aggregate: aggregate.clone(),
                    from,
                    to,
                })
            })
            .collect();
        (runs, self.flushed)
    }
}

/// Hands position updates to a task that writes them with one
/// [`ConsumerPositions::advance_runs`] per round. While a round is being written the next
/// one gathers, folding each consumer's consecutive versions of an aggregate into one run:
/// the store sees one write per aggregate per round however fast events come, and memory is
/// bounded by the aggregates in flight, not by the events. A delivery never waits for its
/// position. A position is a resume point, so one lost in a crash only makes catch-up
/// deliver a stream again, which the consumer's processed-message record ignores.
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

    /// Queues `advance` (written in line when there is no background task).
    pub(crate) async fn advance(&self, advance: Advance) {
        let Some((pending, wake)) = &self.background else {
            if let Err(error) = self.positions.advance_many(&[advance]).await {
                tracing::warn!(%error, "could not record a consumer position");
            }
            return;
        };
        pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(advance);
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

/// Writes what has gathered, round after round, until every writer is dropped.
async fn write_rounds(
    pending: Arc<Mutex<Pending>>,
    mut woken: mpsc::Receiver<()>,
    store: Arc<dyn ConsumerPositions>,
) {
    while woken.recv().await.is_some() {
        let round = std::mem::take(&mut *pending.lock().unwrap_or_else(|p| p.into_inner()));
        let (runs, flushed) = round.into_runs();
        if !runs.is_empty() {
            if let Err(error) = store.advance_runs(&runs).await {
                tracing::warn!(%error, runs = runs.len(), "could not record consumer positions; catch-up will deliver those streams again");
            }
        }
        for done in flushed {
            let _ = done.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_versions_fold_into_a_run_and_a_gap_starts_another() {
        let aggregate = AggregateId::new("c", "a", "x", "t");
        let mut pending = Pending::default();
        for version in [1, 2, 3, 5, 6] {
            pending.add(("p".to_owned(), aggregate.clone(), version));
        }
        pending.add(("q".to_owned(), aggregate.clone(), 4));
        let (mut runs, _) = pending.into_runs();
        runs.sort_by(|a, b| (&a.consumer, a.from).cmp(&(&b.consumer, b.from)));
        let spans: Vec<(&str, u64, u64)> = runs
            .iter()
            .map(|run| (run.consumer.as_str(), run.from, run.to))
            .collect();
        assert_eq!(spans, vec![("p", 1, 3), ("p", 5, 6), ("q", 4, 4)]);
    }
}
