//! The CommandGateway and processing node in one process: stages, results, request ids.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use support::*;
use wow_core::command::{CommandResultError, ORIGINAL_COMMAND_ID};
use wow_core::{CommandStage, ErrorCode};
use wow_runtime::command::{WaitPlan, RECORDED, SENT};
use wow_runtime::pipeline::LocalPipeline;

fn pipeline() -> LocalPipeline {
    LocalPipeline::builder(registry(), memory_store()).build()
}

#[tokio::test]
async fn send_and_wait_returns_the_processed_result_with_the_new_version() {
    let pipeline = pipeline();
    let id = account_id();
    let opened = send_ok(&pipeline.gateway, open(&id, 10)).await;
    assert_eq!(opened.stage, CommandStage::Processed);
    assert_eq!(opened.aggregate_version, Some(1));
    assert_eq!(opened.error_code, ErrorCode::Ok);
    let deposited = send_ok(&pipeline.gateway, deposit(&id, 5)).await;
    assert_eq!(deposited.aggregate_version, Some(2));
    assert_eq!(pipeline.waits.waiting(), 0, "no wait handle is left behind");
}

#[tokio::test]
async fn validation_failure_is_reported_before_sending_and_keeps_the_request_id_free() {
    let pipeline = pipeline();
    let id = account_id();
    send_ok(&pipeline.gateway, open(&id, 1)).await;
    let bad = deposit(&id, 0).with_request_id("deposit-1");
    let error = pipeline
        .gateway
        .send_and_wait(bad, WaitPlan::processed())
        .await
        .unwrap_err();
    let result = error.result();
    assert_eq!(result.error_code, ErrorCode::CommandValidation);
    assert_eq!(result.stage, CommandStage::Sent);
    assert_eq!(result.result.get(SENT), Some(&json!(false)));
    assert_eq!(result.binding_errors[0].name, "amount");
    assert_eq!(result.request_id, "deposit-1");
    // The request id was not consumed: the corrected command with it goes through.
    let fixed = deposit(&id, 3).with_request_id("deposit-1");
    let ok = send_ok(&pipeline.gateway, fixed).await;
    assert_eq!(ok.aggregate_version, Some(2));
    assert_eq!(
        pipeline.metrics.snapshot().bloom_hits,
        0,
        "the failed validation reserved nothing"
    );
}

#[tokio::test]
async fn failed_results_carry_the_complete_result() {
    let pipeline = pipeline();
    let id = account_id();
    send_ok(&pipeline.gateway, open(&id, 1)).await;
    let withdraw =
        command(&id, AccountCommand::Withdraw(Amount { amount: 100 })).with_request_id("w-1");
    let command_id = withdraw.id.clone();
    let error = pipeline
        .gateway
        .send_and_wait(withdraw, WaitPlan::processed())
        .await
        .unwrap_err();
    assert!(matches!(error, CommandResultError::Failed(_)));
    let result = error.result();
    assert_eq!(result.error_code, ErrorCode::domain("InsufficientBalance"));
    assert_eq!(result.stage, CommandStage::Processed);
    assert!(!result.succeeded);
    assert_eq!(result.command_id, command_id);
    assert_eq!(result.wait_command_id, command_id);
    assert_eq!(result.request_id, "w-1");
    assert_eq!(
        (
            result.context_name.as_str(),
            result.aggregate_name.as_str(),
            result.aggregate_id.as_str(),
            result.tenant_id.as_str()
        ),
        ("bank", "account", id.id.as_str(), "t1")
    );
    assert!(
        result.error_msg.contains("100"),
        "the message is for people: {}",
        result.error_msg
    );
    assert_eq!(
        result.aggregate_version,
        Some(1),
        "a rejection reports the version it saw"
    );
}

#[tokio::test]
async fn unknown_aggregate_and_missing_aggregate_are_not_found() {
    let pipeline = pipeline();
    let mut other = account_id();
    other.aggregate_name = "ledger".into();
    let error = pipeline
        .gateway
        .send_and_wait(deposit(&other, 1), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::NotFound);
    assert_eq!(error.result().stage, CommandStage::Sent);
    let error = pipeline
        .gateway
        .send_and_wait(deposit(&account_id(), 1), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::NotFound);
    assert_eq!(error.result().stage, CommandStage::Processed);
}

