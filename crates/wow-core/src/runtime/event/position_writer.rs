//! Writes consumer positions in the background, in order, many per write.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::contracts::event::ConsumerPositions;
use crate::model::aggregate_id::AggregateId;

/// One position to record: `consumer` handled `version` of `aggregate`.
pub(crate) type Advance = (String, AggregateId, u64);

enum Job {
    Advance(Advance),
    Flush(oneshot::Sender<()>),
}

/// Hands position updates to a task that writes them in arrival order, batching whatever has
/// queued up into one [`ConsumerPositions::advance_many`], so a delivery does not wait for its
/// position (unless 16,384 are queued: then it waits for room). A position is a resume point, so one lost in a crash only makes catch-up deliver
/// a stream again, which the consumer's processed-message record ignores.
#[derive(Debug, Clone)]
pub(crate) struct PositionWriter {
    jobs: Option<mpsc::Sender<Job>>,
    positions: Arc<dyn ConsumerPositions>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Advance(advance) => f.debug_tuple("Advance").field(advance).finish(),
            Job::Flush(_) => f.write_str("Flush"),
        }
    }
}

const MAX_BATCH: usize = 1024;

/// Positions queued at most: past it, a delivery waits for the writer (memory stays bounded
/// when the store is slower than the consumers).
const QUEUE: usize = 16 * MAX_BATCH;

impl PositionWriter {
    /// A writer into `positions`: a background task when a tokio runtime is running, else
    /// writes in line.
    pub(crate) fn start(positions: Arc<dyn ConsumerPositions>) -> Self {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Self {
                jobs: None,
                positions,
            };
        };
        let (jobs, mut queue) = mpsc::channel::<Job>(QUEUE);
        let store = positions.clone();
        runtime.spawn(async move {
            while let Some(first) = queue.recv().await {
                let mut batch = Vec::new();
                let mut flushed = Vec::new();
                let mut next = Some(first);
                while let Some(job) = next.take() {
                    match job {
                        Job::Advance(advance) => batch.push(advance),
                        Job::Flush(done) => flushed.push(done),
                    }
                    if batch.len() < MAX_BATCH {
                        next = queue.try_recv().ok();
                    }
                }
                if !batch.is_empty() {
                    if let Err(error) = store.advance_many(&batch).await {
                        tracing::warn!(%error, positions = batch.len(), "could not record consumer positions; catch-up will deliver those streams again");
                    }
                }
                for done in flushed {
                    let _ = done.send(());
                }
            }
        });
        Self {
            jobs: Some(jobs),
            positions,
        }
    }

    /// Queues `advance` (written in line when there is no background task).
    pub(crate) async fn advance(&self, advance: Advance) {
        match &self.jobs {
            Some(jobs) if jobs.send(Job::Advance(advance.clone())).await.is_ok() => {}
            _ => {
                if let Err(error) = self.positions.advance_many(&[advance]).await {
                    tracing::warn!(%error, "could not record a consumer position");
                }
            }
        }
    }

    /// Returns once every position queued before it is written (or failed to be).
    pub(crate) async fn flush(&self) {
        let Some(jobs) = &self.jobs else { return };
        let (done, written) = oneshot::channel();
        if jobs.send(Job::Flush(done)).await.is_ok() {
            let _ = written.await;
        }
    }

    /// The positions written to.
    pub(crate) fn positions(&self) -> &Arc<dyn ConsumerPositions> {
        &self.positions
    }
}
