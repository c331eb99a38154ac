//! The read route every registered view gets: `GET /{aggregate}/{id}/view/{view}`, one row
//! in the caller's tenant, and its `/openapi.json` entry.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use wow_core::aggregate::Aggregate;
use wow_core::eventsourcing::EventStore;
use wow_core::view::{View, ViewStore, ViewStoreError};
use wow_core::AggregateId;
use wow_http::HttpConfig;

use wow_http::fresh::{not_fresh, read_fresh, Freshness};

/// The path of `V`'s read route: `/{aggregate}/{id}/view/{view name}`.
pub(crate) fn view_path<V: View>() -> String {
    format!(
        "/{}/{{id}}/view/{}",
        <V::Aggregate as Aggregate>::AGGREGATE_NAME,
        V::NAME
    )
}

/// `GET /{aggregate}/{id}/view/{view}`: 200 `{aggregateId, version, state}` (the version is
/// the last aggregate version folded in), 404 when the view holds no row for the id in the
/// caller's tenant (another tenant's row of the same id is not it), 400 for an id that breaks
/// the id rules or a freshness header that does not parse, 503 when the store cannot be
/// reached, 500 when the row does not decode. The tenant is found as every built-in route
/// finds it ([`wow_http::caller_tenant`]).
///
/// A read may ask for data at least as fresh as an append (SPEC DS-6): `Wow-Fresh-Request`
/// (a request id of this aggregate) or `Wow-Fresh-Version` (its version), waiting up to
/// `Wow-Fresh-Wait` milliseconds (3,000 unless said, at most 5,000); it is answered once the
/// row includes it, or `408 ViewNotFresh` (as a command's wait that runs out) with the row's
/// version and the one asked for.
pub(crate) fn view_route<V: View>(
    store: Arc<dyn ViewStore>,
    events: Arc<dyn EventStore>,
    http: HttpConfig,
) -> Router {
    crate::read_route::id_route(
        &view_path::<V>(),
        http,
        (store, events),
        error,
        read_view::<V>,
    )
}

async fn read_view<V: View>(
    (store, events): (Arc<dyn ViewStore>, Arc<dyn EventStore>),
    tenant_id: String,
    id: String,
    headers: HeaderMap,
) -> Response {
    let freshness = match Freshness::of(&headers) {
        Ok(freshness) => freshness,
        Err((status, code, message)) => return error(status, code, message),
    };
    let read = || {
        let (store, tenant_id, id) = (store.clone(), tenant_id.clone(), id.clone());
        async move {
            wow_core::view::view::<V>(store.as_ref(), &tenant_id, &id)
                .await
                .map_err(|failure| unreadable::<V>(failure))
        }
    };
    let row = match freshness {
        None => read().await,
        Some(freshness) => {
            let named = V::Aggregate::named_aggregate();
            let aggregate = AggregateId::new(
                &named.context_name,
                &named.aggregate_name,
                id.as_str(),
                tenant_id.as_str(),
            );
            match read_fresh(events.as_ref(), &aggregate, &freshness, error, read).await {
                Ok(row) => Ok(row),
                Err(Ok(behind)) => return not_fresh(V::NAME, &id, &behind),
                Err(Err(failure)) => return failure,
            }
        }
    };
    match row {
        Ok(Some((state, version))) => {
            Json(json!({"aggregateId": id, "version": version, "state": state})).into_response()
        }
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("no row of view {} for `{id}`", V::NAME),
        ),
        Err(failure) => failure,
    }
}

/// The answer to a view store's failure: 503 when it cannot be reached, 500 otherwise.
fn unreadable<V: View>(failure: ViewStoreError) -> Response {
    match failure {
        ViewStoreError::Unavailable(source) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            format!("view {} cannot be read: {source}", V::NAME),
        ),
        failure => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            format!("view {}: {failure}", V::NAME),
        ),
    }
}

/// An error answer as every route gives it: `{errorCode, errorMsg}` and `Wow-Error-Code`.
pub(crate) fn error(status: StatusCode, code: &'static str, message: String) -> Response {
    wow_http::fresh::error_answer(status, code, message)
}

/// `/openapi.json`'s entry for `V`'s route; the 200 body's `state` is `V::State`'s JSON
/// Schema, its sub-schemas inlined. wow-http completes it (the `id` parameter, auth, 500).
pub(crate) fn view_openapi<V: View>() -> Map<String, Value>
where
    V::State: schemars::JsonSchema,
{
    let aggregate = <V::Aggregate as Aggregate>::AGGREGATE_NAME;
    let answer = |description: &str| {
        json!({"description": description,
            "headers": {"Wow-Error-Code": {"required": true, "schema": {"type": "string"}}},
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    };
    let row = json!({"type": "object", "required": ["aggregateId", "version", "state"],
    "properties": {
        "aggregateId": {"type": "string"},
        "version": {"type": "integer", "minimum": 1},
        "state": state_schema::<V>(),
    }});
    let mut parameters = vec![
        json!({"name": "Command-Tenant-Id", "in": "header", "required": false,
        "description": "The tenant, as for every query (not read when bearer auth is on).",
        "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^(\\(0\\)|([.]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*|[.]{3,}))$"}}),
    ];
    parameters.extend(wow_http::fresh::openapi_parameters(None));
    let item = json!({"get": {
        "operationId": format!("{aggregate}.view.{}", V::NAME),
        "summary": format!("One {aggregate} as the view {} shows it", V::NAME),
        "parameters": parameters,
        "responses": {
            "200": {"description": "The view's row: its state and the last aggregate version folded into it",
                "content": {"application/json": {"schema": row}}},
            "400": answer("IllegalArgument: the id or Command-Tenant-Id breaks the rules of an id; BadRequest: a freshness header that does not parse"),
            "404": answer("NotFound: the view holds no row for this id in the caller's tenant"),
            "408": answer("ViewNotFresh: the wait ran out before the row included what a freshness header asked for (the body adds version, wanted, lag)"),
            "503": answer("ServiceUnavailable: the view store cannot be reached"),
        },
    }});
    [(view_path::<V>(), item)].into_iter().collect()
}

/// `V::State`'s JSON Schema with its sub-schemas inlined, so that it stands inside the
/// document (a `$ref` to `$defs` would be resolved against the document's root).
fn state_schema<V: View>() -> Value
where
    V::State: schemars::JsonSchema,
{
    crate::read_route::inlined_schema::<V::State>()
}