#[tokio::test]
async fn a_resend_is_answered_with_the_original_outcome() {
    let pipeline = pipeline();
    let id = account_id();
    send_ok(&pipeline.gateway, open(&id, 1)).await;
    let first = deposit(&id, 5).with_request_id("intent-7");
    let first_command_id = first.id.clone();
    send_ok(&pipeline.gateway, first.clone()).await;
    let error = pipeline
        .gateway
        .send_and_wait(resend(&first), WaitPlan::processed())
        .await
        .unwrap_err();
    let result = error.result();
    assert_eq!(result.error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(
        result.aggregate_version,
        Some(2),
        "the original stream's version"
    );
    assert_eq!(
        result.result.get(ORIGINAL_COMMAND_ID),
        Some(&json!(first_command_id))
    );
    let history = pipeline.store().load(&id, 1, u64::MAX).await.unwrap();
    assert_eq!(history.len(), 2, "the resend recorded nothing");
}

#[tokio::test]
async fn a_reused_request_id_with_another_body_is_request_id_reused() {
    let pipeline = pipeline();
    let id = account_id();
    send_ok(&pipeline.gateway, open(&id, 1)).await;
    pipeline
        .gateway
        .send_and_wait(
            deposit(&id, 5).with_request_id("intent-8"),
            WaitPlan::processed(),
        )
        .await
        .unwrap();
    let other_body = deposit(&id, 6).with_request_id("intent-8");
    let error = pipeline
        .gateway
        .send_and_wait(other_body, WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::RequestIdReused);
    assert_eq!(error.result().aggregate_version, Some(2));
    let other_command =
        command(&id, AccountCommand::Withdraw(Amount { amount: 5 })).with_request_id("intent-8");
    let error = pipeline
        .gateway
        .send_and_wait(other_command, WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::RequestIdReused);
}

#[tokio::test]
async fn sixty_four_concurrent_sends_of_one_request_id_make_one_stream() {
    let pipeline = Arc::new(pipeline());
    let id = account_id();
    send_ok(&pipeline.gateway, open(&id, 1)).await;
    let intent = deposit(&id, 1).with_request_id("storm");
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let (pipeline, command) = (pipeline.clone(), resend(&intent));
            tokio::spawn(async move {
                pipeline
                    .gateway
                    .send_and_wait(command, WaitPlan::processed())
                    .await
            })
        })
        .collect();
    let mut succeeded = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => succeeded += 1,
            Err(error) => assert_eq!(error.result().error_code, ErrorCode::DuplicateRequestId),
        }
    }
    assert_eq!(succeeded, 1);
    let history = pipeline.store().load(&id, 1, u64::MAX).await.unwrap();
    assert_eq!(
        history.iter().filter(|s| s.request_id == "storm").count(),
        1
    );
    assert_eq!(pipeline.waits.waiting(), 0);
}

#[tokio::test]
async fn a_handler_that_records_nothing_says_so_and_runs_again_on_resend() {
    let pipeline = pipeline();
    let id = account_id();
    send_ok(&pipeline.gateway, open(&id, 1)).await;
    let check = command(&id, AccountCommand::Check).with_request_id("check-1");
    let runs_before = pipeline.metrics.snapshot().handler_runs;
    let result = pipeline
        .gateway
        .send_and_wait(check.clone(), WaitPlan::new(CommandStage::SagaHandled))
        .await
        .unwrap();
    assert_eq!(
        result.stage,
        CommandStage::Processed,
        "nothing recorded: no later stage follows"
    );
    assert_eq!(result.result.get(RECORDED), Some(&json!(false)));
    assert_eq!(result.aggregate_version, Some(1));
    let again = send_ok(&pipeline.gateway, resend(&check)).await;
    assert_eq!(again.result.get(RECORDED), Some(&json!(false)));
    assert_eq!(
        pipeline.metrics.snapshot().handler_runs,
        runs_before + 2,
        "the resend ran the handler again"
    );
    assert_eq!(
        pipeline.store().load(&id, 1, u64::MAX).await.unwrap().len(),
        1
    );
}

#[tokio::test]
async fn a_void_command_can_only_be_awaited_at_sent() {
    let pipeline = pipeline();
    let id = account_id();
    let audit = command(&id, AccountCommand::Audit);
    let error = pipeline
        .gateway
        .send_and_wait(audit.clone(), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::IllegalArgument);
    assert_eq!(error.result().result.get(SENT), Some(&json!(false)));
    let sent = pipeline.gateway.send(resend(&audit)).await.unwrap();
    assert_eq!(sent.stage, CommandStage::Sent);
    assert!(
        pipeline.store().last(&id).await.unwrap().is_none(),
        "no aggregate handled it"
    );
}

#[tokio::test]
async fn the_stream_yields_every_stage_in_order() {
    let pipeline = pipeline();
    let id = account_id();
    let results: Vec<_> = pipeline
        .gateway
        .send_and_wait_stream(open(&id, 3), WaitPlan::new(CommandStage::SagaHandled))
        .collect()
        .await;
    let stages: Vec<_> = results.iter().map(|r| r.stage).collect();
    assert_eq!(stages, CommandStage::ALL.to_vec());
    assert!(results.iter().all(|r| r.succeeded));
    assert!(results[1..].iter().all(|r| r.aggregate_version == Some(1)));
    assert_eq!(pipeline.waits.waiting(), 0);
}

