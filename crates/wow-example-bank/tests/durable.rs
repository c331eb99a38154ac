//! The read models in the store's database: redelivered streams, and a restart that catches
//! up from the positions, change nothing (SPEC DS-1, DS-2).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::bank::Bank;
use support::{cmd, send_ok};
use wow_core::eventsourcing::History;
use wow_core::Stores;
use wow_core::{id, AggregateId, CommandStage};
use wow_example_bank::account::*;
use wow_runtime::command::WaitPlan;
use wow_sqlite::{SqliteOptions, SqliteStore};

async fn bank(store: &SqliteStore) -> Bank {
    Bank::start(Stores::of(store.clone())).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redeliveries_and_restarts_leave_one_effect_per_event() {
    let folder = tempfile::tempdir().unwrap();
    let options = SqliteOptions::new(folder.path().join("bank.db"));
    let (a, b) = (
        AggregateId::new("bank", "account", id::new_id(), "(0)"),
        AggregateId::new("bank", "account", id::new_id(), "(0)"),
    );
    {
        let store = SqliteStore::open(options.clone()).await.unwrap();
        let bank = bank(&store).await;
        let gateway = &bank.pipeline().gateway;
        let open = AccountCommand::Open(Open {
            name: "Ann".into(),
            balance: 100,
        });
        send_ok(&bank, cmd(&a, open)).await;
        let open = AccountCommand::Open(Open {
            name: "Bob".into(),
            balance: 0,
        });
        send_ok(&bank, cmd(&b, open)).await;
        gateway
            .send_and_wait(
                cmd(
                    &a,
                    AccountCommand::Transfer(Transfer {
                        to: b.id.clone(),
                        amount: 30,
                    }),
                ),
                WaitPlan::new(CommandStage::SagaHandled),
            )
            .await
            .unwrap();
        gateway
            .send_and_wait(
                cmd(&a, AccountCommand::Withdraw(Amount { amount: 5 })),
                WaitPlan::new(CommandStage::EventHandled),
            )
            .await
            .unwrap();

        // Every stream of A delivered again, as after a crash before the acknowledge.
        for stream in store.load(&a, 1, u64::MAX).await.unwrap() {
            bank.pipeline().dispatcher.dispatch(&stream).await;
        }
        let view = bank.account_view(&a).await.unwrap().unwrap();
        assert_eq!((view.balance, view.held, view.version), (65, 0, 4));
        assert_eq!(bank.notifications().await.len(), 1);
    }

    // A new process on the same file, without a graceful stop: the consumers catch up from
    // their positions, and any stream whose position was not written yet is delivered again
    // and found processed.
    let store = SqliteStore::open(options).await.unwrap();
    let bank = bank(&store).await;
    let view_a = bank.account_view(&a).await.unwrap().unwrap();
    assert_eq!(
        (
            view_a.name.as_str(),
            view_a.balance,
            view_a.held,
            view_a.version
        ),
        ("Ann", 65, 0, 4)
    );
    let view_b = bank.account_view(&b).await.unwrap().unwrap();
    assert_eq!((view_b.balance, view_b.version), (30, 2));
    let rows = bank.notifications().await;
    assert_eq!(rows.len(), 1, "one outbox row per Withdrawn event");
    assert_eq!(
        (rows[0].account_id.as_str(), rows[0].amount),
        (a.id.as_str(), 5)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_read_model_is_filled_again_from_history_once() {
    let folder = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(SqliteOptions::new(folder.path().join("bank.db")))
        .await
        .unwrap();
    let a = AggregateId::new("bank", "account", id::new_id(), "(0)");
    {
        let bank = bank(&store).await;
        let open = AccountCommand::Open(Open {
            name: "Ann".into(),
            balance: 50,
        });
        for command in [
            open,
            AccountCommand::Withdraw(Amount { amount: 5 }),
            AccountCommand::Deposit(Amount { amount: 20 }),
        ] {
            bank.pipeline()
                .gateway
                .send_and_wait(cmd(&a, command), WaitPlan::new(CommandStage::SagaHandled))
                .await
                .unwrap();
        }
        bank.flush().await;
    }
    // Each of the bank's views and outboxes emptied by hand (what `wow catch-up --rebuild`
    // does for an outbox; a view it rebuilds beside itself): the next start refills them.
    let stores = Stores::of(store.clone());
    for name in wow_example_bank::READ_MODELS {
        stores.views.clear(name).await.unwrap();
        stores.positions.reset(name).await.unwrap();
    }
    let emptied = wow_example_bank::projection::account_view(stores.views.as_ref(), &a).await;
    assert!(emptied.unwrap().is_none(), "emptied");

    let bank = bank(&store).await;
    let view = bank.account_view(&a).await.unwrap().unwrap();
    assert_eq!(
        (view.balance, view.version),
        (65, 3),
        "a fold of the whole history"
    );
    assert_eq!(bank.notifications().await.len(), 1);
    let transfer = &bank
        .caught_up()
        .iter()
        .find(|(n, _)| n == "transfer")
        .unwrap()
        .1;
    assert_eq!(transfer.streams_handled, 0, "the saga kept its position");
}
