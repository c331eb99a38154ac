//! A saga acts for the owner and space of the aggregate whose event it reacts to (SPEC TN-2):
//! the processing node refuses its command for an aggregate of another owner or space, and
//! that refusal fails the saga's step and is recorded for compensation, unless the saga
//! declares that it acts across owners.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use support::*;
use wow_core::command::{CommandResultError, JsonCommand, OWNER_ID_HEADER, SPACE_ID_HEADER};
use wow_core::compensation::{
    CompensationStore, FailureQuery, InMemoryCompensationStore, RetrySpec,
};
use wow_core::event::ConsumerError;
use wow_core::saga::{Saga, SagaContext};
use wow_core::{AggregateId, CommandResult, CommandStage, DomainEventStream, ErrorCode};
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::LocalPipeline;

/// Every withdrawal from an account is deposited into `savings`.
#[derive(Debug)]
struct Sweep {
    savings: AggregateId,
    across: bool,
}

#[async_trait]
impl Saga for Sweep {
    type Aggregate = Account;

    fn name(&self) -> &str {
        "sweep"
    }

    fn acts_across_owners(&self) -> bool {
        self.across
    }

    async fn on_event(
        &self,
        event: &AccountEvent,
        _stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let AccountEvent::Withdrawn(Moved { amount }) = event else {
            return Ok(());
        };
        let deposit = AccountCommand::Deposit(Amount { amount: *amount });
        ctx.send_to::<Account>(self.savings.clone(), deposit)
            .await?;
        Ok(())
    }
}

/// `command` as a caller bound to `owner` (and `space`) sends it: the HTTP edge writes the
/// binding into these headers.
fn as_owner(mut command: JsonCommand, owner: &str, space: Option<&str>) -> JsonCommand {
    command
        .header
        .insert(OWNER_ID_HEADER.to_owned(), owner.to_owned());
    if let Some(space) = space {
        command
            .header
            .insert(SPACE_ID_HEADER.to_owned(), space.to_owned());
    }
    command
}

fn withdraw(id: &AggregateId, amount: u64) -> JsonCommand {
    command(id, AccountCommand::Withdraw(Amount { amount }))
}

const RETRY: RetrySpec = RetrySpec {
    max_attempts: 4,
    initial_backoff_ms: 1_000,
    max_backoff_ms: 60_000,
};

/// A pipeline on a fresh memory store whose `sweep` saga deposits into `savings`, its
/// failures recorded in `failures`.
fn pipeline(
    savings: &AggregateId,
    across: bool,
    failures: &Arc<InMemoryCompensationStore>,
) -> LocalPipeline {
    LocalPipeline::builder(registry(), memory_store())
        .saga(Arc::new(Sweep {
            savings: savings.clone(),
            across,
        }))
        .compensation(failures.clone(), RETRY)
        .build()
}

/// The outcome of `command` at `SAGA_HANDLED`: the saga stage's result.
async fn saga_handled(pipeline: &LocalPipeline, command: JsonCommand) -> CommandResult {
    match pipeline
        .gateway
        .send_and_wait(command, WaitPlan::new(CommandStage::SagaHandled))
        .await
    {
        Ok(result) => result,
        Err(CommandResultError::Failed(result)) => *result,
        Err(other) => panic!("no result: {other}"),
    }
}

async fn balance_streams(pipeline: &LocalPipeline, id: &AggregateId) -> Vec<DomainEventStream> {
    pipeline.store().load(id, 1, u64::MAX).await.unwrap()
}

#[tokio::test]
async fn a_sagas_command_for_another_owners_aggregate_is_refused_and_recorded_as_its_failure() {
    let failures = Arc::new(InMemoryCompensationStore::new());
    let alices = account_id();
    let pipeline = pipeline(&alices, false, &failures);
    send_ok(&pipeline.gateway, as_owner(open(&alices, 0), "alice", None)).await;
    let bobs = account_id();
    send_ok(&pipeline.gateway, as_owner(open(&bobs, 100), "bob", None)).await;

    let handled = saga_handled(&pipeline, as_owner(withdraw(&bobs, 30), "bob", None)).await;
    assert_eq!(handled.error_code, ErrorCode::IllegalAccessOwnerAggregate);
    let sent = handled.result["commands"].as_array().unwrap();
    assert_eq!(sent.len(), 1, "{handled:?}");
    assert_eq!(sent[0]["errorCode"], "IllegalAccessOwnerAggregate");
    assert_eq!(
        balance_streams(&pipeline, &alices).await.len(),
        1,
        "nothing is written to alice's account"
    );
    let records = failures.list(&FailureQuery::default()).await.unwrap();
    assert_eq!(
        records.len(),
        1,
        "the refused step is recorded: {records:?}"
    );
    let record = &records[0];
    assert_eq!(
        (
            record.consumer.as_str(),
            record.stage,
            &record.aggregate_id,
            record.version
        ),
        ("sweep", CommandStage::SagaHandled, &bobs, 2)
    );
    assert_eq!(record.error_code, ErrorCode::IllegalAccessOwnerAggregate);

    // A retry is refused again: the saga is still held to bob.
    let retried = pipeline
        .compensation()
        .unwrap()
        .retry(&record.id)
        .await
        .unwrap();
    assert_eq!(retried.attempts, 2, "the retry fails again");
    assert_eq!(retried.error_code, ErrorCode::IllegalAccessOwnerAggregate);
    assert_eq!(balance_streams(&pipeline, &alices).await.len(), 1);

    // A command named by no owner (a caller bound to the whole tenant, a deadline) on another
    // of bob's accounts (the first one's later streams wait behind its failure, SPEC DS-5):
    // the saga still acts for bob, the owner the account recorded.
    let parked = saga_handled(&pipeline, withdraw(&bobs, 10)).await;
    assert_eq!(parked.error_code, ErrorCode::StreamParked);
    let bobs_other = account_id();
    send_ok(
        &pipeline.gateway,
        as_owner(open(&bobs_other, 100), "bob", None),
    )
    .await;
    let handled = saga_handled(&pipeline, withdraw(&bobs_other, 10)).await;
    assert_eq!(handled.error_code, ErrorCode::IllegalAccessOwnerAggregate);
    assert_eq!(balance_streams(&pipeline, &alices).await.len(), 1);
}

