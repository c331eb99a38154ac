//! Event compensation end to end on the durable stores (SPEC DS-4): the `account_balance`
//! projection fails while its table is broken and the failure is recorded in the store's
//! database; the next stream fills the gap from history, and the retry finds its stream in,
//! without touching history. A restart resumes every consumer from its position.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::bank::{Bank, BankOptions};
use support::{account, cmd, Store, Target};
use wow_core::command::{CommandResultError, JsonCommand};
use wow_core::compensation::{ExecutionFailedStatus, FailureQuery, RetrySpec};
use wow_core::{id, CommandResult, CommandStage, ErrorCode};
use wow_example_bank::account::*;
use wow_runtime::command::WaitPlan;

async fn projected(bank: &Bank, command: JsonCommand) -> CommandResult {
    match bank
        .pipeline()
        .gateway
        .send_and_wait(command, WaitPlan::new(CommandStage::Projected))
        .await
    {
        Ok(result) => result,
        Err(CommandResultError::Failed(result)) => *result,
        Err(other) => panic!("no result: {other}"),
    }
}

/// Retries by hand only, due at once.
fn options() -> BankOptions {
    BankOptions {
        retry: RetrySpec {
            initial_backoff_ms: 0,
            ..RetrySpec::default()
        },
        retry_every: None,
        ..BankOptions::default()
    }
}

async fn start(db: &Store) -> Bank {
    Bank::start_with(db.stores(), options()).await.unwrap()
}

/// The compensation records of `bank` in `status`.
async fn records(
    bank: &Bank,
    status: ExecutionFailedStatus,
) -> Vec<wow_core::compensation::ExecutionFailed> {
    bank.compensation()
        .failures()
        .list(&FailureQuery {
            status: Some(status),
            ..FailureQuery::default()
        })
        .await
        .unwrap()
}

async fn a_broken_projection_is_recorded_and_repaired_in_order(target: Target) {
    let db = &Store::open(&target.url()).await;
    let a = account(&id::new_id());
    {
        let bank = start(db).await;
        let opened = projected(
            &bank,
            cmd(
                &a,
                AccountCommand::Open(Open {
                    name: "Ann".into(),
                    balance: 100,
                }),
            ),
        )
        .await;
        assert!(opened.succeeded, "{opened:?}");
        a_deposit_fails_while_the_views_table_is_broken(&bank, db, &a).await;
        the_next_stream_waits_behind_the_failed_one_and_only_that_one_is_recorded(&bank, &a).await;
        the_retry_runs_the_failed_stream_then_the_parked_one(&bank, &a).await;
        bank.flush().await;
    }

    // A restart resumes from the positions: nothing is handled twice, nothing is left.
    let bank = start(db).await;
    for (consumer, done) in bank.caught_up() {
        assert_eq!(
            done.streams_handled, 0,
            "{consumer} resumed from its position"
        );
    }
    let succeeded = records(&bank, ExecutionFailedStatus::Succeeded).await;
    assert_eq!(succeeded.len(), 2, "the records are kept, marked SUCCEEDED");
}

/// With the views' table renamed away, a deposit's projection fails `IllegalState`; the
/// table is put back.
async fn a_deposit_fails_while_the_views_table_is_broken(
    bank: &Bank,
    db: &Store,
    a: &wow_core::AggregateId,
) {
    db.execute("ALTER TABLE view_row RENAME TO view_row_off")
        .await;
    let broken = projected(bank, cmd(a, AccountCommand::Deposit(Amount { amount: 10 }))).await;
    assert!(!broken.succeeded);
    assert_eq!(broken.error_code, ErrorCode::IllegalState);
    db.execute("ALTER TABLE view_row_off RENAME TO view_row")
        .await;
}

/// The table is back: version 3 does not skip version 2, it waits behind it (SPEC DS-5): the
/// view stays at version 1 and answers `StreamParked`; only the failed stream is recorded.
async fn the_next_stream_waits_behind_the_failed_one_and_only_that_one_is_recorded(
    bank: &Bank,
    a: &wow_core::AggregateId,
) {
    let parked = projected(bank, cmd(a, AccountCommand::Deposit(Amount { amount: 5 }))).await;
    assert_eq!(parked.error_code, ErrorCode::StreamParked, "{parked:?}");
    let view = bank.account_view(a).await.unwrap().unwrap();
    assert_eq!((view.balance, view.version), (100, 1));

    // Both projections whose rows live in that table failed on version 2: the view and the
    // materialized snapshots (snapshot queries are on by default).
    let failed = records(bank, ExecutionFailedStatus::Failed).await;
    let mut versions: Vec<_> = failed
        .iter()
        .map(|r| (r.consumer.as_str(), r.version))
        .collect();
    versions.sort_unstable();
    assert_eq!(
        versions,
        vec![("account_balance", 2), ("snapshot", 2)],
        "only the failed stream"
    );
}

/// The retry runs the failed stream and then the one parked behind it, in order, changes
/// nothing in history, and leaves nothing due.
async fn the_retry_runs_the_failed_stream_then_the_parked_one(
    bank: &Bank,
    a: &wow_core::AggregateId,
) {
    let history = bank.pipeline().store().load(a, 1, u64::MAX).await.unwrap();
    let pass = bank.compensation().run_due(100).await.unwrap();
    assert_eq!(
        (pass.retried, pass.succeeded),
        (2, 2),
        "the retries of version 2 succeed and release version 3"
    );
    let view = bank.account_view(a).await.unwrap().unwrap();
    assert_eq!((view.balance, view.version), (115, 3));
    assert_eq!(
        bank.pipeline().store().load(a, 1, u64::MAX).await.unwrap(),
        history
    );
    assert_eq!(bank.compensation().run_due(100).await.unwrap().retried, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_broken_projection_is_recorded_and_repaired_in_order() {
    a_broken_projection_is_recorded_and_repaired_in_order(Target::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_broken_projection_is_recorded_and_repaired_in_order() {
    if let Some(target) = Target::postgres().await {
        a_broken_projection_is_recorded_and_repaired_in_order(target).await;
    }
}
