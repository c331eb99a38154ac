//! The bank as a service: its aggregates, view, outbox processor and saga registered on the
//! library's builder, plus its own read route `GET /account/{id}/view` (docs/http-api.md),
//! documented from the view's type. This is all `wow serve` adds to what any team's service
//! gets.

use wow_core::aggregate::Aggregate;
use wow_core::Stores;
use wow_example_bank::account::Account;
use wow_example_bank::audit::Audit;
use wow_example_bank::notifications::NotificationOutbox;
use wow_example_bank::projection::{account_view, AccountBalance};
use wow_example_bank::transfer::TransferSaga;
use wow_service::{ReadRequest, Service, ServiceBuilder};

/// The bank on `stores`: `account` and `audit`, the `account_balance` view (also served at
/// `/account/{id}/view/account_balance`), the `notifications` outbox, the `transfer` saga and
/// the bank's own read route.
pub(crate) fn service(stores: Stores) -> ServiceBuilder {
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
        .stores(stores)
}
