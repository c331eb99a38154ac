//! The bank as a service: its aggregates, view, outbox processor and saga registered on the
//! library's builder, plus its own read route `GET /account/{id}/view` (docs/http-api.md). This is
//! all `wow serve` adds to what any team's service gets.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use wow_core::aggregate::Aggregate;
use wow_core::Stores;
use wow_example_bank::account::Account;
use wow_example_bank::audit::Audit;
use wow_example_bank::notifications::Notifications;
use wow_example_bank::projection::{account_view as read_account, AccountBalance};
use wow_example_bank::transfer::TransferSaga;
use wow_http::HttpConfig;
use wow_service::{Service, ServiceBuilder, ServiceContext};

/// The bank on `stores`: `account` and `audit`, the `account_balance` view (also served at
/// `/account/{id}/view/account_balance`), the `notifications` outbox, the `transfer` saga and
/// the bank's own read route.
pub(crate) fn service(stores: Stores) -> ServiceBuilder {
    Service::builder()
        .aggregate::<Account>()
        .aggregate::<Audit>()
        .view::<AccountBalance>()
        .processor(|stores: &Stores| {
            Arc::new(Notifications::new(
                stores.views.clone(),
                stores.effects.clone(),
            ))
        })
        .saga(TransferSaga)
        .routes(account_view, wow_example_bank::api::openapi_paths())
        .stores(stores)
}

fn error(status: StatusCode, code: &'static str, message: String) -> Response {
    (
        status,
        [(wow_http::ERROR_CODE_HEADER, code)],
        axum::Json(serde_json::json!({"errorCode": code, "errorMsg": message})),
    )
        .into_response()
}

/// `GET /account/{id}/view`: the account as the read model shows it, in the caller's tenant
/// (found as for every other route: another tenant's account of the same id is not found,
/// SPEC TN-1).
fn account_view(cx: &ServiceContext) -> Router {
    let views = cx.stores.views.clone();
    let http: HttpConfig = cx.http.clone();
    Router::new().route(
        "/account/{id}/view",
        get(move |Path(id): Path<String>, headers: HeaderMap| {
            let (views, http) = (views.clone(), http.clone());
            async move {
                let tenant = match wow_http::caller_tenant(&http, &headers) {
                    Ok(tenant) => tenant,
                    Err(refused) => return refused.into_response(),
                };
                if let Err(rule) = wow_core::check_aggregate_id(&id) {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "IllegalArgument",
                        format!("id {rule}"),
                    );
                }
                let account = Account::named_aggregate().aggregate_id(id.clone(), tenant.0);
                match read_account(views.as_ref(), &account).await {
                    Ok(Some(view)) => axum::Json(view).into_response(),
                    Ok(None) => error(
                        StatusCode::NOT_FOUND,
                        "NotFound",
                        format!("no account {id} in the read model"),
                    ),
                    Err(failure) => error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "ServiceUnavailable",
                        failure.to_string(),
                    ),
                }
            }
        }),
    )
}