#[tokio::test]
async fn the_stream_yields_a_failure_as_an_element() {
    let pipeline = pipeline();
    let results: Vec<_> = pipeline
        .gateway
        .send_and_wait_stream(
            deposit(&account_id(), 1),
            WaitPlan::new(CommandStage::Projected),
        )
        .collect()
        .await;
    assert_eq!(results.len(), 2);
    assert!(results[0].succeeded);
    assert_eq!(results[1].stage, CommandStage::Processed);
    assert!(!results[1].succeeded);
    assert_eq!(results[1].error_code, ErrorCode::NotFound);
}

/// A projection that never finishes a delivery.
#[derive(Debug)]
struct Stuck;

#[async_trait::async_trait]
impl wow_core::event::EventConsumer for Stuck {
    fn name(&self) -> &str {
        "stuck"
    }

    async fn handle(
        &self,
        _: &wow_core::DomainEventStream,
    ) -> Result<(), wow_core::event::ConsumerError> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_consumer_no_stage_has_is_refused_before_sending() {
    let pipeline = pipeline();
    let id = account_id();
    send_ok(&pipeline.gateway, open(&id, 1)).await;
    let plan = WaitPlan::new(CommandStage::Projected).for_function("no-such-projection");
    let error = pipeline
        .gateway
        .send_and_wait(deposit(&id, 1).with_request_id("r-unknown"), plan)
        .await
        .unwrap_err();
    let result = error.result();
    assert_eq!(result.error_code, ErrorCode::IllegalArgument);
    assert!(
        result.error_msg.contains("no-such-projection"),
        "{}",
        result.error_msg
    );
    assert_eq!(result.result.get(SENT), Some(&json!(false)));
    assert_eq!(pipeline.store().load(&id, 2, 2).await.unwrap().len(), 0);
}

#[tokio::test]
async fn a_caller_timeout_is_a_distinct_error_that_carries_the_ids_and_the_timeout() {
    let pipeline = LocalPipeline::builder(registry(), memory_store())
        .projection(Arc::new(Stuck))
        .build();
    let id = account_id();
    send_ok(&pipeline.gateway, open(&id, 1)).await;
    // The one projection never finishes, so the wait can only expire.
    let plan = WaitPlan::new(CommandStage::Projected)
        .for_function("stuck")
        .with_timeout(Duration::from_millis(50));
    let cmd = deposit(&id, 1).with_request_id("slow-1");
    let command_id = cmd.id.clone();
    let error = pipeline.gateway.send_and_wait(cmd, plan).await.unwrap_err();
    let CommandResultError::Timeout { result, timeout } = &error else {
        panic!("expected a timeout, got {error:?}");
    };
    assert_eq!(*timeout, Duration::from_millis(50));
    assert_eq!(result.error_code, ErrorCode::RequestTimeout);
    assert_eq!(result.command_id, command_id);
    assert_eq!(result.request_id, "slow-1");
    assert_eq!(result.aggregate_id, id.id);
    assert_eq!(result.result.get("timeoutMs"), Some(&json!(50)));
    assert!(
        result.stage >= CommandStage::Processed,
        "the stage reached before the wait expired"
    );
    assert_eq!(
        pipeline.waits.waiting(),
        0,
        "the handle is released on timeout"
    );
    // The command itself went on.
    assert!(pipeline
        .store()
        .find_request(&id, "slow-1")
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn each_tenant_has_its_own_aggregate_under_one_id() {
    let pipeline = pipeline();
    let id = account_id();
    send_ok(&pipeline.gateway, open(&id, 10)).await;
    let mut elsewhere = id.clone();
    elsewhere.tenant_id = "t2".into();
    let error = pipeline
        .gateway
        .send_and_wait(deposit(&elsewhere, 5), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(
        error.result().error_code,
        ErrorCode::NotFound,
        "t2 holds no such account yet, whatever t1 holds"
    );
    pipeline
        .gateway
        .send_and_wait(open(&elsewhere, 1), WaitPlan::processed())
        .await
        .expect("t2 opens its own account under the id t1 also uses (SPEC TN-1)");
    let t1 = pipeline.store().load(&id, 1, u64::MAX).await.unwrap();
    let t2 = pipeline
        .store()
        .load(&elsewhere, 1, u64::MAX)
        .await
        .unwrap();
    assert_eq!(t1.len(), 1, "t1's history is unchanged");
    assert_eq!(t2.len(), 1);
    assert!(t2.iter().all(|s| s.aggregate_id.tenant_id == "t2"));
}
