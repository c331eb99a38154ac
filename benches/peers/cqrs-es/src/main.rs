//! Peer benchmark: cqrs-es 0.5 with its in-memory `MemStore`, the same shape as wow-rs's
//! `crates/wow-runtime/benches/pipeline.rs`: 64 concurrent callers (tokio tasks on the
//! multi-thread runtime) execute deposit commands round-robin over the accounts and wait
//! for each to finish. Shapes: `short` = 10,000 accounts with 1 event each (opened) before
//! the run; `long` = 100 accounts holding 2,000 events each before the run.
//!
//! `cargo run --release -- --shape short|long [--total N] > /dev/null`
//! (MemStore `println!`s two lines per command to stdout; the result line goes to stderr.)

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::Instant;

use cqrs_es::event_sink::EventSink;
use cqrs_es::mem_store::MemStore;
use cqrs_es::{Aggregate, CqrsFramework, DomainEvent};
use serde::{Deserialize, Serialize};

const CALLERS: usize = 64;

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct BankAccount {
    opened: bool,
    name: String,
    balance: u64,
}

#[derive(Debug)]
enum AccountCommand {
    Open { name: String, balance: u64 },
    Deposit { amount: u64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum AccountEvent {
    Opened { name: String, balance: u64 },
    Deposited { amount: u64 },
}

impl DomainEvent for AccountEvent {
    fn event_type(&self) -> String {
        match self {
            AccountEvent::Opened { .. } => "Opened".to_string(),
            AccountEvent::Deposited { .. } => "Deposited".to_string(),
        }
    }
    fn event_version(&self) -> String {
        "1.0".to_string()
    }
}

#[derive(Debug)]
enum AccountError {
    AlreadyOpened,
    NotOpened,
}

impl std::fmt::Display for AccountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccountError::AlreadyOpened => f.write_str("account already opened"),
            AccountError::NotOpened => f.write_str("account not opened"),
        }
    }
}

impl std::error::Error for AccountError {}

impl Aggregate for BankAccount {
    const TYPE: &'static str = "account";
    type Command = AccountCommand;
    type Event = AccountEvent;
    type Error = AccountError;
    type Services = ();

    async fn handle(
        &mut self,
        command: AccountCommand,
        _service: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), AccountError> {
        match command {
            AccountCommand::Open { name, balance } => {
                if self.opened {
                    return Err(AccountError::AlreadyOpened);
                }
                sink.write(AccountEvent::Opened { name, balance }, self).await;
            }
            AccountCommand::Deposit { amount } => {
                if !self.opened {
                    return Err(AccountError::NotOpened);
                }
                sink.write(AccountEvent::Deposited { amount }, self).await;
            }
        }
        Ok(())
    }

    fn apply(&mut self, event: AccountEvent) {
        match event {
            AccountEvent::Opened { name, balance } => {
                self.opened = true;
                self.name = name;
                self.balance = balance;
            }
            AccountEvent::Deposited { amount } => self.balance += amount,
        }
    }
}

type Cqrs = CqrsFramework<BankAccount, MemStore<BankAccount>>;

/// `total` deposits from 64 callers round-robin over `accounts`, each awaited; returns secs.
async fn run(cqrs: &Arc<Cqrs>, accounts: &Arc<Vec<String>>, total: usize) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..CALLERS)
        .map(|caller| {
            let (cqrs, accounts) = (cqrs.clone(), accounts.clone());
            tokio::spawn(async move {
                let mut i = caller;
                while i < total {
                    cqrs.execute(&accounts[i % accounts.len()], AccountCommand::Deposit { amount: 1 })
                        .await
                        .expect("deposit");
                    i += CALLERS;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("caller");
    }
    start.elapsed().as_secs_f64()
}

fn usage() -> ! {
    eprintln!("usage: cqrs-es-peer-bench --shape short|long [--total N]");
    std::process::exit(2)
}

fn main() {
    let mut shape = String::from("short");
    let mut total: Option<usize> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--shape" => shape = args.next().unwrap_or_else(|| usage()),
            "--total" => {
                total = Some(args.next().and_then(|n| n.replace(['_', ','], "").parse().ok()).unwrap_or_else(|| usage()))
            }
            _ => usage(),
        }
    }
    let (accounts, history, default_total) = match shape.as_str() {
        "short" => (10_000usize, 1usize, 200_000usize),
        "long" => (100, 2_000, 100_000),
        _ => usage(),
    };
    let total = total.unwrap_or(default_total);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = MemStore::<BankAccount>::default();
        // MemStore is a handle on a shared map: this clone sees what the framework stores.
        let cqrs: Arc<Cqrs> = Arc::new(CqrsFramework::new(store.clone(), vec![], ()));
        let ids: Arc<Vec<String>> =
            Arc::new((0..accounts).map(|i| format!("account-{i:08}")).collect());

        // Setup, not timed: open each account, then bring each to `history` events.
        for id in ids.iter() {
            cqrs.execute(id, AccountCommand::Open { name: "Ann".into(), balance: 0 })
                .await
                .expect("open");
        }
        run(&cqrs, &ids, history.saturating_sub(1) * accounts).await;
        // A deposit on an unopened account is refused.
        assert!(cqrs.execute("never-opened", AccountCommand::Deposit { amount: 1 }).await.is_err());
        let before = stored_events(&store);

        let secs = run(&cqrs, &ids, total).await;

        let after = stored_events(&store);
        eprintln!(
            "cqrs-es shape={shape} commands={total} secs={secs:.3} per_sec={:.0}",
            total as f64 / secs
        );
        // MemStore's commit is a read-then-write with no version check: concurrent commands
        // on one aggregate can overwrite each other's events. Report it if it happened.
        let expected = before + total;
        if after != expected {
            eprintln!(
                "note: stored events after run {after}, expected {expected} (lost {})",
                expected as i64 - after as i64
            );
        }
    });
}

#[allow(deprecated)]
fn stored_events(store: &MemStore<BankAccount>) -> usize {
    store.get_events().read().unwrap().values().map(Vec::len).sum()
}
