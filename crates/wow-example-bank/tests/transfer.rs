//! The transfer saga end to end in one process: confirm, cancel, redelivery.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use support::bank::Bank;
use support::{cmd, open, send_ok};
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::{id, AggregateId, CommandStage};
use wow_example_bank::account::*;
use wow_runtime::command::WaitPlan;

/// The view of `id` once it has applied `version`: projections run after the stage a test
/// waited for, on the account's own event partition.
async fn view_at(
    bank: &Bank,
    id: &AggregateId,
    version: u64,
) -> wow_example_bank::projection::AccountView {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(view) = bank.account_view(id).await.unwrap() {
            if view.version >= version {
                return view;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the view of {} never reached version {version}",
            id.id
        );
        tokio::task::yield_now().await;
    }
}

async fn bank() -> Bank {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    Bank::start(wow_core::Stores::in_memory().with_events(store))
        .await
        .unwrap()
}

fn account() -> AggregateId {
    AggregateId::new("bank", "account", id::new_id(), "t")
}

async fn transfer(
    bank: &Bank,
    from: &AggregateId,
    to: &AggregateId,
    amount: i64,
) -> wow_core::CommandResult {
    let command = cmd(
        from,
        AccountCommand::Transfer(Transfer {
            to: to.id.clone(),
            amount,
        }),
    );
    bank.pipeline()
        .gateway
        .send_and_wait(command, WaitPlan::new(CommandStage::SagaHandled))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_transfer_moves_the_money_and_the_views_follow() {
    let bank = bank().await;
    let (a, b) = (account(), account());
    open(&bank, &a, 100).await;
    open(&bank, &b, 5).await;
    let done = transfer(&bank, &a, &b, 30).await;
    let commands = done.result["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 2);
    assert_eq!(commands[0]["command"], "receive_transfer");
    assert_eq!(commands[1]["command"], "confirm_transfer");

    let view_a = view_at(&bank, &a, 3).await;
    assert_eq!((view_a.balance, view_a.held, view_a.version), (70, 0, 3));
    let view_b = view_at(&bank, &b, 2).await;
    assert_eq!((view_b.balance, view_b.version), (35, 2));
}

#[tokio::test]
async fn a_transfer_to_a_missing_or_frozen_account_is_cancelled() {
    let bank = bank().await;
    let (a, missing, frozen) = (account(), account(), account());
    open(&bank, &a, 100).await;
    open(&bank, &frozen, 0).await;
    send_ok(&bank, cmd(&frozen, AccountCommand::Freeze)).await;
    for target in [&missing, &frozen] {
        let done = transfer(&bank, &a, target, 40).await;
        assert_eq!(done.result["commands"][1]["command"], "cancel_transfer");
    }
    let view = view_at(&bank, &a, 5).await;
    assert_eq!((view.balance, view.held), (100, 0), "every hold released");
}

#[tokio::test]
async fn a_redelivered_transfer_event_moves_the_money_once() {
    let bank = bank().await;
    let (a, b) = (account(), account());
    open(&bank, &a, 100).await;
    open(&bank, &b, 0).await;
    transfer(&bank, &a, &b, 10).await;
    let prepared = bank
        .pipeline()
        .store()
        .load(&a, 2, 2)
        .await
        .unwrap()
        .remove(0);
    bank.pipeline().dispatcher.dispatch(&prepared).await;
    assert_eq!(view_at(&bank, &b, 2).await.balance, 10);
    let view_a = view_at(&bank, &a, 3).await;
    assert_eq!((view_a.balance, view_a.held), (90, 0));
    let withdrawn = bank
        .pipeline()
        .gateway
        .send_and_wait(
            cmd(&a, AccountCommand::Withdraw(Amount { amount: 5 })),
            WaitPlan::new(CommandStage::EventHandled),
        )
        .await
        .unwrap();
    assert_eq!(withdrawn.aggregate_version, Some(4));
    let rows = bank.notifications().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].amount, 5);
    let again = bank
        .pipeline()
        .store()
        .load(&a, 4, 4)
        .await
        .unwrap()
        .remove(0);
    bank.pipeline().dispatcher.dispatch(&again).await;
    assert_eq!(
        bank.notifications().await.len(),
        1,
        "one notification per Withdrawn event"
    );
}
