//! A saga re-run follows the branch of its first run (SPEC ID-6, DS-3): a transfer to an
//! account that did not exist yet is cancelled, and running the saga again on the same
//! `TransferPrepared` after the account was opened (what catch-up after a lost position, or
//! a compensation retry, does) neither credits it nor holds the money twice. Money is
//! conserved on every backend, in the same process and after a restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use support::bank::{Bank, BankOptions};
use support::{account, cmd, open, Store, Target};
use wow_core::eventsourcing::{EventStore, InMemoryEventStore, RequestDecision};
use wow_core::saga::saga_request_id;
use wow_core::{id, AggregateId, CommandStage, ErrorCode, Stores};
use wow_example_bank::account::*;
use wow_example_bank::registry;
use wow_runtime::command::WaitPlan;
use wow_runtime::eventsourcing::load_aggregate;

/// Where the bank keeps its history and read models.
#[derive(Clone)]
enum Backend {
    Memory(Arc<dyn EventStore>),
    Durable(Store),
}

impl Backend {
    async fn start(&self) -> Bank {
        match self {
            Backend::Memory(store) => Bank::start(Stores::in_memory().with_events(store.clone()))
                .await
                .unwrap(),
            Backend::Durable(store) => Bank::start_with(store.stores(), BankOptions::default())
                .await
                .unwrap(),
        }
    }

    fn events(&self) -> Arc<dyn EventStore> {
        match self {
            Backend::Memory(store) => store.clone(),
            Backend::Durable(store) => store.events(),
        }
    }
}

async fn state(store: &dyn EventStore, id: &AggregateId) -> AccountState {
    let registry = registry().unwrap();
    let runtime = registry.get("account").unwrap();
    let loaded = load_aggregate(runtime.as_ref(), store, None, id)
        .await
        .unwrap();
    loaded.downcast_ref::<AccountState>().unwrap().clone()
}

/// Re-runs the transfer saga on `stream`, as catch-up or a compensation retry does.
async fn rerun_saga(bank: &Bank, stream: &wow_core::DomainEventStream) {
    let saga = bank.pipeline().dispatcher.consumer("transfer").unwrap();
    bank.pipeline()
        .dispatcher
        .run_consumer(&saga, stream)
        .await
        .unwrap();
}

async fn a_rerun_after_the_target_opened_keeps_the_first_branch(backend: Backend, restart: bool) {
    let suffix = id::new_id();
    let (alice, bob) = (
        account(&format!("alice-{suffix}")),
        account(&format!("bob-{suffix}")),
    );
    let store = backend.events();
    let bank = backend.start().await;
    open(&bank, &alice, 100).await;
    let transfer = AccountCommand::Transfer(Transfer {
        to: bob.id.clone(),
        amount: 30,
    });
    let done = bank
        .pipeline()
        .gateway
        .send_and_wait(
            cmd(&alice, transfer),
            WaitPlan::new(CommandStage::SagaHandled),
        )
        .await
        .unwrap();
    assert_eq!(done.result["commands"][1]["command"], "cancel_transfer");
    let prepared = store.load(&alice, 2, 2).await.unwrap().remove(0);
    let event_id = prepared.body[0].id.clone();
    match store
        .find_decision(&bob, &saga_request_id(&event_id, 0))
        .await
        .unwrap()
    {
        Some(RequestDecision::Rejected(record)) => {
            assert_eq!(record.error_code, ErrorCode::NotFound)
        }
        other => panic!("the first step's rejection is recorded, got {other:?}"),
    }

    open(&bank, &bob, 0).await;
    let bank = if restart {
        bank.flush().await;
        drop(bank);
        backend.start().await
    } else {
        bank
    };
    rerun_saga(&bank, &prepared).await;
    rerun_saga(&bank, &prepared).await;

    let (a, b) = (
        state(store.as_ref(), &alice).await,
        state(store.as_ref(), &bob).await,
    );
    assert_eq!((a.balance, a.held), (100, 0), "Alice's hold released once");
    assert_eq!(
        b.balance, 0,
        "Bob was never credited: the transfer was cancelled"
    );
    assert_eq!(
        a.balance + a.held + b.balance + b.held,
        100,
        "the bank holds what went in"
    );
    let bob_history = store.load(&bob, 1, u64::MAX).await.unwrap();
    assert_eq!(bob_history.len(), 1, "only Bob's open");
}

#[tokio::test]
async fn memory_saga_rerun_keeps_the_first_branch() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    a_rerun_after_the_target_opened_keeps_the_first_branch(Backend::Memory(store.clone()), false)
        .await;
    a_rerun_after_the_target_opened_keeps_the_first_branch(Backend::Memory(store), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_saga_rerun_keeps_the_first_branch() {
    let target = Target::sqlite();
    let backend = Backend::Durable(Store::open(&target.url()).await);
    a_rerun_after_the_target_opened_keeps_the_first_branch(backend.clone(), false).await;
    a_rerun_after_the_target_opened_keeps_the_first_branch(backend, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_saga_rerun_keeps_the_first_branch() {
    let Some(target) = Target::postgres().await else {
        return;
    };
    let backend = Backend::Durable(Store::open(&target.url()).await);
    a_rerun_after_the_target_opened_keeps_the_first_branch(backend.clone(), false).await;
    a_rerun_after_the_target_opened_keeps_the_first_branch(backend, true).await;
}
