//! An external effect that cannot join the transaction (SPEC DS-2): the bank sends its
//! notification outbox through a mailer, journaled "started" then "done" under a key
//! derived from the event id. A send cut off between the two is confirmed by its key after a
//! restart, never sent twice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use support::bank::{Bank, BankOptions};
use wow_core::eventsourcing::BoxError;
use wow_core::outbox::OutboxSender;
use wow_core::Stores;
use wow_core::{id, AggregateId, CommandMessage, CommandStage};
use wow_example_bank::account::*;
use wow_example_bank::notifications::OutboxRow;
use wow_runtime::command::WaitPlan;
use wow_runtime::outbox::Delivery;
use wow_sqlite::{SqliteOptions, SqliteStore};

/// A mailer that deduplicates by key. `cut_after_send` makes the send of that event go out
/// and then fail, as when the process dies before recording it done; `down` fails every send
/// before anything goes out.
#[derive(Debug, Default)]
struct TestMailer {
    sent: Mutex<HashMap<String, u32>>,
    calls: Mutex<u32>,
    cut_after_send: Mutex<Option<String>>,
    down: Mutex<bool>,
}

#[async_trait]
impl OutboxSender<OutboxRow> for TestMailer {
    async fn send(&self, key: &str, row: &OutboxRow) -> Result<(), BoxError> {
        *self.calls.lock().unwrap() += 1;
        if *self.down.lock().unwrap() {
            return Err("the mailer is down".into());
        }
        *self.sent.lock().unwrap().entry(key.to_owned()).or_default() += 1;
        if self.cut_after_send.lock().unwrap().as_deref() == Some(row.event_id.as_str()) {
            return Err("cut off after sending".into());
        }
        Ok(())
    }

    async fn sent(&self, key: &str) -> Result<bool, BoxError> {
        Ok(self.sent.lock().unwrap().contains_key(key))
    }
}

async fn bank(path: &std::path::Path) -> Bank {
    let store = SqliteStore::open(SqliteOptions::new(path)).await.unwrap();
    Bank::start_with(
        Stores::of(store),
        BankOptions {
            retry_every: None,
            ..BankOptions::default()
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_cut_off_after_it_went_out_is_confirmed_not_repeated() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("bank.db");
    let a = AggregateId::new("bank", "account", id::new_id(), "(0)");
    let mailer = TestMailer::default();
    let rows = {
        let bank = bank(&path).await;
        let open = AccountCommand::Open(Open {
            name: "Ann".into(),
            balance: 100,
        });
        bank.pipeline()
            .gateway
            .send_and_wait(
                CommandMessage::of(a.clone(), open).into_json().unwrap(),
                WaitPlan::processed(),
            )
            .await
            .unwrap();
        for amount in [1, 2, 3] {
            let withdraw = AccountCommand::Withdraw(Amount { amount });
            bank.pipeline()
                .gateway
                .send_and_wait(
                    CommandMessage::of(a.clone(), withdraw).into_json().unwrap(),
                    WaitPlan::new(CommandStage::EventHandled),
                )
                .await
                .unwrap();
        }
        let rows = bank.notifications().await;
        assert_eq!(rows.len(), 3);
        *mailer.cut_after_send.lock().unwrap() = Some(rows[1].event_id.clone());
        let first = bank.deliver(&mailer, 1_000).await.unwrap();
        assert_eq!(
            first,
            Delivery {
                sent: 2,
                failed: 1,
                ..Delivery::default()
            }
        );
        rows
    };

    // A new process on the same file: the journal says row 2 was started and never done.
    *mailer.cut_after_send.lock().unwrap() = None;
    let bank = bank(&path).await;
    let calls_before = *mailer.calls.lock().unwrap();
    let second = bank.deliver(&mailer, 2_000).await.unwrap();
    assert_eq!(
        second,
        Delivery {
            confirmed: 1,
            already_done: 2,
            ..Delivery::default()
        },
        "the cut-off send is confirmed by its key"
    );
    assert_eq!(
        *mailer.calls.lock().unwrap(),
        calls_before,
        "nothing was sent again"
    );
    let third = bank.deliver(&mailer, 3_000).await.unwrap();
    assert_eq!(
        third,
        Delivery {
            already_done: 3,
            ..Delivery::default()
        }
    );
    let sent = mailer.sent.lock().unwrap();
    assert_eq!(sent.len(), 3, "one notification per withdrawal");
    assert!(sent.values().all(|count| *count == 1), "{sent:?}");
    for row in &rows {
        assert!(sent.contains_key(&format!("notification_sender:{}", row.event_id)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_that_never_went_out_is_sent_on_the_next_delivery() {
    let folder = tempfile::tempdir().unwrap();
    let bank = bank(&folder.path().join("bank.db")).await;
    let a = AggregateId::new("bank", "account", id::new_id(), "(0)");
    for command in [
        AccountCommand::Open(Open {
            name: "Ann".into(),
            balance: 10,
        }),
        AccountCommand::Withdraw(Amount { amount: 4 }),
    ] {
        bank.pipeline()
            .gateway
            .send_and_wait(
                CommandMessage::of(a.clone(), command).into_json().unwrap(),
                WaitPlan::new(CommandStage::EventHandled),
            )
            .await
            .unwrap();
    }
    let mailer = TestMailer::default();
    *mailer.down.lock().unwrap() = true;
    let first = bank.deliver(&mailer, 1).await.unwrap();
    assert_eq!(first.failed, 1);
    *mailer.down.lock().unwrap() = false;
    let second = bank.deliver(&mailer, 2).await.unwrap();
    assert_eq!(
        second.sent, 1,
        "no trace at the mailer, so it is sent under the same key"
    );
    assert_eq!(mailer.sent.lock().unwrap().len(), 1);
}
