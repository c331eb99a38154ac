//! A domain rejection carries its error's fields under `result.rejection`, so a caller (a
//! saga's step) decodes the whole typed error; a replayed rejection carries the code only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::bank::Bank;
use support::*;
use wow_core::aggregate::DecodeDomainError;
use wow_core::command::{CommandResultError, REJECTION_DETAIL};
use wow_core::{CommandMessage, Stores};
use wow_example_bank::account::{AccountCommand, AccountError, Amount};
use wow_runtime::command::WaitPlan;

#[tokio::test]
async fn a_rejection_answers_its_fields_and_decodes_to_the_typed_error() {
    let bank = Bank::start(Stores::in_memory()).await.unwrap();
    let a = account("detail-a");
    open(&bank, &a, 10).await;

    let withdraw = CommandMessage::of(a.clone(), AccountCommand::Withdraw(Amount { amount: 25 }))
        .into_json()
        .unwrap();
    let resend = withdraw.clone();
    let first = match bank
        .pipeline()
        .gateway
        .send_and_wait(withdraw, WaitPlan::processed())
        .await
    {
        Err(CommandResultError::Failed(result)) => *result,
        other => panic!("expected a rejection, got {other:?}"),
    };
    let detail = first
        .result
        .get(REJECTION_DETAIL)
        .cloned()
        .expect("the fields");
    let decoded = AccountError::decode(&first.error_code, detail.as_object().unwrap());
    assert_eq!(
        decoded,
        Some(AccountError::InsufficientBalance {
            balance: 10,
            amount: 25
        })
    );

    // The resend is answered from the recorded decision: same code, no fields, same kind.
    let replayed = match bank
        .pipeline()
        .gateway
        .send_and_wait(resend, WaitPlan::processed())
        .await
    {
        Err(CommandResultError::Failed(result)) => *result,
        other => panic!("expected the recorded rejection, got {other:?}"),
    };
    assert_eq!(replayed.error_code, first.error_code);
    let kind = AccountError::kind_of(&replayed.error_code);
    assert!(kind.is_some(), "the code names a kind of AccountError");
    assert_eq!(kind, AccountError::kind_of(&first.error_code));
}
