//! The read routes of a view over several aggregate types (SPEC DM-4):
//! `GET /views/{view}/{row}`, one row in the caller's tenant, and `GET /views/{view}`, its
//! rows filtered on the view's indexed fields, a page at a time; and their `/openapi.json`
//! entries.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use wow_core::view::{FilterValue, MultiStreamView, ViewFilter, ViewInputs, ViewKey, ViewStore};
use wow_http::fresh::Freshness;
use wow_http::HttpConfig;

use crate::fresh_consumer::ConsumerReads;
use crate::view_route::error;

/// The most rows one page of a list holds, and how many it holds unless `limit` says fewer.
pub(crate) const MAX_PAGE: usize = 100;

/// The path of `V`'s row route.
pub(crate) fn row_path<V: MultiStreamView>() -> String {
    format!("/views/{}/{{id}}", V::NAME)
}

/// The path of `V`'s list route.
pub(crate) fn list_path<V: MultiStreamView>() -> String {
    format!("/views/{}", V::NAME)
}

/// How a query parameter's text is read for one indexed field: by the type the state's
/// JSON Schema gives the field.
#[derive(Debug, Clone, Copy)]
enum FieldType {
    Text,
    Integer,
    Bool,
}

/// The indexed fields of `V` and their types, from `V::State`'s JSON Schema (text unless
/// it says integer or boolean).
fn indexed_fields<V: MultiStreamView>() -> HashMap<&'static str, FieldType>
where
    V::State: schemars::JsonSchema,
{
    let schema = crate::read_route::inlined_schema::<V::State>();
    V::INDEXED
        .iter()
        .map(|field| {
            let kind = match schema["properties"][*field]["type"].as_str() {
                Some("integer" | "number") => FieldType::Integer,
                Some("boolean") => FieldType::Bool,
                _ => FieldType::Text,
            };
            (*field, kind)
        })
        .collect()
}

/// Both routes of `V`: 200 with `{id, version, state}` for a row (404 when the tenant has
/// none of that key), and `{rows, next}` for a list; 400 for a row key or tenant that breaks
/// the id rules, a filter on a field the view does not index, a value of the wrong type or a
/// bad `limit`; 503 when the store cannot be reached. Either may ask to include an append
/// (SPEC DS-6, [`ConsumerReads`]): 408 `ViewNotFresh` when the wait runs out.
pub(crate) fn multi_view_routes<V: MultiStreamView>(
    store: Arc<dyn ViewStore>,
    fresh: ConsumerReads,
    http: HttpConfig,
) -> Router
where
    V::State: schemars::JsonSchema,
{
    let fields = Arc::new(indexed_fields::<V>());
    let row_route = crate::read_route::id_route(
        &row_path::<V>(),
        http.clone(),
        (store.clone(), fresh.clone()),
        error,
        read_row::<V>,
    );
    let list = move |Query(params): Query<Vec<(String, String)>>, headers: HeaderMap| {
        let (store, fresh, http, fields) =
            (store.clone(), fresh.clone(), http.clone(), fields.clone());
        async move {
            let tenant_id = match wow_http::caller_tenant(&http, &headers) {
                Ok(tenant) => tenant.0,
                Err(refused) => return refused.into_response(),
            };
            let waited = (&fresh, &headers);
            list_rows::<V>(store.as_ref(), &tenant_id, &fields, params, waited).await
        }
    };
    row_route.route(&list_path::<V>(), get(list))
}

/// Waits for what the read's freshness headers name, if they name anything.
async fn fresh_enough<V: MultiStreamView>(
    fresh: &ConsumerReads,
    tenant_id: &str,
    headers: &HeaderMap,
) -> Result<(), Response> {
    match Freshness::of(headers) {
        Ok(None) => Ok(()),
        Ok(Some(freshness)) => {
            let inputs = V::inputs(ViewInputs::new()).aggregates();
            fresh.wait(V::NAME, &inputs, tenant_id, &freshness).await
        }
        Err((status, code, message)) => Err(error(status, code, message)),
    }
}

async fn read_row<V: MultiStreamView>(
    (store, fresh): (Arc<dyn ViewStore>, ConsumerReads),
    tenant_id: String,
    id: String,
    headers: HeaderMap,
) -> Response {
    if let Err(answer) = fresh_enough::<V>(&fresh, &tenant_id, &headers).await {
        return answer;
    }
    match store
        .load(&ViewKey::new(V::NAME, tenant_id, id.clone()))
        .await
    {
        Ok(Some(row)) => {
            Json(json!({"id": id, "version": row.version, "state": row.state})).into_response()
        }
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("no row `{id}` of view {}", V::NAME),
        ),
        Err(failure) => unavailable::<V>(&failure),
    }
}

