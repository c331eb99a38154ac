//! The simulation's own aggregate: a wallet. Small on purpose, with every kind of outcome a
//! caller can see: a create with two events, business rejections, validation failures, a
//! command that may create (the saga's reward credit), and a two-step transfer that a saga
//! completes: a hold on the source, a credit on the target, then the hold confirmed — or
//! cancelled when the target rejects the credit (it does not exist).
//!
//! Money is conserved (see `docs/reliability.md`): opens, deposits and reward credits bring
//! it in, withdrawals take it out, and a transfer only moves it, through a hold.

use std::collections::BTreeMap;

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
    /// The balance available: holds are already taken out of it.
    pub balance: u64,
    /// The holds of transfers not yet settled: hold id (the transfer's request id) → amount.
    pub holds: BTreeMap<String, u64>,
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

/// Moves `amount` from this wallet to the wallet `to`: holds it here; the saga credits the
/// target and then confirms or cancels the hold.
#[derive(Debug, Clone, Serialize, Deserialize, Validate, schemars::JsonSchema)]
pub struct Transfer {
    /// The target wallet's id.
    pub to: String,
    /// The amount, at least 1.
    #[validate(range(min = 1))]
    pub amount: u64,
}

/// The target's side of a transfer: `amount` from the hold `hold` of the wallet `from`.
#[derive(Debug, Clone, Serialize, Deserialize, Validate, schemars::JsonSchema)]
pub struct Receive {
    /// The source wallet's id.
    pub from: String,
    /// The source's hold id.
    pub hold: String,
    /// The amount, at least 1.
    #[validate(range(min = 1))]
    pub amount: u64,
}

/// Names a hold of this wallet.
#[derive(Debug, Clone, Serialize, Deserialize, Validate, schemars::JsonSchema)]
pub struct HoldRef {
    /// The hold id.
    pub hold: String,
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
    /// Adds to the balance, creating the wallet if needed (what the reward saga sends).
    #[command(allow_create, validate)]
    Credit(Amount),
    /// Starts a transfer: holds the amount; more than the balance is `InsufficientFunds`.
    #[command(validate)]
    Transfer(Transfer),
    /// Credits a transfer to its target (what the transfer saga sends). Never creates: a
    /// missing target is `NotFound`, a final rejection.
    #[command(validate)]
    Receive(Receive),
    /// Ends a hold whose amount reached the target.
    ConfirmHold(HoldRef),
    /// Ends a hold whose target rejected the credit: the amount comes back.
    CancelHold(HoldRef),
}

/// Money moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    /// The amount.
    pub amount: u64,
}

/// A transfer's hold was taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// The hold id: the transfer's request id.
    pub hold: String,
    /// The target wallet's id.
    pub to: String,
    /// The amount held.
    pub amount: u64,
}

/// A transfer's amount arrived at its target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Received {
    /// The source wallet's id.
    pub from: String,
    /// The source's hold id.
    pub hold: String,
    /// The amount.
    pub amount: u64,
}

