//! The simulation's own aggregate: a wallet. Small on purpose, with every kind of outcome a
//! caller can see: a create with two events, business rejections, validation failures, and a
//! command that may create (the saga's reward credit).

use serde::{Deserialize, Serialize};
use validator::Validate;
use wow_core::aggregate::{Aggregate, CommandContext};
use wow_core::{Command, DomainError, Event};

/// The wallet aggregate (`sim.wallet`).
#[derive(Debug)]
pub struct Wallet;

/// A wallet's state.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalletState {
    /// The balance.
    pub balance: u64,
}

/// Opens a wallet with an initial balance (0 allowed).
#[derive(Debug, Clone, Serialize, Deserialize, Validate, schemars::JsonSchema)]
pub struct Open {
    /// The initial balance.
    pub initial: u64,
}

/// An amount of at least 1: 0 fails validation at the gateway.
#[derive(Debug, Clone, Serialize, Deserialize, Validate, schemars::JsonSchema)]
pub struct Amount {
    /// The amount.
    #[validate(range(min = 1))]
    pub amount: u64,
}

/// The wallet's commands.
#[derive(Debug, Clone, Command)]
pub enum WalletCommand {
    /// Creates the wallet.
    #[command(create)]
    Open(Open),
    /// Adds to the balance.
    #[command(validate)]
    Deposit(Amount),
    /// Takes from the balance; more than the balance is `InsufficientFunds`.
    #[command(validate)]
    Withdraw(Amount),
    /// Adds to the balance, creating the wallet if needed (what the saga sends).
    #[command(allow_create, validate)]
    Credit(Amount),
}

/// Money moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    /// The amount.
    pub amount: u64,
}

/// The wallet's events.
#[derive(Debug, Clone, PartialEq, Eq, Event)]
pub enum WalletEvent {
    /// The wallet was opened.
    Opened,
    /// Money came in.
    Deposited(Moved),
    /// Money went out.
    Withdrawn(Moved),
    /// A reward came in.
    Credited(Moved),
}

/// The wallet's business rules.
#[derive(Debug, PartialEq, Eq, thiserror::Error, DomainError)]
pub enum WalletError {
    /// The balance is below the amount.
    #[error("balance {balance} is less than {amount}")]
    InsufficientFunds {
        /// The balance.
        balance: u64,
        /// The amount asked for.
        amount: u64,
    },
}

impl Aggregate for Wallet {
    const CONTEXT_NAME: &'static str = "sim";
    const AGGREGATE_NAME: &'static str = "wallet";
    type State = WalletState;
    type Command = WalletCommand;
    type Event = WalletEvent;
    type Error = WalletError;

    fn handle(
        state: &WalletState,
        command: WalletCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<WalletEvent>, WalletError> {
        Ok(match command {
            WalletCommand::Open(Open { initial: 0 }) => vec![WalletEvent::Opened],
            WalletCommand::Open(Open { initial }) => vec![
                WalletEvent::Opened,
                WalletEvent::Deposited(Moved { amount: initial }),
            ],
            WalletCommand::Deposit(Amount { amount }) => {
                vec![WalletEvent::Deposited(Moved { amount })]
            }
            WalletCommand::Withdraw(Amount { amount }) if amount > state.balance => {
                return Err(WalletError::InsufficientFunds {
                    balance: state.balance,
                    amount,
                })
            }
            WalletCommand::Withdraw(Amount { amount }) => {
                vec![WalletEvent::Withdrawn(Moved { amount })]
            }
            WalletCommand::Credit(Amount { amount }) => {
                vec![WalletEvent::Credited(Moved { amount })]
            }
        })
    }

    fn apply(state: &mut WalletState, event: &WalletEvent) {
        match event {
            WalletEvent::Opened => {}
            WalletEvent::Deposited(m) | WalletEvent::Credited(m) => state.balance += m.amount,
            WalletEvent::Withdrawn(m) => state.balance -= m.amount,
        }
    }
}

/// What an event does to a balance: signed, so that a projection can add events up in any
/// order and still end at the fold of history.
pub(crate) fn balance_delta(event: &WalletEvent) -> i64 {
    let signed = |m: &Moved| i64::try_from(m.amount).unwrap_or(i64::MAX);
    match event {
        WalletEvent::Opened => 0,
        WalletEvent::Deposited(m) | WalletEvent::Credited(m) => signed(m),
        WalletEvent::Withdrawn(m) => -signed(m),
    }
}

/// The wallet the saga credits.
pub(crate) const REWARDS: &str = "rewards";

/// A deposit at least this large earns its wallet's owner a reward credit (the saga).
pub(crate) const REWARD_THRESHOLD: u64 = 50;