#[tokio::test]
async fn a_sagas_command_for_its_own_owners_aggregate_goes_through_and_names_the_owner() {
    let failures = Arc::new(InMemoryCompensationStore::new());
    let savings = account_id();
    let pipeline = pipeline(&savings, false, &failures);
    send_ok(&pipeline.gateway, as_owner(open(&savings, 0), "bob", None)).await;
    let checking = account_id();
    send_ok(
        &pipeline.gateway,
        as_owner(open(&checking, 100), "bob", None),
    )
    .await;

    let handled = saga_handled(&pipeline, as_owner(withdraw(&checking, 30), "bob", None)).await;
    assert_eq!(handled.error_code, ErrorCode::Ok, "{handled:?}");
    // From a caller of the whole tenant: still bob's saga, still bob's savings.
    let handled = saga_handled(&pipeline, withdraw(&checking, 20)).await;
    assert_eq!(handled.error_code, ErrorCode::Ok, "{handled:?}");
    let deposits = balance_streams(&pipeline, &savings).await;
    assert_eq!(deposits.len(), 3);
    for deposit in &deposits[1..] {
        assert_eq!(
            deposit.header.get(OWNER_ID_HEADER).map(String::as_str),
            Some("bob"),
            "the saga's command named the event's owner"
        );
    }
    assert!(failures
        .list(&FailureQuery::default())
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_sagas_command_for_another_space_is_refused_and_one_of_no_owner_reaches_every_owner() {
    let failures = Arc::new(InMemoryCompensationStore::new());
    let savings = account_id();
    let pipeline = pipeline(&savings, false, &failures);
    send_ok(
        &pipeline.gateway,
        as_owner(open(&savings, 0), "bob", Some("s2")),
    )
    .await;
    let checking = account_id();
    send_ok(
        &pipeline.gateway,
        as_owner(open(&checking, 100), "bob", Some("s1")),
    )
    .await;
    let handled = saga_handled(&pipeline, as_owner(withdraw(&checking, 30), "bob", None)).await;
    assert_eq!(handled.error_code, ErrorCode::IllegalAccessSpaceAggregate);
    assert_eq!(balance_streams(&pipeline, &savings).await.len(), 1);
    let records = failures.list(&FailureQuery::default()).await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0].error_code,
        ErrorCode::IllegalAccessSpaceAggregate
    );

    // An account of no owner gives its saga none: it reaches bob's savings, as a caller of
    // the whole tenant would.
    let unowned = account_id();
    send_ok(&pipeline.gateway, open(&unowned, 100)).await;
    let handled = saga_handled(&pipeline, withdraw(&unowned, 30)).await;
    assert_eq!(handled.error_code, ErrorCode::Ok, "{handled:?}");
    assert_eq!(balance_streams(&pipeline, &savings).await.len(), 2);
}

#[tokio::test]
async fn a_saga_that_acts_across_owners_reaches_another_owners_aggregate() {
    let failures = Arc::new(InMemoryCompensationStore::new());
    let alices = account_id();
    let pipeline = pipeline(&alices, true, &failures);
    send_ok(&pipeline.gateway, as_owner(open(&alices, 0), "alice", None)).await;
    let bobs = account_id();
    send_ok(&pipeline.gateway, as_owner(open(&bobs, 100), "bob", None)).await;

    let handled = saga_handled(&pipeline, as_owner(withdraw(&bobs, 30), "bob", None)).await;
    assert_eq!(handled.error_code, ErrorCode::Ok, "{handled:?}");
    let deposits = balance_streams(&pipeline, &alices).await;
    assert_eq!(deposits.len(), 2);
    assert_eq!(
        deposits[1].header.get(OWNER_ID_HEADER),
        None,
        "a saga across owners names none"
    );
}
