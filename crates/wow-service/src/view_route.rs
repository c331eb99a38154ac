//! The read route every registered view gets: `GET /{aggregate}/{id}/view/{view}`, one row
//! in the caller's tenant, and its `/openapi.json` entry.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use wow_core::aggregate::Aggregate;
use wow_core::view::{View, ViewStore, ViewStoreError};
use wow_http::HttpConfig;

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
/// the id rules, 503 when the store cannot be reached, 500 when the row does not decode.
/// The tenant is found as every built-in route finds it ([`wow_http::caller_tenant`]).
pub(crate) fn view_route<V: View>(store: Arc<dyn ViewStore>, http: HttpConfig) -> Router {
    crate::read_route::id_route(&view_path::<V>(), http, store, error, read_view::<V>)
}

async fn read_view<V: View>(store: Arc<dyn ViewStore>, tenant_id: String, id: String) -> Response {
    match wow_core::view::view::<V>(store.as_ref(), &tenant_id, &id).await {
        Ok(Some((state, version))) => {
            Json(json!({"aggregateId": id, "version": version, "state": state})).into_response()
        }
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("no row of view {} for `{id}`", V::NAME),
        ),
        Err(ViewStoreError::Unavailable(source)) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            format!("view {} cannot be read: {source}", V::NAME),
        ),
        Err(failure) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            format!("view {}: {failure}", V::NAME),
        ),
    }
}

/// An error answer as every route gives it: `{errorCode, errorMsg}` and `Wow-Error-Code`.
pub(crate) fn error(status: StatusCode, code: &'static str, message: String) -> Response {
    let mut response = (
        status,
        Json(json!({"errorCode": code, "errorMsg": message, "succeeded": false})),
    )
        .into_response();
    response
        .headers_mut()
        .insert(wow_http::ERROR_CODE_HEADER, HeaderValue::from_static(code));
    response
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
    let item = json!({"get": {
        "operationId": format!("{aggregate}.view.{}", V::NAME),
        "summary": format!("One {aggregate} as the view {} shows it", V::NAME),
        "parameters": [
            {"name": "Command-Tenant-Id", "in": "header", "required": false,
                "description": "The tenant, as for every query (not read when bearer auth is on).",
                "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^(\\(0\\)|([.]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*|[.]{3,}))$"}},
        ],
        "responses": {
            "200": {"description": "The view's row: its state and the last aggregate version folded into it",
                "content": {"application/json": {"schema": row}}},
            "400": answer("IllegalArgument: the id or Command-Tenant-Id breaks the rules of an id"),
            "404": answer("NotFound: the view holds no row for this id in the caller's tenant"),
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
