//! Sagas send commands with request ids derived from the event that caused them (SPEC DS-3).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use support::*;
use wow_core::event::ConsumerError;
use wow_core::saga::{saga_request_id, Saga, SagaContext};
use wow_core::{AggregateId, CommandStage, DomainEventStream};
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::LocalPipeline;

/// Every withdrawal from an account is deposited into one savings account.
#[derive(Debug)]
struct Sweep {
    savings: AggregateId,
}

#[async_trait]
impl Saga for Sweep {
    type Aggregate = Account;

    fn name(&self) -> &str {
        "sweep"
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

#[tokio::test]
async fn a_redelivered_event_does_not_start_a_second_intent() {
    let savings = account_id();
    let saga = Arc::new(Sweep {
        savings: savings.clone(),
    });
    let pipeline = LocalPipeline::builder(registry(), memory_store())
        .saga(saga)
        .build();
    let checking = account_id();
    send_ok(&pipeline.gateway, open(&savings, 0)).await;
    send_ok(&pipeline.gateway, open(&checking, 100)).await;

    let withdraw = command(&checking, AccountCommand::Withdraw(Amount { amount: 30 }));
    let handled = pipeline
        .gateway
        .send_and_wait(withdraw, WaitPlan::new(CommandStage::SagaHandled))
        .await
        .unwrap();
    let sent = handled.result["commands"].as_array().unwrap().clone();
    assert_eq!(sent.len(), 1, "the saga reports the command it sent");

    let stream = pipeline.store().last(&checking).await.unwrap().unwrap();
    let expected_request_id = saga_request_id(&stream.body[0].id, 0);
    assert_eq!(sent[0]["requestId"], expected_request_id.as_str());
    // The saga waited for its deposit to be processed before reporting SAGA_HANDLED.
    assert_eq!(sent[0]["errorCode"], "Ok");
    assert!(pipeline
        .store()
        .find_request(&savings, &expected_request_id)
        .await
        .unwrap()
        .is_some());

    // The event is delivered again: the same request id comes out, and it is a duplicate.
    pipeline.dispatcher.dispatch(&stream).await;
    let deposits: Vec<_> = pipeline
        .store()
        .load(&savings, 1, u64::MAX)
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.body[0].name == "Deposited")
        .collect();
    assert_eq!(deposits.len(), 1, "one deposit for one withdrawal");
    assert_eq!(deposits[0].request_id, expected_request_id);
}