async fn list_rows<V: MultiStreamView>(
    store: &dyn ViewStore,
    tenant_id: &str,
    fields: &HashMap<&'static str, FieldType>,
    params: Vec<(String, String)>,
    (fresh, headers): (&ConsumerReads, &HeaderMap),
) -> Response {
    let bad = |message: String| error(StatusCode::BAD_REQUEST, "IllegalArgument", message);
    let (mut filter, mut after, mut limit) = (ViewFilter::new(), None, MAX_PAGE);
    for (name, value) in params {
        match name.as_str() {
            "after" => after = Some(value),
            "limit" => match value.parse::<usize>() {
                Ok(n) if (1..=MAX_PAGE).contains(&n) => limit = n,
                _ => return bad(format!("limit must be 1 to {MAX_PAGE}, not `{value}`")),
            },
            field => {
                let Some(kind) = fields.get(field) else {
                    return bad(format!(
                        "view {} lists by its indexed fields only ({}), not by `{field}`",
                        V::NAME,
                        V::INDEXED.join(", ")
                    ));
                };
                let value = match kind {
                    FieldType::Text => FilterValue::Text(value),
                    FieldType::Integer => match value.parse::<i64>() {
                        Ok(n) => FilterValue::Integer(n),
                        Err(_) => return bad(format!("`{field}` is an integer, not `{value}`")),
                    },
                    FieldType::Bool => match value.as_str() {
                        "true" => FilterValue::Bool(true),
                        "false" => FilterValue::Bool(false),
                        _ => return bad(format!("`{field}` is true or false, not `{value}`")),
                    },
                };
                filter = filter.equals(field, value);
            }
        }
    }
    // The list's parameters are checked first: a bad one is 400 at once, never a wait.
    if let Err(answer) = fresh_enough::<V>(fresh, tenant_id, headers).await {
        return answer;
    }
    match store
        .list(V::NAME, tenant_id, &filter, after.as_deref(), limit)
        .await
    {
        Ok(rows) => {
            let next = (rows.len() == limit)
                .then(|| rows.last().map(|row| row.key.aggregate_id.clone()))
                .flatten();
            let rows: Vec<Value> = rows
                .into_iter()
                .map(|row| json!({"id": row.key.aggregate_id, "version": row.version, "state": row.state}))
                .collect();
            Json(json!({"rows": rows, "next": next})).into_response()
        }
        Err(wow_core::view::ViewStoreError::IllegalArgument(message)) => bad(message),
        Err(failure) => unavailable::<V>(&failure),
    }
}

fn unavailable<V: MultiStreamView>(failure: &wow_core::view::ViewStoreError) -> Response {
    tracing::warn!(view = V::NAME, error = %failure, "a view's read failed");
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        format!("view {} cannot be read; try again shortly", V::NAME),
    )
}

/// `/openapi.json`'s entries for `V`'s two routes; a row's `state` is `V::State`'s JSON
/// Schema. wow-http completes them (the `id` parameter, auth, 500).
pub(crate) fn multi_view_openapi<V: MultiStreamView>() -> Map<String, Value>
where
    V::State: schemars::JsonSchema,
{
    let answer = |description: &str| {
        json!({"description": description,
            "headers": {"Wow-Error-Code": {"required": true, "schema": {"type": "string"}}},
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    };
    let tenant = json!({"name": "Command-Tenant-Id", "in": "header", "required": false,
        "description": "The tenant, as for every query (not read when bearer auth is on).",
        "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^(\\(0\\)|([.]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*|[.]{3,}))$"}});
    let state = crate::read_route::inlined_schema::<V::State>();
    let row = json!({"type": "object", "required": ["id", "version", "state"],
    "properties": {
        "id": {"type": "string"},
        "version": {"type": "integer", "minimum": 1, "description": "How many streams were folded into the row"},
        "state": state,
    }});
    let of = "`{aggregate}/{id}` of a type the view follows";
    let mut row_parameters = vec![tenant.clone()];
    row_parameters.extend(wow_http::fresh::openapi_parameters(Some(of)));
    let one = json!({"get": {
        "operationId": format!("view.{}.row", V::NAME),
        "summary": format!("One row of the view {}", V::NAME),
        "parameters": row_parameters,
        "responses": {
            "200": {"description": "The row", "content": {"application/json": {"schema": row.clone()}}},
            "400": answer("IllegalArgument: the row key or Command-Tenant-Id breaks the rules of an id; BadRequest: a freshness header that does not parse, or Wow-Fresh-Aggregate missing"),
            "404": answer("NotFound: the view holds no such row in the caller's tenant"),
            "408": answer("ViewNotFresh: the wait ran out before the view handled the append the freshness headers name (the body adds version, wanted, lag)"),
            "503": answer("ServiceUnavailable: the view store cannot be reached"),
        },
    }});
    let fields = indexed_fields::<V>();
    let mut parameters = vec![
        tenant,
        json!({"name": "after", "in": "query", "required": false,
            "description": "The last row key of the page before (`next`)", "schema": {"type": "string"}}),
        json!({"name": "limit", "in": "query", "required": false,
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}}),
    ];
    parameters.extend(wow_http::fresh::openapi_parameters(Some(of)));
    for field in V::INDEXED {
        let kind = match fields.get(field) {
            Some(FieldType::Integer) => "integer",
            Some(FieldType::Bool) => "boolean",
            _ => "string",
        };
        parameters.push(json!({"name": field, "in": "query", "required": false,
            "description": format!("Rows whose `{field}` equals this (an indexed field)"),
            "schema": {"type": kind}}));
    }
    let list = json!({"get": {
        "operationId": format!("view.{}.list", V::NAME),
        "summary": format!("Rows of the view {}, by its indexed fields, in row key order", V::NAME),
        "parameters": parameters,
        "responses": {
            "200": {"description": "A page of rows; `next` is the `after` of the next page, null at the end",
                "content": {"application/json": {"schema": {"type": "object", "required": ["rows", "next"],
                    "properties": {"rows": {"type": "array", "items": row},
                        "next": {"type": ["string", "null"]}}}}}},
            "400": answer("IllegalArgument: a filter on a field the view does not index, a value of another type, or a bad limit; BadRequest: a freshness header that does not parse, or Wow-Fresh-Aggregate missing"),
            "408": answer("ViewNotFresh: the wait ran out before the view handled the append the freshness headers name (the body adds version, wanted, lag)"),
            "503": answer("ServiceUnavailable: the view store cannot be reached"),
        },
    }});
    [(row_path::<V>(), one), (list_path::<V>(), list)]
        .into_iter()
        .collect()
}
