//! A domain's own read route, `GET /{…}/{id}/…` answering one typed value in the caller's
//! tenant, and its `/openapi.json` entry made from the value's JSON Schema: a service names
//! the path and the read, and writes neither a handler nor an OpenAPI document.

use std::future::Future;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{json, Map, Value};
use wow_core::{BoxError, Stores};
use wow_http::HttpConfig;

/// What a read route's function is given: the service's stores, the caller's tenant (found
/// as every built-in route finds it) and the id in the path (checked by the id rules).
#[derive(Debug, Clone)]
pub struct ReadRequest {
    /// The stores the service runs on.
    pub stores: Stores,
    /// The caller's tenant: another tenant's value of the same id is not the caller's.
    pub tenant_id: String,
    /// The path's `{id}`.
    pub id: String,
}

/// The route `GET path` over `read`: 200 with the value as JSON; 404 `NotFound` when `read`
/// finds none; 400 `IllegalArgument` for an id or tenant that breaks the id rules; 401/403 as
/// auth says; 503 `ServiceUnavailable` when `read` fails (what it said is logged, not
/// answered).
pub(crate) fn read_route<T, F, Fut>(
    stores: Stores,
    http: HttpConfig,
    path: &'static str,
    read: F,
) -> Router
where
    T: Serialize + Send + 'static,
    F: Fn(ReadRequest) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Option<T>, BoxError>> + Send + 'static,
{
    let answer = move |stores: Stores, tenant_id: String, id: String, _: HeaderMap| {
        let read = read.clone();
        async move {
            let request = ReadRequest {
                stores,
                tenant_id,
                id: id.clone(),
            };
            match read(request).await {
                Ok(Some(value)) => Json(value).into_response(),
                Ok(None) => error(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    format!("no {id} in this read model"),
                ),
                Err(failure) => {
                    tracing::warn!(error = %failure, path, "a read route's read failed");
                    error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "ServiceUnavailable",
                        "the read model cannot be read; try again shortly".to_owned(),
                    )
                }
            }
        }
    };
    id_route(path, http, stores, error, answer)
}

/// The route `GET path` (a path with an `{id}`) answering with what `answer` makes of
/// `context`, the caller's tenant, the id and the request's headers, once the tenant and the
/// id are found good: the tenant as every built-in route finds it (auth's 401/403 otherwise),
/// the id by the id rules (400 `IllegalArgument`, built by `error`, otherwise).
pub(crate) fn id_route<C, F, Fut>(
    path: &str,
    http: HttpConfig,
    context: C,
    error: fn(StatusCode, &'static str, String) -> Response,
    answer: F,
) -> Router
where
    C: Clone + Send + Sync + 'static,
    F: Fn(C, String, String, HeaderMap) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let route = move |Path(id): Path<String>, headers: HeaderMap| {
        let (http, context, answer) = (http.clone(), context.clone(), answer.clone());
        async move {
            match caller_and_id(&http, &headers, &id, error) {
                Ok(tenant_id) => answer(context, tenant_id, id, headers).await,
                Err(refused) => refused,
            }
        }
    };
    Router::new().route(path, get(route))
}

/// The caller's tenant (found as every built-in route finds it) for a read of `id`, or the
/// answer that refuses it: auth's 401/403, or 400 `IllegalArgument` (built by `error`) for
/// an id that breaks the id rules.
#[allow(clippy::result_large_err)] // the error is the answer itself, built once
fn caller_and_id(
    http: &HttpConfig,
    headers: &HeaderMap,
    id: &str,
    error: fn(StatusCode, &'static str, String) -> Response,
) -> Result<String, Response> {
    let tenant = wow_http::caller_tenant(http, headers).map_err(IntoResponse::into_response)?;
    wow_core::check_aggregate_id(id).map_err(|rule| {
        error(
            StatusCode::BAD_REQUEST,
            "IllegalArgument",
            format!("id {rule}"),
        )
    })?;
    Ok(tenant.0)
}

/// An error answer: `{errorCode, errorMsg}` and `Wow-Error-Code`.
fn error(status: StatusCode, code: &'static str, message: String) -> Response {
    let mut response = (
        status,
        Json(json!({"errorCode": code, "errorMsg": message})),
    )
        .into_response();
    response
        .headers_mut()
        .insert(wow_http::ERROR_CODE_HEADER, HeaderValue::from_static(code));
    response
}

/// `/openapi.json`'s entry for the route: the 200 body is `T`'s JSON Schema (sub-schemas
/// inlined); wow-http completes it (the `id` parameter, auth, 500).
pub(crate) fn read_openapi<T: schemars::JsonSchema>(
    operation_id: &str,
    path: &str,
    summary: &str,
) -> Map<String, Value> {
    let answer = |description: &str| {
        json!({"description": description,
            "headers": {"Wow-Error-Code": {"required": true, "schema": {"type": "string"}}},
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    };
    let item = json!({"get": {
        "operationId": operation_id,
        "summary": summary,
        "parameters": [
            {"name": "Command-Tenant-Id", "in": "header", "required": false,
                "description": "The tenant, as for every query (not read when bearer auth is on).",
                "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^(\\(0\\)|([.]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*|[.]{3,}))$"}},
        ],
        "responses": {
            "200": {"description": summary,
                "content": {"application/json": {"schema": inlined_schema::<T>()}}},
            "400": answer("IllegalArgument: the id or Command-Tenant-Id breaks the rules of an id"),
            "404": answer("NotFound: nothing for this id in the caller's tenant"),
            "503": answer("ServiceUnavailable: the read model cannot be read"),
        },
    }});
    [(path.to_owned(), item)].into_iter().collect()
}

/// `T`'s JSON Schema with its sub-schemas inlined, so that it stands inside the document.
pub(crate) fn inlined_schema<T: schemars::JsonSchema>() -> Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Some(object) = value.as_object_mut() {
        object.remove("$schema");
    }
    value
}