/// A hold ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldEnded {
    /// The hold id.
    pub hold: String,
    /// The amount it held.
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
    /// A transfer's amount was taken into a hold.
    TransferHeld(Held),
    /// A transfer's amount came in.
    TransferReceived(Received),
    /// A hold ended with the amount at the target.
    HoldConfirmed(HoldEnded),
    /// A hold ended with the amount back in the balance.
    HoldCancelled(HoldEnded),
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
    /// A transfer to the wallet itself.
    #[error("a wallet cannot transfer to itself")]
    SameWallet,
    /// The hold is not open here (never taken, or already ended).
    #[error("no open hold `{hold}`")]
    UnknownHold {
        /// The hold id.
        hold: String,
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
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<WalletEvent>, WalletError> {
        let funds = |amount: u64| {
            if amount > state.balance {
                Err(WalletError::InsufficientFunds {
                    balance: state.balance,
                    amount,
                })
            } else {
                Ok(())
            }
        };
        let hold = |hold: String| match state.holds.get(&hold) {
            Some(amount) => Ok(HoldEnded {
                hold,
                amount: *amount,
            }),
            None => Err(WalletError::UnknownHold { hold }),
        };
        Ok(match command {
            WalletCommand::Open(Open { initial: 0 }) => vec![WalletEvent::Opened],
            WalletCommand::Open(Open { initial }) => vec![
                WalletEvent::Opened,
                WalletEvent::Deposited(Moved { amount: initial }),
            ],
            WalletCommand::Deposit(Amount { amount }) => {
                vec![WalletEvent::Deposited(Moved { amount })]
            }
            WalletCommand::Withdraw(Amount { amount }) => {
                funds(amount)?;
                vec![WalletEvent::Withdrawn(Moved { amount })]
            }
            WalletCommand::Credit(Amount { amount }) => {
                vec![WalletEvent::Credited(Moved { amount })]
            }
            WalletCommand::Transfer(Transfer { to, .. }) if to == ctx.aggregate_id.id => {
                return Err(WalletError::SameWallet)
            }
            WalletCommand::Transfer(Transfer { to, amount }) => {
                funds(amount)?;
                vec![WalletEvent::TransferHeld(Held {
                    hold: ctx.request_id.to_owned(),
                    to,
                    amount,
                })]
            }
            WalletCommand::Receive(Receive { from, hold, amount }) => {
                vec![WalletEvent::TransferReceived(Received {
                    from,
                    hold,
                    amount,
                })]
            }
            WalletCommand::ConfirmHold(HoldRef { hold: id }) => {
                vec![WalletEvent::HoldConfirmed(hold(id)?)]
            }
            WalletCommand::CancelHold(HoldRef { hold: id }) => {
                vec![WalletEvent::HoldCancelled(hold(id)?)]
            }
        })
    }

    fn apply(state: &mut WalletState, event: &WalletEvent) {
        match event {
            WalletEvent::Opened => {}
            WalletEvent::Deposited(m) | WalletEvent::Credited(m) => {
                state.balance = state.balance.saturating_add(m.amount)
            }
            WalletEvent::Withdrawn(m) => state.balance = state.balance.saturating_sub(m.amount),
            WalletEvent::TransferHeld(held) => {
                state.balance = state.balance.saturating_sub(held.amount);
                state.holds.insert(held.hold.clone(), held.amount);
            }
            WalletEvent::TransferReceived(received) => {
                state.balance = state.balance.saturating_add(received.amount)
            }
            WalletEvent::HoldConfirmed(ended) => {
                state.holds.remove(&ended.hold);
            }
            WalletEvent::HoldCancelled(ended) => {
                state.holds.remove(&ended.hold);
                state.balance = state.balance.saturating_add(ended.amount);
            }
        }
    }
}

/// What an event does to an available balance: signed, so that a projection can add events
/// up in any order and still end at the fold of history.
pub(crate) fn balance_delta(event: &WalletEvent) -> i64 {
    let signed = |amount: u64| i64::try_from(amount).unwrap_or(i64::MAX);
    match event {
        WalletEvent::Opened | WalletEvent::HoldConfirmed(_) => 0,
        WalletEvent::Deposited(m) | WalletEvent::Credited(m) => signed(m.amount),
        WalletEvent::TransferReceived(r) => signed(r.amount),
        WalletEvent::HoldCancelled(e) => signed(e.amount),
        WalletEvent::Withdrawn(m) => -signed(m.amount),
        WalletEvent::TransferHeld(h) => -signed(h.amount),
    }
}

/// What an event does to the amount a wallet holds for transfers in progress.
pub(crate) fn held_delta(event: &WalletEvent) -> i64 {
    let signed = |amount: u64| i64::try_from(amount).unwrap_or(i64::MAX);
    match event {
        WalletEvent::TransferHeld(h) => signed(h.amount),
        WalletEvent::HoldConfirmed(e) | WalletEvent::HoldCancelled(e) => -signed(e.amount),
        _ => 0,
    }
}

/// The wallet the saga credits.
pub(crate) const REWARDS: &str = "rewards";

/// What one reward credits.
pub(crate) const REWARD_AMOUNT: u64 = 1;

/// A deposit at least this large earns its wallet's owner a reward credit (the saga).
pub(crate) const REWARD_THRESHOLD: u64 = 50;
