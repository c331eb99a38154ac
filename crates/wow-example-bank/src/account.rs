//! The `account` aggregate: open, deposit, withdraw, transfer (with a hold), freeze, check.

use serde::{Deserialize, Serialize};
use validator::{Validate, ValidationError};
use wow_core::aggregate::{Aggregate, CommandContext};
use wow_core::event::{EventShape, UpcastError, Upcasters};
use wow_core::schemars;
use wow_core::{Command, DomainError, Event};

/// The account aggregate.
#[derive(Debug)]
pub struct Account;

/// What an account is now (`GET /account/{id}/state` answers it bare, its version in `ETag`).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AccountState {
    /// The holder's name.
    pub name: String,
    /// What can be spent.
    pub balance: i64,
    /// What transfers in flight hold back.
    pub held: i64,
    /// Whether the account is frozen.
    pub frozen: bool,
}

/// `open`: the holder's name and the opening balance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Open {
    /// The holder's name: 1 to 200 characters, not only spaces, no control characters.
    #[validate(length(min = 1, max = 200), custom(function = "holder_name"))]
    #[schemars(
        length(min = 1, max = 200),
        regex(pattern = r"^[^\x00-\x1F\x7F-\x9F]*[^\s\x00-\x1F\x7F-\x9F][^\x00-\x1F\x7F-\x9F]*$")
    )]
    pub name: String,
    /// The opening balance; at least 0.
    #[validate(range(min = 0))]
    pub balance: i64,
}

/// An account id named in a body follows the rules of every aggregate id.
fn account_id(id: &str) -> Result<(), ValidationError> {
    wow_core::check_aggregate_id(id)
        .map_err(|rule| ValidationError::new("id").with_message(rule.into()))
}

/// A holder's name holds more than spaces and no control characters.
fn holder_name(name: &str) -> Result<(), ValidationError> {
    // An empty name is the length rule's to report.
    if !name.is_empty() && name.trim().is_empty() {
        return Err(ValidationError::new("blank").with_message("must not be blank".into()));
    }
    if name.chars().any(char::is_control) {
        return Err(ValidationError::new("control")
            .with_message("must not contain control characters".into()));
    }
    Ok(())
}

/// `deposit` and `withdraw`: an amount above 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Amount {
    /// The amount; above 0.
    #[validate(range(min = 1))]
    pub amount: i64,
}

/// `transfer`: move `amount` to the account `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Transfer {
    /// The target account's id, by the rules of every aggregate id.
    #[validate(custom(function = "account_id"))]
    #[schemars(
        regex(pattern = r"^([.]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*|[.]{3,})$"),
        length(min = 1, max = 128)
    )]
    pub to: String,
    /// The amount; above 0.
    #[validate(range(min = 1))]
    pub amount: i64,
}

/// `receive_transfer`: `amount` arrives from the account `from` (sent by the saga).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiveTransfer {
    /// The source account's id, by the rules of every aggregate id.
    #[validate(custom(function = "account_id"))]
    #[schemars(
        regex(pattern = r"^([.]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*|[.]{3,})$"),
        length(min = 1, max = 128)
    )]
    pub from: String,
    /// The amount; above 0.
    #[validate(range(min = 1))]
    pub amount: i64,
}

/// The account's commands.
#[derive(Debug, Clone, Command)]
pub enum AccountCommand {
    /// Opens the account.
    #[command(create, validate)]
    Open(Open),
    /// Adds money.
    #[command(validate)]
    Deposit(Amount),
    /// Takes money out.
    #[command(validate)]
    Withdraw(Amount),
    /// Starts a transfer: the amount is held until the saga confirms or cancels it.
    #[command(validate)]
    Transfer(Transfer),
    /// Receives a transfer (sent by the saga).
    #[command(validate, internal)]
    ReceiveTransfer(ReceiveTransfer),
    /// Completes a transfer: the held amount leaves (sent by the saga).
    #[command(validate, internal)]
    ConfirmTransfer(Transfer),
    /// Cancels a transfer: the held amount is released (sent by the saga).
    #[command(validate, internal)]
    CancelTransfer(Transfer),
    /// Freezes the account.
    Freeze,
    /// Checks the account and records nothing (SPEC RQ-13).
    Check,
}

/// The account was opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountOpened {
    /// The holder's name.
    pub name: String,
    /// The opening balance.
    pub balance: i64,
}

/// An amount moved in or out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    /// The amount.
    pub amount: i64,
}

/// A transfer step, to or from another account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferStep {
    /// The other account.
    pub account: String,
    /// The amount.
    pub amount: i64,
}

/// The account's events.
#[derive(Debug, Clone, PartialEq, Eq, Event)]
pub enum AccountEvent {
    /// Opened.
    AccountOpened(AccountOpened),
    /// Money came in.
    Deposited(Moved),
    /// Money went out.
    Withdrawn(Moved),
    /// A transfer to `account` started; the amount is held.
    TransferPrepared(TransferStep),
    /// A transfer from `account` arrived.
    TransferReceived(TransferStep),
    /// The transfer to `account` completed; the hold is gone with the money.
    TransferConfirmed(TransferStep),
    /// The transfer to `account` was cancelled; the hold is released.
    TransferCancelled(TransferStep),
    /// Frozen.
    AccountFrozen,
}

