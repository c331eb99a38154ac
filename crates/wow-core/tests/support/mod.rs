//! The example `account` aggregate the tests share, written the way a team writes one.
#![allow(dead_code, unreachable_pub, missing_docs, clippy::expect_used)]

use serde::{Deserialize, Serialize};
use validator::Validate;
use wow_core::aggregate::{Aggregate, CommandContext};
use wow_core::{Command, DomainError, Event};

#[derive(Debug)]
pub struct Account;

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccountState {
    pub name: String,
    pub balance: u64,
    pub frozen: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, Validate, schemars::JsonSchema)]
pub struct Open {
    #[validate(length(min = 1))]
    pub name: String,
    pub balance: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Amount {
    #[validate(range(min = 1))]
    pub amount: u64,
}

#[derive(Debug, Clone, Command)]
pub enum AccountCommand {
    #[command(create, validate)]
    Open(Open),
    #[command(validate)]
    Deposit(Amount),
    #[command(validate)]
    Withdraw(Amount),
    Freeze,
    Check,
    #[command(allow_create, validate, name = "upsert_balance")]
    SetBalance(Amount),
    #[command(void)]
    Audit,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccountOpened {
    pub name: String,
    pub balance: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moved {
    pub amount: u64,
}

#[derive(Debug, Clone, PartialEq, Event)]
pub enum AccountEvent {
    AccountOpened(AccountOpened),
    Deposited(Moved),
    #[event(revision = "0.0.2")]
    Withdrawn(Moved),
    AccountFrozen,
    #[event(name = "BalanceSet")]
    Set(Moved),
}

#[derive(Debug, PartialEq, thiserror::Error, DomainError)]
pub enum AccountError {
    #[error("balance {balance} is less than {amount}")]
    InsufficientBalance { balance: u64, amount: u64 },
    #[error("the account is frozen")]
    AccountFrozen,
    #[error("an audit note is not for the account")]
    #[domain_error(code = "IllegalState")]
    NotForAccount,
}

impl Aggregate for Account {
    const CONTEXT_NAME: &'static str = "bank";
    const AGGREGATE_NAME: &'static str = "account";
    type State = AccountState;
    type Command = AccountCommand;
    type Event = AccountEvent;
    type Error = AccountError;

    fn handle(
        state: &AccountState,
        command: AccountCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<AccountEvent>, AccountError> {
        use AccountCommand as C;
        if state.frozen && matches!(command, C::Deposit(_) | C::Withdraw(_)) {
            return Err(AccountError::AccountFrozen);
        }
        Ok(match command {
            C::Open(Open { name, balance }) => {
                vec![AccountEvent::AccountOpened(AccountOpened { name, balance })]
            }
            C::Deposit(Amount { amount }) => vec![AccountEvent::Deposited(Moved { amount })],
            C::Withdraw(Amount { amount }) if amount > state.balance => {
                return Err(AccountError::InsufficientBalance {
                    balance: state.balance,
                    amount,
                })
            }
            C::Withdraw(Amount { amount }) => vec![AccountEvent::Withdrawn(Moved { amount })],
            C::Freeze => vec![AccountEvent::AccountFrozen],
            C::Check => vec![],
            C::SetBalance(Amount { amount }) => vec![AccountEvent::Set(Moved { amount })],
            C::Audit => return Err(AccountError::NotForAccount),
        })
    }

    fn apply(state: &mut AccountState, event: &AccountEvent) {
        match event {
            AccountEvent::AccountOpened(opened) => {
                state.name = opened.name.clone();
                state.balance = opened.balance;
            }
            AccountEvent::Deposited(m) => state.balance += m.amount,
            AccountEvent::Withdrawn(m) => state.balance -= m.amount,
            AccountEvent::AccountFrozen => state.frozen = true,
            AccountEvent::Set(m) => state.balance = m.amount,
        }
    }
}

// ---- helpers for pipeline tests ----

use std::sync::Arc;

use wow_core::aggregate::AggregateRegistry;
use wow_core::command::JsonCommand;
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::testing_example::{Added, Counter, CounterEvent};
use wow_core::{id, AggregateId, CommandMessage, DomainEvent, DomainEventStream};

pub fn registry() -> AggregateRegistry {
    let mut registry = AggregateRegistry::new();
    registry
        .register::<Account>()
        .expect("one aggregate named account");
    registry
}

pub fn memory_store() -> Arc<dyn EventStore> {
    Arc::new(InMemoryEventStore::new())
}

pub fn account_id() -> AggregateId {
    AggregateId::new("bank", "account", id::new_id(), "t1")
}

pub fn command(aggregate_id: &AggregateId, body: AccountCommand) -> JsonCommand {
    CommandMessage::of(aggregate_id.clone(), body)
        .into_json()
        .expect("account commands encode")
}

pub fn open(aggregate_id: &AggregateId, balance: u64) -> JsonCommand {
    command(
        aggregate_id,
        AccountCommand::Open(Open {
            name: "Ann".into(),
            balance,
        }),
    )
}

pub fn deposit(aggregate_id: &AggregateId, amount: u64) -> JsonCommand {
    command(aggregate_id, AccountCommand::Deposit(Amount { amount }))
}

/// The same intent again: a new message (new command id) with the same request id.
pub fn resend(original: &JsonCommand) -> JsonCommand {
    let mut again = original.clone();
    again.id = id::new_id();
    again
}

// ---- the crate's `Counter` example, for views and outboxes ----

/// The counter `id` in `tenant`.
pub fn counter(id: &str, tenant: &str) -> AggregateId {
    use wow_core::aggregate::Aggregate as _;
    Counter::named_aggregate().aggregate_id(id, tenant)
}

/// A stream of `events` at `version` of `aggregate`, with fresh ids.
pub fn stream(aggregate: &AggregateId, version: u64, events: &[CounterEvent]) -> DomainEventStream {
    DomainEventStream {
        id: id::new_id(),
        request_id: id::new_id(),
        command_id: id::new_id(),
        aggregate_id: aggregate.clone(),
        version,
        create_time: 0,
        fingerprint: String::new(),
        header: Default::default(),
        body: events
            .iter()
            .map(|e| DomainEvent::of(e).expect("counter events encode"))
            .collect(),
    }
}

/// `Added { by }`.
pub fn add(by: u64) -> CounterEvent {
    CounterEvent::Added(Added { by })
}
