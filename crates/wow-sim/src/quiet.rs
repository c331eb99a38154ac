//! The quiet phase of one run: faults off, everything in flight lands, then the consumers
//! catch up from the store and failed consumers are retried from their compensation
//! records, round after round, until nothing changes; what cannot settle is a violation.

use std::collections::BTreeMap;
use std::time::Duration;

use wow_core::compensation::{
    CompensationStore, ExecutionFailedStatus, FailureQuery, InMemoryCompensationStore,
};
use wow_core::eventsourcing::InMemoryEventStore;
use wow_core::{AggregateId, DomainEventStream, NamedAggregate};
use wow_runtime::compensation::CompensationScheduler;
use wow_runtime::event::{catch_up, EventDispatcher};

use crate::chaos::{Chaos, FaultKind};
use crate::consumers::SAGA;
use crate::invariants::read_history;
use crate::wiring::{Pipeline, RETRY};

/// Catch-up rounds at most before the quiet phase gives up waiting for the run to settle.
const ROUNDS: usize = 8;

/// Draws whether this run restarts the saga's service with its positions lost once quiet
/// (half the runs that re-run sagas), and records the fault if so: the saga then catches up
/// from the start of history, after every wallet the callers open is open.
pub(crate) fn draw_saga_rerun(chaos: &Chaos) -> bool {
    let rerun_all = chaos.enabled(FaultKind::SagaRerun) && chaos.chance(0.5);
    if rerun_all {
        chaos.record(
            FaultKind::SagaRerun,
            "the saga catches up from the start of history once quiet".to_owned(),
        );
    }
    rerun_all
}

/// Brings the run to quiet: turns faults off, runs the catch-up rounds over `aggregates`
/// (re-running the saga over all history in the first one when `rerun_all`), flags any
/// compensation record left open, and lets what is still in flight land. Returns what could
/// not settle, as violations.
pub(crate) async fn bring_to_quiet(
    pipeline: &Pipeline,
    chaos: &Chaos,
    aggregates: &[AggregateId],
    rerun_all: bool,
) -> Vec<String> {
    chaos.calm();
    let mut violations = Vec::new();
    catch_up_rounds(pipeline, chaos, aggregates, rerun_all, &mut violations).await;
    if let Some(open) = open_compensation(&pipeline.failures).await {
        violations.push(open);
    }
    wait_quiet(chaos).await;
    violations
}

/// Up to [`ROUNDS`] rounds of: wait for quiet, read history, catch every consumer up, retry
/// the compensation records; stops when a round changes nothing, or when history is
/// unreadable or compensation cannot settle (noted in `violations`).
async fn catch_up_rounds(
    pipeline: &Pipeline,
    chaos: &Chaos,
    aggregates: &[AggregateId],
    rerun_all: bool,
    violations: &mut Vec<String>,
) {
    let mut last_count = usize::MAX;
    let scheduler = CompensationScheduler::new(pipeline.dispatcher.clone(), pipeline.raw.clone());
    for round in 0..ROUNDS {
        wait_quiet(chaos).await;
        let history = match read_history(pipeline.raw.as_ref(), aggregates).await {
            Ok(history) => history,
            Err(error) => {
                violations.push(error);
                break;
            }
        };
        if round == 0 && rerun_all {
            rerun_saga_over(&pipeline.dispatcher, &history).await;
        }
        let count: usize = history.values().map(Vec::len).sum();
        let handled = catch_up_consumers(&pipeline.dispatcher, &pipeline.raw, violations).await;
        let before = violations.len();
        let retried = match &scheduler {
            Ok(scheduler) => retry_until_settled(scheduler, &pipeline.failures, violations).await,
            Err(error) => {
                violations.push(format!("no compensation scheduler: {error}"));
                0
            }
        };
        chaos.note(format!(
            "catch-up round {round}: {count} streams, {handled} caught up, {retried} retried"
        ));
        if violations.len() > before {
            // Compensation cannot settle: more rounds would only repeat it.
            break;
        }
        if count == last_count && handled == 0 && retried == 0 {
            break;
        }
        last_count = count;
    }
}

/// Catches every consumer of `dispatcher` up from `raw`, in the dispatcher's order; the
/// number of streams they handled. A failed catch-up is a violation.
async fn catch_up_consumers(
    dispatcher: &EventDispatcher,
    raw: &InMemoryEventStore,
    violations: &mut Vec<String>,
) -> u64 {
    let named = [NamedAggregate::new("sim", "wallet")];
    let mut handled = 0;
    for consumer in dispatcher.consumer_names() {
        match catch_up(dispatcher, &consumer, raw, &named, &mut |_| {}).await {
            Ok(done) => handled += done.streams_handled,
            Err(error) => violations.push(format!("catch-up of {consumer} failed: {error}")),
        }
    }
    handled
}

/// The compensation records not `SUCCEEDED` once quiet, as one violation; `None` when every
/// record succeeded (or the records cannot be read).
async fn open_compensation(failures: &InMemoryCompensationStore) -> Option<String> {
    let open = failures
        .list(&FailureQuery {
            limit: usize::MAX,
            ..FailureQuery::default()
        })
        .await
        .map(|records| {
            records
                .into_iter()
                .filter(|record| record.status != ExecutionFailedStatus::Succeeded)
                .map(|record| {
                    format!(
                        "{}@v{} by {}",
                        record.aggregate_id.id, record.version, record.consumer
                    )
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    (!open.is_empty()).then(|| format!("compensation records left open once quiet: {open:?}"))
}

/// Runs the compensation scheduler in virtual time until no record is `FAILED`; the number
/// of records retried.
async fn retry_until_settled(
    scheduler: &CompensationScheduler,
    failures: &InMemoryCompensationStore,
    violations: &mut Vec<String>,
) -> usize {
    let mut retried = 0;
    for _ in 0..100 {
        let failed = FailureQuery {
            status: Some(ExecutionFailedStatus::Failed),
            limit: 1,
            ..FailureQuery::default()
        };
        match failures.list(&failed).await {
            Ok(records) if records.is_empty() => return retried,
            Ok(_) => {}
            Err(error) => {
                violations.push(format!("compensation records unreadable: {error}"));
                return retried;
            }
        }
        tokio::time::sleep(Duration::from_millis(RETRY.max_backoff_ms)).await;
        match scheduler.run_due(1_000).await {
            Ok(pass) => retried += pass.retried,
            Err(error) => {
                violations.push(format!("a compensation pass failed: {error}"));
                return retried;
            }
        }
    }
    violations.push("compensation did not settle in 100 passes".to_owned());
    retried
}

/// Lets virtual time run until nothing is in flight: every wait (30 s at most), send,
/// redelivery and saga re-run has ended.
pub(crate) async fn wait_quiet(chaos: &Chaos) {
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(60)).await;
        if chaos.pending() == 0 {
            return;
        }
    }
}

/// Runs the saga again on every stream of `history`, in order, as a saga service that lost
/// its positions does when it starts (the saga's failures are recorded for compensation).
async fn rerun_saga_over(
    dispatcher: &EventDispatcher,
    history: &BTreeMap<String, Vec<DomainEventStream>>,
) {
    let Some(saga) = dispatcher.consumer(SAGA) else {
        return;
    };
    for stream in history.values().flatten() {
        let _ = dispatcher.run_consumer(&saga, stream).await;
    }
}
