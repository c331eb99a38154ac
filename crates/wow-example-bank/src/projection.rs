//! The `account_balance` projection: each account's balance, hold and last applied version,
//! a portable [`View`] in the store's database. Each stream is applied once: its
//! processed-message record is written in the same transaction as the row (SPEC DS-2), so a
//! redelivered stream changes nothing.

use serde::Serialize;
use wow_core::aggregate::Aggregate;
use wow_core::eventsourcing::BoxError;
use wow_core::schemars;
use wow_core::view::{View, ViewStore};
use wow_core::AggregateId;

use crate::account::{Account, AccountEvent, AccountState};

/// The consumer name of the projection.
pub const NAME: &str = "account_balance";

/// One account as the read model shows it (`GET /account/{id}/view`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AccountView {
    /// The account id.
    pub id: String,
    /// The holder's name.
    pub name: String,
    /// The available balance.
    pub balance: i64,
    /// The amount held by transfers in flight.
    pub held: i64,
    /// The last event version applied.
    pub version: u64,
}

/// The `account_balance` view: each account's state folded from its own events, kept per
/// (tenant, account id) by whichever [`ViewStore`] the service is assembled with. No SQL: the
/// store is chosen where the service is wired.
#[derive(Debug)]
pub struct AccountBalance;

impl View for AccountBalance {
    type Aggregate = Account;
    type State = AccountState;
    const NAME: &'static str = NAME;

    fn apply(state: &mut AccountState, event: &AccountEvent) {
        Account::apply(state, event);
    }
}

/// The view of `account` (its tenant and id) in `views`, if it exists: what
/// `GET /account/{id}/view` answers.
pub async fn account_view(
    views: &dyn ViewStore,
    account: &AggregateId,
) -> Result<Option<AccountView>, BoxError> {
    let row =
        wow_core::view::view::<AccountBalance>(views, &account.tenant_id, &account.id).await?;
    Ok(row.map(|(state, version)| AccountView {
        id: account.id.clone(),
        name: state.name,
        balance: state.balance,
        held: state.held,
        version,
    }))
}
