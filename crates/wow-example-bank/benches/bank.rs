//! The bank end to end on SQLite: commands from 64 concurrent callers, each waiting until the
//! `notifications` processor handled it (`EVENT_HANDLED`): the append, the projection and the
//! processor with their processed-message records, and the consumers' positions.
//!
//! `cargo bench -p wow-example-bank --bench bank`

// criterion_group! makes undocumented public functions.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use wow_core::{id, AggregateId, CommandMessage, CommandStage, Stores};
use wow_example_bank::account::*;
#[path = "../tests/support/bank.rs"]
mod bank;
use bank::{Bank, BankOptions};
use wow_runtime::command::WaitPlan;
use wow_sqlite::{SqliteOptions, SqliteStore};

const CALLERS: usize = 64;

fn deposits(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let folder = std::env::temp_dir().join("wow-bank-bench");
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join(format!("bank-{}.db", id::new_id()));
    let (bank, accounts) = runtime.block_on(async {
        let store = SqliteStore::open(SqliteOptions::new(&path)).await.unwrap();
        let bank = Bank::start_with(Stores::of(store), BankOptions::default())
            .await
            .unwrap();
        let accounts: Vec<_> = (0..CALLERS)
            .map(|_| AggregateId::new("bank", "account", id::new_id(), "(0)"))
            .collect();
        for account in &accounts {
            let open = AccountCommand::Open(Open {
                name: "Ann".into(),
                balance: 0,
            });
            bank.pipeline()
                .gateway
                .send_and_wait(
                    CommandMessage::of(account.clone(), open)
                        .into_json()
                        .unwrap(),
                    WaitPlan::processed(),
                )
                .await
                .unwrap();
        }
        (Arc::new(bank), accounts)
    });
    let mut group = c.benchmark_group("bank_sqlite");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("deposit_until_event_handled_64_callers", |b| {
        b.iter_custom(|iterations| {
            let bank = bank.clone();
            let accounts = accounts.clone();
            runtime.block_on(async move {
                let per_caller = iterations.div_ceil(CALLERS as u64);
                let start = Instant::now();
                let callers: Vec<_> = accounts
                    .into_iter()
                    .map(|account| {
                        let bank = bank.clone();
                        tokio::spawn(async move {
                            for _ in 0..per_caller {
                                let deposit = AccountCommand::Deposit(Amount { amount: 1 });
                                bank.pipeline()
                                    .gateway
                                    .send_and_wait(
                                        CommandMessage::of(account.clone(), deposit)
                                            .into_json()
                                            .unwrap(),
                                        WaitPlan::new(CommandStage::EventHandled),
                                    )
                                    .await
                                    .unwrap();
                            }
                        })
                    })
                    .collect();
                for caller in callers {
                    caller.await.unwrap();
                }
                start
                    .elapsed()
                    .mul_f64(iterations as f64 / (per_caller * CALLERS as u64) as f64)
            })
        })
    });
    group.finish();
}

criterion_group!(benches, deposits);
criterion_main!(benches);
