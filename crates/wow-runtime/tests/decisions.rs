//! One decision per intent (SPEC ID-6, ID-7, TO-1): rejections are recorded and replayed, an
//! applied intent is never answered with a business error, a stale node decides again, and
//! the look-up never says NONE for a request still in flight.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use support::*;
use wow_core::command::{
    CommandResultError, InMemoryCommandBus, JsonCommand, ORIGINAL_COMMAND_ID, REPLAYED,
};
use wow_core::event::NoopDomainEventBus;
use wow_core::eventsourcing::{
    EventStore, EventStoreDecorator, EventStoreError, EventStoreMethod, GatedEventStore,
    RecordingEventStore, RejectionRecord, RequestDecision,
};
use wow_core::{AggregateId, CommandResult, ErrorCode};
use wow_runtime::command::{
    CommandGateway, DefaultCommandHandler, RequestOutcome, WaitCoordinator, WaitPlan, RECORDED,
};
use wow_runtime::idempotency::{
    BloomIdempotencyCheckerProvider, DefaultRequestIdChecker, EventStoreRequestIdExistenceChecker,
    IdempotencyConfig,
};
use wow_runtime::pipeline::LocalPipeline;

fn withdraw(id: &AggregateId, amount: u64) -> JsonCommand {
    command(id, AccountCommand::Withdraw(Amount { amount }))
}

/// A fresh process over `store`: new Bloom filters, empty cache (a restart, a rebalance, or
/// a second machine).
fn process(store: &Arc<dyn EventStore>) -> LocalPipeline {
    LocalPipeline::builder(registry(), store.clone()).build()
}

async fn failed(pipeline: &LocalPipeline, command: JsonCommand) -> CommandResult {
    match pipeline
        .gateway
        .send_and_wait(command, WaitPlan::processed())
        .await
    {
        Err(CommandResultError::Failed(result)) => *result,
        other => panic!("expected a failed result, got {other:?}"),
    }
}

