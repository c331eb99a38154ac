//! Answers that cannot mislead: when a caller waits past `PROCESSED` and a later step fails,
//! the answer says plainly that the command was appended (its version, `PROCESSED` reached)
//! and, apart, what failed downstream, keeping Wow's fields (the error code is the step's).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use support::*;
use wow_core::command::CommandResultError;
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::saga::{Saga, SagaContext};
use wow_core::{CommandResult, CommandStage, DomainEventStream, ErrorCode};
use wow_runtime::command::{WaitPlan, FAILED_STAGE, PROCESSED_OUTCOME, RECORDED};
use wow_runtime::pipeline::{LocalPipeline, LocalPipelineBuilder};

/// A projection or event processor that always fails.
#[derive(Debug)]
struct Failing(&'static str);

#[async_trait]
impl EventConsumer for Failing {
    fn name(&self) -> &str {
        self.0
    }

    async fn handle(&self, _: &DomainEventStream) -> Result<(), ConsumerError> {
        Err(ConsumerError::new(
            ErrorCode::ServiceUnavailable,
            "the mail server is down",
        ))
    }
}

/// A saga whose step always fails.
#[derive(Debug)]
struct FailingSaga;

#[async_trait]
impl Saga for FailingSaga {
    type Aggregate = Account;

    fn name(&self) -> &str {
        "welcome"
    }

    async fn on_event(
        &self,
        _: &AccountEvent,
        _: &DomainEventStream,
        _: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        Err(ConsumerError::new(
            ErrorCode::IllegalAccessOwnerAggregate,
            "the welcome bonus is another owner's",
        ))
    }
}

async fn failed_at(
    build: impl FnOnce(LocalPipelineBuilder) -> LocalPipelineBuilder,
    stage: CommandStage,
) -> CommandResult {
    let pipeline: LocalPipeline = build(LocalPipeline::builder(registry(), memory_store())).build();
    match pipeline
        .gateway
        .send_and_wait(open(&account_id(), 10), WaitPlan::new(stage))
        .await
    {
        Err(CommandResultError::Failed(result)) => *result,
        other => panic!("expected the {stage} step to fail, got {other:?}"),
    }
}

fn says_it_was_appended(answer: &CommandResult, stage: CommandStage, code: ErrorCode) {
    assert!(!answer.succeeded);
    assert_eq!(answer.stage, stage);
    assert_eq!(answer.error_code, code, "Wow's field keeps the step's code");
    assert_eq!(answer.aggregate_version, Some(1));
    assert_eq!(answer.result[RECORDED], true, "{answer:?}");
    assert_eq!(answer.result[FAILED_STAGE], stage.as_str());
    assert_eq!(
        answer.result[PROCESSED_OUTCOME],
        serde_json::json!({"stage": "PROCESSED", "succeeded": true, "aggregateVersion": 1})
    );
    assert!(
        answer
            .error_msg
            .starts_with("the command was appended at version 1 (PROCESSED); then"),
        "{}",
        answer.error_msg
    );
}

#[tokio::test]
async fn a_failed_saga_step_answers_that_the_command_was_appended() {
    let answer = failed_at(|b| b.saga(Arc::new(FailingSaga)), CommandStage::SagaHandled).await;
    says_it_was_appended(
        &answer,
        CommandStage::SagaHandled,
        ErrorCode::IllegalAccessOwnerAggregate,
    );
    assert!(answer
        .error_msg
        .ends_with("the welcome bonus is another owner's"));
}

#[tokio::test]
async fn a_failed_projection_answers_that_the_command_was_appended() {
    let answer = failed_at(
        |b| b.projection(Arc::new(Failing("mailer-view"))),
        CommandStage::Projected,
    )
    .await;
    says_it_was_appended(
        &answer,
        CommandStage::Projected,
        ErrorCode::ServiceUnavailable,
    );
}

#[tokio::test]
async fn a_failed_event_processor_answers_that_the_command_was_appended() {
    let answer = failed_at(
        |b| b.event_processor(Arc::new(Failing("mailer"))),
        CommandStage::EventHandled,
    )
    .await;
    says_it_was_appended(
        &answer,
        CommandStage::EventHandled,
        ErrorCode::ServiceUnavailable,
    );
}

#[tokio::test]
async fn a_rejected_command_answers_as_before_with_nothing_said_of_later_steps() {
    let pipeline = LocalPipeline::builder(registry(), memory_store())
        .saga(Arc::new(FailingSaga))
        .build();
    let id = account_id();
    pipeline
        .gateway
        .send_and_wait(open(&id, 10), WaitPlan::processed())
        .await
        .unwrap();
    let rejected = match pipeline
        .gateway
        .send_and_wait(open(&id, 10), WaitPlan::new(CommandStage::SagaHandled))
        .await
    {
        Err(CommandResultError::Failed(result)) => *result,
        other => panic!("a second open is refused: {other:?}"),
    };
    assert_eq!(rejected.stage, CommandStage::Processed);
    assert!(rejected.result.get(FAILED_STAGE).is_none());
    assert!(!rejected.error_msg.starts_with("the command was appended"));
}