/// The account's business rules (HTTP 422).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, DomainError)]
pub enum AccountError {
    /// Not enough available balance.
    #[error("balance {balance} is less than {amount}")]
    InsufficientBalance {
        /// The available balance.
        balance: i64,
        /// The amount asked for.
        amount: i64,
    },
    /// The account is frozen.
    #[error("the account is frozen")]
    AccountFrozen,
    /// A transfer to the same account.
    #[error("an account cannot transfer to itself")]
    SameAccount,
    /// The account would hold more than an `i64` can count (available and held together).
    #[error("balance {balance} and held {held} cannot take {amount} more")]
    BalanceOverflow {
        /// The available balance.
        balance: i64,
        /// What is held.
        held: i64,
        /// The amount that would not fit.
        amount: i64,
    },
    /// Confirming or cancelling more than is held.
    #[error("only {held} is held, not {amount}")]
    NotHeld {
        /// What is held.
        held: i64,
        /// The amount asked for.
        amount: i64,
    },
}

fn available(state: &AccountState, amount: i64) -> Result<(), AccountError> {
    if state.frozen {
        return Err(AccountError::AccountFrozen);
    }
    if amount > state.balance {
        return Err(AccountError::InsufficientBalance {
            balance: state.balance,
            amount,
        });
    }
    Ok(())
}

/// Money in: refused when the account is frozen, or when available and held together would
/// overflow (a transfer or a cancel only moves money between them, so they never can).
fn receivable(state: &AccountState, amount: i64) -> Result<(), AccountError> {
    if state.frozen {
        return Err(AccountError::AccountFrozen);
    }
    match state
        .balance
        .checked_add(state.held)
        .and_then(|total| total.checked_add(amount))
    {
        Some(_) => Ok(()),
        None => Err(AccountError::BalanceOverflow {
            balance: state.balance,
            held: state.held,
            amount,
        }),
    }
}

fn held(state: &AccountState, amount: i64) -> Result<(), AccountError> {
    if amount > state.held {
        return Err(AccountError::NotHeld {
            held: state.held,
            amount,
        });
    }
    Ok(())
}

impl Aggregate for Account {
    const CONTEXT_NAME: &'static str = crate::CONTEXT;
    const AGGREGATE_NAME: &'static str = "account";
    // Wow's snapshot queries of accounts (when the service keeps them) by an index.
    const QUERY_INDEX: bool = true;
    type State = AccountState;
    type Command = AccountCommand;
    type Event = AccountEvent;
    type Error = AccountError;

    fn state_schema() -> serde_json::Value {
        wow_core::aggregate::state_schema_of::<AccountState>()
    }

    fn handle(
        state: &AccountState,
        command: AccountCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<AccountEvent>, AccountError> {
        use AccountCommand as C;
        use AccountEvent as E;
        let step = |account: String, amount| TransferStep { account, amount };
        Ok(match command {
            C::Open(Open { name, balance }) => {
                vec![E::AccountOpened(AccountOpened { name, balance })]
            }
            C::Deposit(Amount { amount }) => {
                receivable(state, amount)?;
                vec![E::Deposited(Moved { amount })]
            }
            C::Withdraw(Amount { amount }) => {
                available(state, amount)?;
                vec![E::Withdrawn(Moved { amount })]
            }
            C::Transfer(Transfer { to, amount }) => {
                if to == ctx.aggregate_id.id {
                    return Err(AccountError::SameAccount);
                }
                available(state, amount)?;
                vec![E::TransferPrepared(step(to, amount))]
            }
            C::ReceiveTransfer(ReceiveTransfer { from, amount }) => {
                receivable(state, amount)?;
                vec![E::TransferReceived(step(from, amount))]
            }
            C::ConfirmTransfer(Transfer { to, amount }) => {
                held(state, amount)?;
                vec![E::TransferConfirmed(step(to, amount))]
            }
            C::CancelTransfer(Transfer { to, amount }) => {
                held(state, amount)?;
                vec![E::TransferCancelled(step(to, amount))]
            }
            C::Freeze => vec![E::AccountFrozen],
            C::Check => vec![],
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
            AccountEvent::TransferPrepared(t) => {
                state.balance -= t.amount;
                state.held += t.amount;
            }
            AccountEvent::TransferReceived(t) => state.balance += t.amount,
            AccountEvent::TransferConfirmed(t) => state.held -= t.amount,
            AccountEvent::TransferCancelled(t) => {
                state.held -= t.amount;
                state.balance += t.amount;
            }
            AccountEvent::AccountFrozen => state.frozen = true,
        }
    }

    /// The bank's first shapes, still in the histories of its oldest accounts (see
    /// docs/changing-an-event.md): an account was opened as `{holder, initial}` at revision
    /// 0.0.0, and a deposit was called `MoneyDeposited`.
    fn upcasters() -> Upcasters {
        Upcasters::new()
            .upcast("AccountOpened", "0.0.0", |body| {
                let name = body["holder"]
                    .as_str()
                    .ok_or_else(|| UpcastError::new("`holder` is not a string"))?;
                let balance = body["initial"]
                    .as_i64()
                    .ok_or_else(|| UpcastError::new("`initial` is not a whole number"))?;
                Ok(vec![EventShape::new(
                    "AccountOpened",
                    "0.0.1",
                    serde_json::json!({"name": name, "balance": balance}),
                )])
            })
            .rename_event("MoneyDeposited", "Deposited")
    }
}
