//! The transfer saga with the saga test kit, no store and no bus: given `TransferPrepared`,
//! it credits the target in the same tenant and then confirms at the source, or cancels when
//! the target is missing, frozen or full; any other rejection fails it so compensation
//! retries. Request ids are derived from the event (SPEC DS-3), as a running bank derives them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use support::bank::Bank;
use wow_core::aggregate::DecodeDomainError;
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::saga::{saga_request_id, SagaExpect, SagaGiven, SagaReply, SagaSpec};
use wow_core::{AggregateId, CommandMessage, CommandStage, DomainError, ErrorCode};
use wow_example_bank::account::*;
use wow_example_bank::transfer::TransferSaga;
use wow_runtime::command::WaitPlan;

const TENANT: &str = "tenant-7";

fn account(id: &str) -> AggregateId {
    AggregateId::new("bank", "account", id, TENANT)
}

/// Alice's `TransferPrepared` of 30 to Bob, at her version 2.
fn prepared() -> SagaGiven<TransferSaga> {
    SagaSpec::new(TransferSaga)
        .with_id("alice")
        .with_tenant(TENANT)
        .with_version(2)
        .given([AccountEvent::TransferPrepared(TransferStep {
            account: "bob".into(),
            amount: 30,
        })])
}

/// The receive step answers `receive`; the settle step succeeds.
async fn receive_answers(receive: SagaReply) -> SagaExpect {
    prepared()
        .when_replying(move |command| match command.name.as_str() {
            "receive_transfer" => receive.clone(),
            _ => SagaReply::Succeeded,
        })
        .await
}

#[tokio::test]
async fn prepared_credits_the_target_in_the_same_tenant_then_confirms_at_the_source() {
    let expect = prepared()
        .when_all_succeed()
        .await
        .expect_ok()
        .expect_command_names(&["receive_transfer", "confirm_transfer"]);
    let event = expect.stream().body[0].id.clone();

    let receive = expect.expect_command(0);
    assert_eq!(receive.aggregate_id, account("bob"));
    assert_eq!(receive.request_id, saga_request_id(&event, 0));
    let AccountCommand::ReceiveTransfer(body) = receive.decode::<AccountCommand>().unwrap() else {
        panic!("the first step credits the target");
    };
    assert_eq!(
        body,
        ReceiveTransfer {
            from: "alice".into(),
            amount: 30
        }
    );

    let confirm = expect.expect_command(1);
    assert_eq!(confirm.aggregate_id, account("alice"));
    assert_eq!(confirm.request_id, saga_request_id(&event, 1));
    let AccountCommand::ConfirmTransfer(body) = confirm.decode::<AccountCommand>().unwrap() else {
        panic!("the second step confirms at the source");
    };
    assert_eq!(
        body,
        Transfer {
            to: "bob".into(),
            amount: 30
        }
    );
}

#[tokio::test]
async fn a_redelivered_prepared_sends_the_same_intents() {
    let first = prepared().when_all_succeed().await;
    let second = prepared().when_all_succeed().await;
    assert_eq!(first.expect_commands(), second.expect_commands());
}

#[tokio::test]
async fn a_receive_rejected_as_missing_frozen_or_full_is_cancelled_at_the_source() {
    let full = AccountError::BalanceOverflow {
        balance: i64::MAX,
        held: 0,
        amount: 30,
    };
    for rejection in [
        SagaReply::Rejected(ErrorCode::NotFound),
        SagaReply::rejected_by(&AccountError::AccountFrozen),
        SagaReply::rejected_by(&full),
        // A replayed rejection (SPEC ID-6) carries the code only: the kind still decides.
        SagaReply::Rejected(AccountError::AccountFrozen.error_code()),
        SagaReply::Rejected(full.error_code()),
    ] {
        let expect = receive_answers(rejection.clone())
            .await
            .expect_ok()
            .expect_command_names(&["receive_transfer", "cancel_transfer"]);
        let cancel = expect.expect_command(1);
        assert_eq!(cancel.aggregate_id, account("alice"), "{rejection:?}");
        assert_eq!(
            cancel.request_id,
            saga_request_id(&expect.stream().body[0].id, 1)
        );
        let AccountCommand::CancelTransfer(body) = cancel.decode::<AccountCommand>().unwrap()
        else {
            panic!("{rejection:?} cancels the transfer");
        };
        assert_eq!(
            body,
            Transfer {
                to: "bob".into(),
                amount: 30
            }
        );
    }
}

