//! Writes consumer positions in the background: runs of versions, many per write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use crate::contracts::event::{ConsumerPositions, PositionRun};
use crate::model::aggregate_id::AggregateId;

/// One consumer's runs of versions (`from`, `to`) on one aggregate, in order.
type ConsumerRuns = (Arc<str>, Vec<(u64, u64)>);

/// Positions not written yet, and the callers waiting for them to be.
#[derive(Debug, Default)]
struct Pending {
    /// Per aggregate, per consumer, the runs of versions handled, in order.
    runs: HashMap<AggregateId, Vec<ConsumerRuns>>,
    /// The consumers' names, each allocated once.
    names: Vec<Arc<str>>,
    flushed: Vec<oneshot::Sender<()>>,
}

impl Pending {
    fn add(&mut self, consumer: &str, aggregate: &AggregateId, version: u64) {
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
                consumers.push((name, Vec::new()));
                consumers.len() - 1
            }
        };
        let runs = &mut consumers[at].1;
        match runs.last_mut() {
            Some((_, to)) if version == *to + 1 => *to = version,
            _ => runs.push((version, version)),
        }
    }

    /// The round's runs, borrowing the names and aggregates this round holds.
    fn runs(&self) -> Vec<PositionRun<'_>> {
        self.runs
            .iter()
            .flat_map(|(aggregate, consumers)| {
                consumers.iter().flat_map(move |(consumer, runs)| {
                    runs.iter().map(move |&(from, to)| PositionRun {
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
            .add(consumer, aggregate, version);
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
        let round = {
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
        let runs = round.runs();
        if !runs.is_empty() {
            if let Err(error) = store.advance_runs(&runs).await {
                tracing::warn!(%error, runs = runs.len(), "could not record consumer positions; catch-up will deliver those streams again");
            }
        }
        drop(runs);
        for done in round.flushed {
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
            pending.add("p", &aggregate, version);
        }
        pending.add("q", &aggregate, 4);
        let mut spans: Vec<(&str, u64, u64)> = pending
            .runs()
            .iter()
            .map(|run| (run.consumer, run.from, run.to))
            .collect();
        spans.sort();
        assert_eq!(spans, vec![("p", 1, 3), ("p", 5, 6), ("q", 4, 4)]);
        assert_eq!(pending.names.len(), 2, "each name is kept once");
    }
}
