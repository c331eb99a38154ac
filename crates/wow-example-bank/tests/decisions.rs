//! One decision per intent on the durable stores, on the paths a deployment takes (SPEC ID-6,
//! ID-7, RQ-4): a resend after a restart, two processes over one database, a rejection
//! replayed after the state changed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::bank::{Bank, BankOptions};
use support::{account, cmd, open, send_ok, Store, Target};
use wow_core::command::{CommandResultError, JsonCommand, REPLAYED};
use wow_core::{id, AggregateId, CommandResult, ErrorCode};
use wow_example_bank::account::*;
use wow_runtime::command::WaitPlan;

/// A process over `store`: its own Bloom filters, cache and consumers.
async fn process(store: &Store) -> Bank {
    Bank::start_with(store.stores(), BankOptions::default())
        .await
        .unwrap()
}

async fn refused(bank: &Bank, command: JsonCommand) -> CommandResult {
    match bank
        .pipeline()
        .gateway
        .send_and_wait(command, WaitPlan::processed())
        .await
    {
        Err(CommandResultError::Failed(result)) => *result,
        other => panic!("expected a failed result, got {other:?}"),
    }
}

fn withdraw(id: &AggregateId, amount: i64) -> JsonCommand {
    cmd(id, AccountCommand::Withdraw(Amount { amount }))
}

fn deposit(id: &AggregateId, amount: i64) -> JsonCommand {
    cmd(id, AccountCommand::Deposit(Amount { amount }))
}

async fn opened(bank: &Bank, balance: i64) -> AggregateId {
    let id = account(&id::new_id());
    open(bank, &id, balance).await;
    id
}

async fn decisions_hold_across_processes(url: &str) {
    let store = Store::open(url).await;

    // An applied withdrawal resent after a restart: the new process's filters forgot it and
    // its handler would refuse it on the new balance; history answers.
    let first = process(&store).await;
    let id = opened(&first, 100).await;
    let withdrawal = withdraw(&id, 100).with_request_id("w-1");
    send_ok(&first, withdrawal.clone()).await;
    let too_much = withdraw(&id, 50).with_request_id("w-2");
    let rejected = refused(&first, too_much.clone()).await;
    assert_eq!(
        rejected.error_code,
        ErrorCode::domain("InsufficientBalance")
    );
    first.flush().await;
    drop(first);

    let restarted = process(&store).await;
    let mut again = withdrawal.clone();
    again.id = id::new_id();
    let duplicate = refused(&restarted, again).await;
    assert_eq!(duplicate.error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(duplicate.aggregate_version, Some(2));

    // The rejected one stays rejected after the account could pay.
    send_ok(&restarted, deposit(&id, 500)).await;
    let mut again = too_much.clone();
    again.id = id::new_id();
    let replayed = refused(&restarted, again).await;
    assert_eq!(replayed.error_code, rejected.error_code);
    assert_eq!(replayed.error_msg, rejected.error_msg);
    assert_eq!(replayed.result.get(REPLAYED), Some(&true.into()));

    // Two processes over one database (a second connection to it, with its own writer): B
    // writes behind A's cache; A decides on fresh state.
    let other = process(&Store::open(url).await).await;
    let id = opened(&restarted, 11).await;
    send_ok(&other, deposit(&id, 2)).await; // balance 13, version 2
    let paid = send_ok(&restarted, withdraw(&id, 12)).await;
    assert_eq!(
        paid.aggregate_version,
        Some(3),
        "not refused on a cached 11"
    );
    send_ok(&other, deposit(&id, 1)).await; // version 4
    let pinned = send_ok(&restarted, deposit(&id, 1).with_expected_version(4)).await;
    assert_eq!(pinned.aggregate_version, Some(5));
    let history = store.events().load(&id, 1, u64::MAX).await.unwrap();
    assert_eq!(history.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_decisions_hold_across_restarts_and_processes() {
    let target = Target::sqlite();
    decisions_hold_across_processes(&target.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_decisions_hold_across_restarts_and_processes() {
    let Some(target) = Target::postgres().await else {
        return;
    };
    decisions_hold_across_processes(&target.url()).await;
}
