//! Each consumer kind is killed (a real `abort` of the process) after its write committed and
//! before the delivery was acknowledged; the next process catches up, redelivers, and the
//! read model, outbox or transfer shows exactly one effect (SPEC DS-1, DS-2, DS-3).
//!
//! The killed process is this test binary run again with `crash_child` and an environment
//! variable naming the consumer to kill.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use support::bank::{Bank, BankOptions};
use support::{account, cmd, Store, Target};
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::saga::{DynSaga, Saga, SagaContext};
use wow_core::{AggregateId, CommandStage, DomainEventStream};
use wow_example_bank::account::*;
use wow_example_bank::notifications::NotificationOutbox;
use wow_example_bank::projection::AccountBalance;
use wow_example_bank::registry;
use wow_example_bank::transfer::TransferSaga;
use wow_runtime::command::WaitPlan;
use wow_runtime::outbox::OutboxProcessor;
use wow_runtime::pipeline::LocalPipeline;
use wow_runtime::view::ViewProjection;

const KIND: &str = "WOW_BANK_CRASH_KIND";
const DB: &str = "WOW_BANK_CRASH_STORE";
const A: &str = "WOW_BANK_CRASH_A";
const B: &str = "WOW_BANK_CRASH_B";

/// Runs `inner`, then kills the process when it succeeded on a stream holding `event`:
/// after the consumer's transaction, before the position and the acknowledge.
#[derive(Debug)]
struct KillAfter {
    inner: Arc<dyn EventConsumer>,
    event: &'static str,
}

#[async_trait]
impl EventConsumer for KillAfter {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        let outcome = self.inner.handle(stream).await;
        if outcome.is_ok() && stream.body.iter().any(|e| e.name == self.event) {
            std::process::abort();
        }
        outcome
    }
}

/// The transfer saga, killed after it sent its commands for a `TransferPrepared`.
#[derive(Debug)]
struct KillAfterSaga;

#[async_trait]
impl Saga for KillAfterSaga {
    type Aggregate = Account;

    fn name(&self) -> &str {
        TransferSaga.name()
    }

    async fn on_event(
        &self,
        event: &AccountEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let outcome = TransferSaga.on_event(event, stream, ctx).await;
        if outcome.is_ok() && matches!(event, AccountEvent::TransferPrepared(_)) {
            std::process::abort();
        }
        outcome
    }
}

/// The bank's consumers for the crash of `kind`, one of them wrapped to die, and the last
/// command to send with the stage to await it at.
type Consumers = (
    Arc<dyn EventConsumer>,
    Arc<dyn EventConsumer>,
    Arc<dyn DynSaga>,
    (AccountCommand, CommandStage),
);

/// The projection, the outbox processor and the saga over `stores`, the one `kind` names
/// killed after its write; the command that reaches it (a transfer to `b` for the saga).
fn consumers_killing(kind: &str, stores: &wow_core::Stores, b: &AggregateId) -> Consumers {
    let projection: Arc<dyn EventConsumer> =
        Arc::new(ViewProjection::<AccountBalance>::new(stores.views.clone()));
    let processor: Arc<dyn EventConsumer> = Arc::new(OutboxProcessor::<NotificationOutbox>::new(
        stores.views.clone(),
    ));
    match kind {
        "projection" => (
            Arc::new(KillAfter {
                inner: projection,
                event: "Deposited",
            }) as Arc<dyn EventConsumer>,
            processor,
            Arc::new(TransferSaga),
            (
                AccountCommand::Deposit(Amount { amount: 10 }),
                CommandStage::Projected,
            ),
        ),
        "processor" => (
            projection,
            Arc::new(KillAfter {
                inner: processor,
                event: "Withdrawn",
            }) as Arc<dyn EventConsumer>,
            Arc::new(TransferSaga),
            (
                AccountCommand::Withdraw(Amount { amount: 5 }),
                CommandStage::EventHandled,
            ),
        ),
        _ => (
            projection,
            processor,
            Arc::new(KillAfterSaga),
            (
                AccountCommand::Transfer(Transfer {
                    to: b.id.clone(),
                    amount: 30,
                }),
                CommandStage::SagaHandled,
            ),
        ),
    }
}

/// The process that gets killed: the bank's consumers, one of them wrapped to die.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by the crash tests in a child process"]
async fn crash_child() {
    let (Ok(kind), Ok(db), Ok(a), Ok(b)) = (
        std::env::var(KIND),
        std::env::var(DB),
        std::env::var(A),
        std::env::var(B),
    ) else {
        return;
    };
    let (a, b) = (account(&a), account(&b));
    let store = Store::open(&db).await;
    let stores = store.stores();
    let (projection, processor, saga, last) = consumers_killing(&kind, &stores, &b);
    let pipeline = LocalPipeline::builder(registry().unwrap(), stores.events.clone())
        .projection(projection)
        .event_processor(processor)
        .saga(saga)
        .compensation(stores.compensation.clone(), Default::default())
        .positions(stores.positions.clone())
        .build();
    for (id, name) in [(&a, "Ann"), (&b, "Bob")] {
        let open = AccountCommand::Open(Open {
            name: name.into(),
            balance: if id == &a { 100 } else { 0 },
        });
        pipeline
            .gateway
            .send_and_wait(cmd(id, open), WaitPlan::new(CommandStage::SagaHandled))
            .await
            .unwrap();
    }
    let _ = pipeline
        .gateway
        .send_and_wait(cmd(&a, last.0), WaitPlan::new(last.1))
        .await;
    // Reaching here means the consumer was not killed: the parent sees a clean exit.
}

