//! One phase of load: every worker on its own connection takes tickets until the count or
//! the time is up, and counts what it saw; the counts are merged at the end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::client::{Answer, Body, Connection, Target};
use super::duration::Limit;
use super::error::BenchError;
use super::progress::Progress;
use super::tally::Tally;
use super::workload::Workload;

/// How long a worker whose connection cannot be opened again waits before it tries.
const RECONNECT_PAUSE: Duration = Duration::from_millis(10);

/// What a phase did.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// Every worker's counts, merged.
    pub(crate) tally: Tally,
    /// From the first request to the last answer.
    pub(crate) elapsed: Duration,
}

/// The tickets of a phase: each request takes the next one, until the limit.
#[derive(Debug)]
struct Plan {
    count: Option<u64>,
    deadline: Option<Instant>,
    issued: AtomicU64,
    /// With a rate: ticket `n` is due `n` paces after the start.
    pace: Option<Duration>,
    start: Instant,
}

impl Plan {
    fn new(limit: Limit, start: Instant) -> Self {
        let (count, deadline) = match limit {
            Limit::Count(n) => (Some(n), None),
            Limit::For(time) => (None, Some(start + time)),
        };
        Self {
            count,
            deadline,
            issued: AtomicU64::new(0),
            pace: None,
            start,
        }
    }

    /// This plan, handing out one ticket per `pace` (an open schedule) when given one.
    fn paced(self, pace: Option<Duration>) -> Self {
        Self { pace, ..self }
    }

    /// When `ticket` is due: at once without a pace.
    fn due(&self, ticket: u64) -> Option<Instant> {
        let pace = self.pace?;
        let offset = pace.checked_mul(u32::try_from(ticket).unwrap_or(u32::MAX))?;
        Some(self.start + offset)
    }

    /// The next ticket, or `None` when the phase is over.
    fn next(&self) -> Option<u64> {
        if self
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
        {
            return None;
        }
        let ticket = self.issued.fetch_add(1, Ordering::Relaxed);
        match self.count {
            Some(count) if ticket >= count => None,
            _ => Some(ticket),
        }
    }
}

/// What every worker of a phase shares.
#[derive(Debug)]
struct Shared {
    workload: Workload,
    target: Target,
    plan: Plan,
    start: Instant,
    completed: Arc<AtomicU64>,
}

/// Runs `workload` on `connections` connections to `target` until `limit`, showing
/// `progress`. The connections are opened before the clock starts.
pub(crate) async fn run(
    target: &Target,
    workload: Workload,
    connections: usize,
    limit: Limit,
    pace: Option<Duration>,
    progress: Progress,
) -> Result<Outcome, BenchError> {
    let mut opened = Vec::with_capacity(connections);
    for _ in 0..connections {
        let connection = Connection::open(target)
            .await
            .map_err(|source| BenchError::Connect {
                target: target.address.clone(),
                source,
            })?;
        opened.push(connection);
    }
    let start = Instant::now();
    let shared = Arc::new(Shared {
        workload,
        target: target.clone(),
        plan: Plan::new(limit, start).paced(pace),
        start,
        completed: Arc::new(AtomicU64::new(0)),
    });
    let ticker = progress.follow(Arc::clone(&shared.completed), start);
    let workers: Vec<_> = opened
        .into_iter()
        .map(|connection| tokio::spawn(work(Arc::clone(&shared), connection)))
        .collect();
    let mut tally = Tally::new()?;
    let mut failure = None;
    for worker in workers {
        match worker.await {
            Ok(Ok(counted)) => tally.merge(&counted),
            Ok(Err(error)) => failure = Some(error),
            Err(error) => failure = Some(error.into()),
        }
    }
    let elapsed = start.elapsed();
    ticker.finish();
    match failure {
        Some(error) => Err(error),
        None => Ok(Outcome { tally, elapsed }),
    }
}

/// One worker: a ticket, a request, its answer counted, until the plan is done. A failed
/// connection is opened again; while it cannot be, each ticket counts as `Transport`.
async fn work(shared: Arc<Shared>, connection: Connection<Body>) -> Result<Tally, BenchError> {
    let mut tally = Tally::new()?;
    let mut connection = Some(connection);
    while let Some(ticket) = shared.plan.next() {
        let request = shared.workload.request(ticket)?;
        if !matches!(&connection, Some(live) if !live.is_closed()) {
            connection = Connection::open(&shared.target).await.ok();
        }
        let Some(live) = connection.as_mut() else {
            tally.record(shared.start.elapsed(), None);
            tally.error("Transport");
            shared.completed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(RECONNECT_PAUSE).await;
            continue;
        };
        // On a schedule, latency counts from when the request was due.
        let sent = match shared.plan.due(ticket) {
            Some(due) => {
                tokio::time::sleep_until(due.into()).await;
                due
            }
            None => Instant::now(),
        };
        let answer = live.send(request).await;
        let done = Instant::now();
        let since_start = done.duration_since(shared.start);
        match answer {
            Ok(Answer::Success) => tally.record(since_start, Some(done - sent)),
            Ok(Answer::Refused(code)) => {
                tally.record(since_start, Some(done - sent));
                tally.error(&code);
            }
            Err(_) => {
                tally.record(since_start, None);
                tally.error("Transport");
                connection = None;
            }
        }
        shared.completed.fetch_add(1, Ordering::Relaxed);
    }
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counted_plan_hands_out_each_ticket_once() {
        let plan = Plan::new(Limit::Count(3), Instant::now());
        let tickets: Vec<_> = std::iter::from_fn(|| plan.next()).collect();
        assert_eq!(tickets, vec![0, 1, 2]);
        assert_eq!(plan.next(), None);
    }

    #[test]
    fn a_paced_plan_spaces_its_tickets_by_the_pace() {
        let start = Instant::now();
        let plan = Plan::new(Limit::Count(3), start).paced(Some(Duration::from_millis(10)));
        assert_eq!(plan.due(0), Some(start));
        assert_eq!(plan.due(2), Some(start + Duration::from_millis(20)));
        assert_eq!(Plan::new(Limit::Count(3), start).due(2), None);
    }

    #[test]
    fn a_timed_plan_ends_at_its_deadline() {
        let plan = Plan::new(Limit::For(Duration::from_millis(1)), Instant::now());
        assert_eq!(plan.next(), Some(0));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(plan.next(), None);
    }
}