#[tokio::test]
async fn another_rejection_fails_the_saga_without_settling_so_compensation_retries() {
    let not_held = AccountError::NotHeld {
        held: 0,
        amount: 30,
    };
    receive_answers(SagaReply::rejected_by(&not_held))
        .await
        .expect_failure(not_held.error_code())
        .expect_command_names(&["receive_transfer"]);
    receive_answers(SagaReply::Rejected(ErrorCode::ServiceUnavailable))
        .await
        .expect_failure(ErrorCode::ServiceUnavailable)
        .expect_command_names(&["receive_transfer"]);
    receive_answers(SagaReply::TimedOut)
        .await
        .expect_failure(ErrorCode::RequestTimeout)
        .expect_command_names(&["receive_transfer"]);
}

#[tokio::test]
async fn a_receive_already_sent_by_an_earlier_delivery_goes_on_to_confirm() {
    receive_answers(SagaReply::Rejected(ErrorCode::DuplicateRequestId))
        .await
        .expect_ok()
        .expect_command_names(&["receive_transfer", "confirm_transfer"]);
}

#[tokio::test]
async fn a_failed_settle_fails_the_saga() {
    prepared()
        .when_replying(|command| match command.name.as_str() {
            "confirm_transfer" => SagaReply::Rejected(ErrorCode::ServiceUnavailable),
            _ => SagaReply::Succeeded,
        })
        .await
        .expect_failure(ErrorCode::ServiceUnavailable)
        .expect_command_names(&["receive_transfer", "confirm_transfer"]);
}

#[tokio::test]
async fn other_events_send_nothing() {
    SagaSpec::new(TransferSaga)
        .given([
            AccountEvent::Deposited(Moved { amount: 5 }),
            AccountEvent::TransferReceived(TransferStep {
                account: "carol".into(),
                amount: 5,
            }),
            AccountEvent::AccountFrozen,
        ])
        .when_all_succeed()
        .await
        .expect_ok()
        .expect_no_commands();
}

/// The kit runs the saga path of a service: on the stream a running bank appended, it sends
/// what the bank's saga sent, to the same aggregates, with the same request ids.
#[tokio::test]
async fn the_spec_derives_the_request_ids_a_running_bank_derives() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let bank = Bank::start(wow_core::Stores::in_memory().with_events(store.clone()))
        .await
        .unwrap();
    let (alice, bob) = (account("alice"), account("bob"));
    for id in [&alice, &bob] {
        let open = AccountCommand::Open(Open {
            name: id.id.clone(),
            balance: 100,
        });
        let open = CommandMessage::of(id.clone(), open).into_json().unwrap();
        bank.pipeline()
            .gateway
            .send_and_wait(open, WaitPlan::processed())
            .await
            .unwrap();
    }
    let transfer = AccountCommand::Transfer(Transfer {
        to: "bob".into(),
        amount: 30,
    });
    let transfer = CommandMessage::of(alice.clone(), transfer)
        .into_json()
        .unwrap();
    let done = bank
        .pipeline()
        .gateway
        .send_and_wait(transfer, WaitPlan::new(CommandStage::SagaHandled))
        .await
        .unwrap();
    let served = done.result["commands"].as_array().unwrap();
    let stream = store.load(&alice, 2, 2).await.unwrap().remove(0);

    let expect = SagaSpec::new(TransferSaga)
        .given_stream(stream)
        .when_all_succeed()
        .await
        .expect_ok();
    let specced = expect.expect_commands();
    assert_eq!(specced.len(), served.len());
    for (spec, served) in specced.iter().zip(served) {
        assert_eq!(spec.name, served["command"].as_str().unwrap());
        assert_eq!(spec.request_id, served["requestId"].as_str().unwrap());
        assert_eq!(
            spec.aggregate_id.id,
            served["aggregateId"].as_str().unwrap()
        );
        assert_eq!(spec.aggregate_id.tenant_id, TENANT);
    }
}