/// Runs the child for `kind` on the store at `url` until it dies; it must die, not exit.
fn kill_during(kind: &str, url: &str, a: &AggregateId, b: &AggregateId) {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["crash_child", "--exact", "--ignored", "--test-threads=1"])
        .env(KIND, kind)
        .env(DB, url)
        .env(A, &a.id)
        .env(B, &b.id)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the {kind} was not killed: {status}");
}

/// The bank in a new process on the same store, caught up.
async fn restart(url: &str) -> Bank {
    let store = Store::open(url).await;
    Bank::start_with(
        store.stores(),
        BankOptions {
            retry_every: None,
            ..BankOptions::default()
        },
    )
    .await
    .unwrap()
}

fn ids() -> (AggregateId, AggregateId) {
    (
        account(&wow_core::id::new_id()),
        account(&wow_core::id::new_id()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_projection_killed_before_its_acknowledge_applies_the_stream_once() {
    a_projection_killed_before_its_acknowledge_applies_the_stream_once(Target::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_projection_killed_before_its_acknowledge_applies_the_stream_once() {
    if let Some(target) = Target::postgres().await {
        a_projection_killed_before_its_acknowledge_applies_the_stream_once(target).await;
    }
}

async fn a_projection_killed_before_its_acknowledge_applies_the_stream_once(target: Target) {
    let url = target.url();
    let (a, b) = ids();
    kill_during("projection", &url, &a, &b);
    let bank = restart(&url).await;
    let caught_up = &bank
        .caught_up()
        .iter()
        .find(|(name, _)| name == "account_balance")
        .unwrap()
        .1;
    assert!(
        caught_up.streams_handled >= 1,
        "the unacknowledged stream is delivered again (and any whose position was not yet written, as no-ops)"
    );
    let view = bank.account_view(&a).await.unwrap().unwrap();
    assert_eq!(
        (view.balance, view.version),
        (110, 2),
        "the deposit counted once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_processor_killed_before_its_acknowledge_writes_one_outbox_row() {
    a_processor_killed_before_its_acknowledge_writes_one_outbox_row(Target::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_processor_killed_before_its_acknowledge_writes_one_outbox_row() {
    if let Some(target) = Target::postgres().await {
        a_processor_killed_before_its_acknowledge_writes_one_outbox_row(target).await;
    }
}

async fn a_processor_killed_before_its_acknowledge_writes_one_outbox_row(target: Target) {
    let url = target.url();
    let (a, b) = ids();
    kill_during("processor", &url, &a, &b);
    let bank = restart(&url).await;
    let caught_up = &bank
        .caught_up()
        .iter()
        .find(|(name, _)| name == "notifications")
        .unwrap()
        .1;
    assert!(
        caught_up.streams_handled >= 1,
        "the unacknowledged stream is delivered again (and any whose position was not yet written, as no-ops)"
    );
    let rows = bank.notifications().await;
    assert_eq!(rows.len(), 1, "one notification for one withdrawal");
    assert_eq!(
        (rows[0].account_id.as_str(), rows[0].amount),
        (a.id.as_str(), 5)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_saga_killed_before_its_acknowledge_moves_the_money_once() {
    a_saga_killed_before_its_acknowledge_moves_the_money_once(Target::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_saga_killed_before_its_acknowledge_moves_the_money_once() {
    if let Some(target) = Target::postgres().await {
        a_saga_killed_before_its_acknowledge_moves_the_money_once(target).await;
    }
}

async fn a_saga_killed_before_its_acknowledge_moves_the_money_once(target: Target) {
    let url = target.url();
    let (a, b) = ids();
    kill_during("saga", &url, &a, &b);
    let bank = restart(&url).await;
    let caught_up = &bank
        .caught_up()
        .iter()
        .find(|(name, _)| name == "transfer")
        .unwrap()
        .1;
    assert!(
        caught_up.streams_handled >= 1,
        "the unacknowledged stream is delivered again"
    );
    let store = bank.pipeline().store();
    let received = store.load(&b, 1, u64::MAX).await.unwrap();
    assert_eq!(
        received.len(),
        2,
        "Bob's account: opened, and credited once"
    );
    let state = |streams: &[DomainEventStream]| {
        let mut state = AccountState::default();
        for stream in streams {
            for event in wow_core::aggregate::typed_events::<Account>(stream).unwrap() {
                <Account as wow_core::aggregate::Aggregate>::apply(&mut state, &event);
            }
        }
        state
    };
    let ann = state(&store.load(&a, 1, u64::MAX).await.unwrap());
    let bob = state(&received);
    assert_eq!(
        (ann.balance, ann.held),
        (70, 0),
        "the transfer was confirmed once"
    );
    assert_eq!(bob.balance, 30);
}
