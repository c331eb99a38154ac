//! The bank as a service (feature `service`): its aggregates, view, outbox processor and saga
//! registered on the library's builder, plus its own read route `GET /account/{id}/view`
//! (docs/http-api.md), documented from the view's type. This is all `wow serve --example bank`
//! and the `wow-bank` binary add to what any team's service gets.

use wow_core::aggregate::Aggregate;
use wow_service::{ReadRequest, Service, ServiceBuilder};

use crate::account::Account;
use crate::audit::Audit;
use crate::notifications::NotificationOutbox;
use crate::projection::{account_view, AccountBalance};
use crate::transfer::TransferSaga;

/// The bank: `account` and `audit`, the `account_balance` view (also served at
/// `/account/{id}/view/account_balance`), the `notifications` outbox, the `transfer` saga and
/// the bank's own read route. Give it a store (`.store(url)` or `.stores(..)`) and run it.
pub fn service() -> ServiceBuilder {
    Service::builder()
        .aggregate::<Account>()
        .aggregate::<Audit>()
        .view::<AccountBalance>()
        .outbox::<NotificationOutbox>()
        .saga(TransferSaga)
        .read_route(
            "account.view",
            "/account/{id}/view",
            "One account as the account_balance read model shows it: its available balance, the amount held by transfers in flight, the last event version applied",
            |request: ReadRequest| async move {
                let account = Account::named_aggregate().aggregate_id(request.id, request.tenant_id);
                account_view(request.stores.views.as_ref(), &account).await
            },
        )
}