/// Streams of another aggregate never reach the saga, whatever their events are named.
#[tokio::test]
async fn streams_of_other_aggregates_are_skipped_by_type() {
    use wow_core::testing_example::{Added, Counter, CounterEvent};
    SagaSpec::new(TransferSaga)
        .given_of::<Counter>([CounterEvent::Added(Added { by: 1 })])
        .when_all_succeed()
        .await
        .expect_ok()
        .expect_no_commands();
}

/// A stream of accounts that does not decode fails the saga (and is compensated), rather
/// than being skipped silently.
#[tokio::test]
async fn a_stream_that_does_not_decode_fails_the_saga() {
    let mut stream = prepared().stream().clone();
    stream.body[0].name = "TransferPrepped".into();
    SagaSpec::new(TransferSaga)
        .given_stream(stream)
        .when_all_succeed()
        .await
        .expect_failure(ErrorCode::IllegalState)
        .expect_no_commands();
}

/// Every account rejection is told back from a result: its kind from the code alone, the
/// whole error from the code and the fields the result carries.
#[test]
fn every_account_error_round_trips_through_a_rejection() {
    let errors = [
        AccountError::InsufficientBalance {
            balance: 3,
            amount: 4,
        },
        AccountError::AccountFrozen,
        AccountError::SameAccount,
        AccountError::BalanceOverflow {
            balance: i64::MAX,
            held: 1,
            amount: 2,
        },
        AccountError::NotHeld { held: 5, amount: 6 },
    ];
    for error in errors {
        let code = error.error_code();
        assert_eq!(
            AccountError::kind_of(&code),
            Some(error.kind()),
            "{error:?}"
        );
        assert_eq!(
            AccountError::decode(&code, &error.detail()),
            Some(error.clone())
        );
    }
    assert_eq!(AccountError::kind_of(&ErrorCode::NotFound), None);
    assert_eq!(
        AccountError::decode(
            &AccountError::AccountFrozen.error_code(),
            &Default::default()
        ),
        Some(AccountError::AccountFrozen)
    );
    let missing = AccountError::decode(
        &AccountError::NotHeld { held: 1, amount: 2 }.error_code(),
        &Default::default(),
    );
    assert_eq!(missing, None, "fields are never guessed");
}

/// The typed step error holds the whole target error when the result carries its fields.
#[tokio::test]
async fn a_rejected_step_holds_the_typed_error() {
    use std::sync::{Arc, Mutex};
    use wow_core::event::ConsumerError;
    use wow_core::saga::{Saga, SagaContext, StepError};
    use wow_core::DomainEventStream;

    /// What the probe saw: the kind of each rejection, and the whole error when carried.
    type Seen = Arc<Mutex<Vec<(AccountErrorKind, Option<AccountError>)>>>;

    #[derive(Debug, Default)]
    struct Probe(Seen);

    #[async_trait::async_trait]
    impl Saga for Probe {
        type Aggregate = Account;

        fn name(&self) -> &str {
            "probe"
        }

        async fn on_event(
            &self,
            _: &AccountEvent,
            stream: &DomainEventStream,
            ctx: &SagaContext<'_>,
        ) -> Result<(), ConsumerError> {
            match ctx
                .send_to::<Account>(stream.aggregate_id.clone(), AccountCommand::Freeze)
                .await
            {
                Err(StepError::Rejected { kind, error, .. }) => {
                    self.0.lock().unwrap().push((kind, error));
                    Ok(())
                }
                other => panic!("expected a rejection, got {other:?}"),
            }
        }
    }

    let full = AccountError::BalanceOverflow {
        balance: 1,
        held: 2,
        amount: 3,
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    for reply in [
        SagaReply::rejected_by(&full),
        SagaReply::Rejected(full.error_code()),
    ] {
        SagaSpec::new(Probe(seen.clone()))
            .given([AccountEvent::AccountFrozen])
            .when_replying(move |_| reply.clone())
            .await
            .expect_ok();
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (AccountErrorKind::BalanceOverflow, Some(full)),
            (AccountErrorKind::BalanceOverflow, None),
        ]
    );
}