#[tokio::test]
async fn an_applied_withdrawal_resent_after_a_restart_is_its_duplicate_not_a_business_error() {
    let store = memory_store();
    let first = process(&store);
    let id = opened(&first.gateway, 100).await;
    let withdrawal = withdraw(&id, 100).with_request_id("w-1");
    let applied = send_ok(&first.gateway, withdrawal.clone()).await;
    assert_eq!(applied.aggregate_version, Some(2));
    drop(first);

    // The new process's filters have not seen `w-1`: its handler runs on balance 0 and would
    // say InsufficientBalance; history says the intent was applied.
    let restarted = process(&store);
    let answer = failed(&restarted, resend(&withdrawal)).await;
    assert_eq!(answer.error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(answer.aggregate_version, Some(2), "the original version");
    assert_eq!(
        answer.result.get(ORIGINAL_COMMAND_ID),
        Some(&json!(withdrawal.id))
    );
    assert_eq!(store.load(&id, 1, u64::MAX).await.unwrap().len(), 2);
}

#[tokio::test]
async fn an_applied_withdrawal_resent_through_a_gateway_only_node_is_its_duplicate() {
    let store = memory_store();
    let bus = Arc::new(InMemoryCommandBus::new(2, 16));
    let waits = WaitCoordinator::new();
    // A gateway with no event store (SPEC RQ-3): it lets every Bloom hit through.
    let gateway = CommandGateway::builder(registry(), bus.clone())
        .wait_coordinator(waits.clone())
        .build();
    let start_node = || {
        let checker = DefaultRequestIdChecker::new(
            Arc::new(BloomIdempotencyCheckerProvider::new(
                IdempotencyConfig::default(),
            )),
            Arc::new(EventStoreRequestIdExistenceChecker::new(store.clone())),
        );
        let node = DefaultCommandHandler::builder(
            registry(),
            store.clone(),
            Arc::new(NoopDomainEventBus),
            waits.clone(),
        )
        .request_id_checker(Arc::new(checker))
        .build();
        bus.subscribe(Arc::new(node));
    };
    start_node();
    let id = account_id();
    gateway
        .send_and_wait(open(&id, 100), WaitPlan::processed())
        .await
        .unwrap();
    let withdrawal = withdraw(&id, 100).with_request_id("w-1");
    gateway
        .send_and_wait(withdrawal.clone(), WaitPlan::processed())
        .await
        .unwrap();

    start_node(); // a restart: the node's filter forgot `w-1`
    let error = gateway
        .send_and_wait(resend(&withdrawal), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(error.result().aggregate_version, Some(2));
}

#[tokio::test]
async fn a_command_with_no_events_under_an_applied_request_id_is_told_it_was_reused() {
    let store = memory_store();
    let first = process(&store);
    let id = opened(&first.gateway, 10).await;
    send_ok(&first.gateway, deposit(&id, 5).with_request_id("d-1")).await;

    let restarted = process(&store);
    let check = command(&id, AccountCommand::Check).with_request_id("d-1");
    let answer = failed(&restarted, check).await;
    assert_eq!(answer.error_code, ErrorCode::RequestIdReused);
    assert_eq!(answer.aggregate_version, Some(2));

    // A check under a request id of its own still records nothing (SPEC RQ-13).
    let own = send_ok(
        &restarted.gateway,
        command(&id, AccountCommand::Check).with_request_id("c-1"),
    )
    .await;
    assert_eq!(own.result.get(RECORDED), Some(&json!(false)));
}

#[tokio::test]
async fn a_rejection_is_recorded_and_every_later_message_gets_it_without_effect() {
    let store = memory_store();
    let first = process(&store);
    let id = opened(&first.gateway, 10).await;
    let too_much = withdraw(&id, 50).with_request_id("w-2");
    let rejected = failed(&first, too_much.clone()).await;
    assert_eq!(
        rejected.error_code,
        ErrorCode::domain("InsufficientBalance")
    );
    assert_eq!(rejected.result.get(REPLAYED), None, "decided, not replayed");
    match store.find_decision(&id, "w-2").await.unwrap() {
        Some(RequestDecision::Rejected(record)) => {
            assert_eq!(record.error_code, ErrorCode::domain("InsufficientBalance"));
            assert_eq!(record.command_id, too_much.id);
            assert_eq!(record.version, 1);
            assert_eq!(record.error_msg, rejected.error_msg);
        }
        other => panic!("expected a recorded rejection, got {other:?}"),
    }

    // The account can now pay, but the intent was decided: on this process (its filters saw
    // `w-2`) and on a fresh one (they did not), the same rejection comes back.
    send_ok(&first.gateway, deposit(&id, 100)).await;
    for node in [&first, &process(&store)] {
        let replayed = failed(node, resend(&too_much)).await;
        assert_eq!(replayed.error_code, rejected.error_code);
        assert_eq!(replayed.error_msg, rejected.error_msg);
        assert_eq!(
            replayed.aggregate_version,
            Some(1),
            "the version it was decided on"
        );
        assert_eq!(replayed.result.get(REPLAYED), Some(&json!(true)));
        assert_eq!(
            replayed.result.get(ORIGINAL_COMMAND_ID),
            Some(&json!(too_much.id))
        );
    }
    let history = store.load(&id, 1, u64::MAX).await.unwrap();
    assert_eq!(
        history.len(),
        2,
        "the rejected withdrawal never took effect"
    );

    // Another body under the same request id is a reuse, not a replay (SPEC ID-5).
    let other = withdraw(&id, 1).with_request_id("w-2");
    let reused = failed(&process(&store), other).await;
    assert_eq!(reused.error_code, ErrorCode::RequestIdReused);
}

#[tokio::test]
async fn not_found_and_duplicate_aggregate_id_are_recorded_decisions() {
    let store = memory_store();
    let pipeline = process(&store);
    let missing = account_id();
    let early = deposit(&missing, 5).with_request_id("early");
    assert_eq!(
        failed(&pipeline, early.clone()).await.error_code,
        ErrorCode::NotFound
    );
    send_ok(&pipeline.gateway, open(&missing, 1)).await;
    // The account exists now; the intent was decided when it did not.
    let replayed = failed(&process(&store), resend(&early)).await;
    assert_eq!(replayed.error_code, ErrorCode::NotFound);
    assert_eq!(replayed.result.get(REPLAYED), Some(&json!(true)));
    assert_eq!(store.load(&missing, 1, u64::MAX).await.unwrap().len(), 1);

    let competing = open(&missing, 7).with_request_id("second-open");
    let conflict = failed(&pipeline, competing.clone()).await;
    assert_eq!(conflict.error_code, ErrorCode::DuplicateAggregateId);
    assert!(matches!(
        store.find_decision(&missing, "second-open").await.unwrap(),
        Some(RequestDecision::Rejected(_))
    ));
}

#[tokio::test]
async fn validation_failures_record_nothing_and_keep_the_request_id_free() {
    let store = memory_store();
    let pipeline = process(&store);
    let id = opened(&pipeline.gateway, 10).await;
    let invalid = deposit(&id, 0).with_request_id("d-0");
    assert_eq!(
        failed(&pipeline, invalid).await.error_code,
        ErrorCode::CommandValidation
    );
    assert!(store.find_decision(&id, "d-0").await.unwrap().is_none());
    let valid = send_ok(&pipeline.gateway, deposit(&id, 3).with_request_id("d-0")).await;
    assert_eq!(valid.aggregate_version, Some(2));
}

#[tokio::test]
async fn a_pinned_version_conflict_ahead_or_behind_history_is_not_recorded() {
    let store = memory_store();
    let pipeline = process(&store);
    let id = opened(&pipeline.gateway, 10).await;
    let ahead = deposit(&id, 1)
        .with_request_id("pin-3")
        .with_expected_version(3);
    assert_eq!(
        failed(&pipeline, ahead).await.error_code,
        ErrorCode::CommandExpectVersionConflict
    );
    assert!(
        store.find_decision(&id, "pin-3").await.unwrap().is_none(),
        "history has not passed version 3: not a final decision"
    );
    let behind = deposit(&id, 1)
        .with_request_id("pin-0")
        .with_expected_version(0);
    failed(&pipeline, behind).await;
    assert!(
        store.find_decision(&id, "pin-0").await.unwrap().is_none(),
        "history has passed version 0: a conflict all the same, not a decision (SPEC ES-3)"
    );
    let retried = deposit(&id, 1)
        .with_request_id("pin-0")
        .with_expected_version(1);
    assert_eq!(
        send_ok(&pipeline.gateway, retried).await.aggregate_version,
        Some(2),
        "the retry with the fresh version is decided afresh"
    );
}

#[tokio::test]
async fn a_stale_node_decides_again_on_fresh_state_and_never_caches_a_rejection() {
    let store = memory_store();
    let node_a = process(&store);
    let node_b = process(&store);
    let id = opened(&node_a.gateway, 11).await; // node A caches balance 11, version 1
    send_ok(&node_b.gateway, deposit(&id, 2)).await; // history: balance 13, version 2

    // Decided on A's cached 11 this would be InsufficientBalance.
    let paid = send_ok(&node_a.gateway, withdraw(&id, 12)).await;
    assert_eq!(paid.aggregate_version, Some(3));

    // Pinned to the true version, behind A's cache.
    send_ok(&node_b.gateway, deposit(&id, 1)).await; // version 4
    let pinned = send_ok(&node_a.gateway, deposit(&id, 1).with_expected_version(4)).await;
    assert_eq!(pinned.aggregate_version, Some(5));

    // A rejection on fresh state does not put that state back: B moves on, A decides anew.
    let refused = failed(&node_a, withdraw(&id, 1_000)).await;
    assert_eq!(refused.error_code, ErrorCode::domain("InsufficientBalance"));
    send_ok(&node_b.gateway, deposit(&id, 1_000)).await;
    let paid = send_ok(&node_a.gateway, withdraw(&id, 1_000)).await;
    assert_eq!(paid.aggregate_version, Some(7));
}

#[tokio::test]
async fn a_concurrent_rejection_and_append_of_one_intent_end_in_one_decision() {
    // Two processes take the same intent at once, one on a state where it must be refused.
    for round in 0..20 {
        let store = memory_store();
        let node_a = process(&store);
        let node_b = process(&store);
        let id = opened(&node_a.gateway, 5).await;
        let intent = withdraw(&id, 8).with_request_id(format!("w-{round}"));
        let (from_a, from_b) = tokio::join!(
            async {
                send_ok(&node_b.gateway, deposit(&id, 10)).await;
                node_a
                    .gateway
                    .send_and_wait(intent.clone(), WaitPlan::processed())
                    .await
            },
            node_b
                .gateway
                .send_and_wait(resend(&intent), WaitPlan::processed())
        );
        let decision = store
            .find_decision(&id, &intent.request_id)
            .await
            .unwrap()
            .expect("the intent was decided");
        for answer in [from_a, from_b] {
            match (&decision, answer) {
                (RequestDecision::Appended(record), Ok(result)) => {
                    assert_eq!(result.aggregate_version, Some(record.version))
                }
                (RequestDecision::Appended(record), Err(error)) => {
                    assert_eq!(error.error_code(), &ErrorCode::DuplicateRequestId);
                    assert_eq!(error.result().aggregate_version, Some(record.version));
                }
                (RequestDecision::Rejected(record), Err(error)) => {
                    assert_eq!(error.error_code(), &record.error_code)
                }
                (RequestDecision::Rejected(_), Ok(result)) => {
                    panic!("rejected for good, yet answered {result:?}")
                }
            }
        }
        let withdrawals = store
            .load(&id, 1, u64::MAX)
            .await
            .unwrap()
            .iter()
            .filter(|s| s.request_id == intent.request_id)
            .count();
        let appended = matches!(decision, RequestDecision::Appended(_));
        assert_eq!(withdrawals, usize::from(appended));
    }
}

#[tokio::test]
async fn the_look_up_says_in_flight_while_the_node_holds_a_request_and_appended_after() {
    let gated = Arc::new(GatedEventStore::new(memory_store()));
    let store: Arc<dyn EventStore> = gated.clone();
    let pipeline = process(&store);
    let id = account_id();
    let create = open(&id, 10).with_request_id("slow-open");
    let plan = WaitPlan::processed().with_timeout(Duration::from_millis(1));
    let error = pipeline
        .gateway
        .send_and_wait(create.clone(), plan)
        .await
        .unwrap_err();
    assert!(error.is_timeout());

    // The append waits at the gate: the request is on this node, undecided.
    assert!(matches!(
        pipeline.look_up_request(&id, "slow-open").await,
        RequestOutcome::InFlight
    ));
    assert!(matches!(
        pipeline.look_up_request(&id, "never-sent").await,
        RequestOutcome::None
    ));

    gated.release(1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match pipeline.look_up_request(&id, "slow-open").await {
            RequestOutcome::Appended(record) => {
                assert_eq!((record.version, record.command_id), (1, create.id));
                break;
            }
            RequestOutcome::InFlight => {}
            other => panic!("in flight, then appended; never {}", other.status()),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not appended in time"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn the_look_up_reports_a_recorded_rejection() {
    let store = memory_store();
    let pipeline = process(&store);
    let id = opened(&pipeline.gateway, 1).await;
    failed(&pipeline, withdraw(&id, 2).with_request_id("w-3")).await;
    match pipeline.look_up_request(&id, "w-3").await {
        RequestOutcome::Rejected(record) => {
            assert_eq!(record.error_code, ErrorCode::domain("InsufficientBalance"))
        }
        other => panic!("expected REJECTED, got {}", other.status()),
    }
}

#[tokio::test]
async fn a_void_resend_within_the_filter_window_is_dropped_by_a_gateway_backed_by_history() {
    let pipeline = process(&memory_store());
    let id = account_id();
    let note = command(&id, AccountCommand::Audit).with_request_id("note-1");
    pipeline.gateway.send(note.clone()).await.unwrap();
    let error = pipeline.gateway.send(resend(&note)).await.unwrap_err();
    assert_eq!(error.error_code(), &ErrorCode::DuplicateRequestId);
    assert_eq!(error.result().result.get("sent"), Some(&json!(false)));
}

#[tokio::test]
async fn another_tenant_resending_a_request_id_learns_nothing_of_its_decision() {
    let store = memory_store();
    let pipeline = process(&store);
    let id = opened(&pipeline.gateway, 1).await;
    let refused = withdraw(&id, 500).with_request_id("w-t");
    failed(&pipeline, refused.clone()).await;
    send_ok(&pipeline.gateway, deposit(&id, 1).with_request_id("d-t")).await;

    let mut elsewhere = id.clone();
    elsewhere.tenant_id = "t2".into();
    for intent in [&refused, &deposit(&id, 1).with_request_id("d-t")] {
        let mut probe = resend(intent);
        probe.aggregate_id = elsewhere.clone();
        // t2's own first answer: its account does not exist, whatever t1 decided.
        let first = failed(&pipeline, probe.clone()).await;
        assert_eq!(first.error_code, ErrorCode::NotFound, "{first:?}");
        assert_eq!(first.result.get(ORIGINAL_COMMAND_ID), None);
        assert_eq!(first.result.get(REPLAYED), None);
        // A resend on another node replays t2's own decision, never t1's.
        let again = failed(&process(&store), probe.clone()).await;
        assert_eq!(again.error_code, ErrorCode::NotFound, "{again:?}");
        assert_eq!(
            again.result.get(ORIGINAL_COMMAND_ID),
            Some(&json!(first.command_id)),
            "the original is t2's own first attempt"
        );
        match pipeline
            .look_up_request(&elsewhere, &intent.request_id)
            .await
        {
            RequestOutcome::Rejected(record) => {
                assert_eq!(record.error_code, ErrorCode::NotFound);
                assert_eq!(record.command_id, first.command_id);
            }
            other => panic!("expected t2's own REJECTED, got {}", other.status()),
        }
    }
}

/// A store whose rejection records fail while `down` is set; everything else passes through.
#[derive(Debug)]
struct RejectionsDown {
    inner: Arc<dyn EventStore>,
    down: AtomicBool,
}

#[async_trait]
impl EventStoreDecorator for RejectionsDown {
    fn inner(&self) -> &dyn EventStore {
        &*self.inner
    }

    async fn record_rejection(
        &self,
        id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(EventStoreError::Unavailable("rejections are down".into()));
        }
        self.inner.record_rejection(id, request_id, rejection).await
    }
}

#[tokio::test]
async fn rejections_down_passes_every_method_to_the_inner_store_but_downed_rejections() {
    let inner = Arc::new(RecordingEventStore::new());
    let store = RejectionsDown {
        inner: inner.clone(),
        down: AtomicBool::new(false),
    };
    assert_eq!(
        inner.trace(&store).await,
        EventStoreMethod::forwarded_trace()
    );
    store.down.store(true, Ordering::SeqCst);
    let mut expected = EventStoreMethod::forwarded_trace();
    expected.insert(EventStoreMethod::RecordRejection, Vec::new());
    assert_eq!(inner.trace(&store).await, expected);
}

#[tokio::test]
async fn a_rejection_that_cannot_be_recorded_is_not_final_and_a_resend_decides_again() {
    let faulty = Arc::new(RejectionsDown {
        inner: memory_store(),
        down: AtomicBool::new(false),
    });
    let store: Arc<dyn EventStore> = faulty.clone();
    let pipeline = process(&store);
    let id = opened(&pipeline.gateway, 10).await;
    faulty.down.store(true, Ordering::SeqCst);
    let too_much = withdraw(&id, 50).with_request_id("w-down");
    let answer = failed(&pipeline, too_much.clone()).await;
    assert_eq!(
        answer.error_code,
        ErrorCode::ServiceUnavailable,
        "not the business code: the decision is not durable"
    );
    assert!(
        answer.error_msg.contains("InsufficientBalance"),
        "{answer:?}"
    );
    assert!(store.find_decision(&id, "w-down").await.unwrap().is_none());
    assert!(matches!(
        pipeline.look_up_request(&id, "w-down").await,
        RequestOutcome::None
    ));

    // Nothing was decided: once the account can pay, the same intent goes through.
    faulty.down.store(false, Ordering::SeqCst);
    send_ok(&pipeline.gateway, deposit(&id, 100)).await;
    let paid = send_ok(&process(&store).gateway, resend(&too_much)).await;
    assert_eq!(paid.aggregate_version, Some(3));
}
