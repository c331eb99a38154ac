//! The bank's own HTTP routes as `/openapi.json` lists them: `GET /account/{id}/view`, the
//! `account_balance` read model. `wow serve` merges the route into the router and hands
//! [`openapi_paths`] to `wow_http::HttpState::with_openapi_paths`, which completes each
//! operation (undeclared path parameters, the bearer requirement when auth is on, 401, 500).

use serde_json::{json, Map, Value};

/// The OpenAPI `paths` of the bank's own routes.
pub fn openapi_paths() -> Map<String, Value> {
    let error = |description: &str| {
        json!({"description": description,
            "headers": {"Wow-Error-Code": {"required": true, "schema": {"type": "string"}}},
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    };
    let view = json!({"get": {
        "operationId": "account.view",
        "summary": "One account as the account_balance read model shows it",
        "parameters": [
            {"name": "id", "in": "path", "required": true, "description": "The account id.",
                "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[A-Za-z0-9._:-]+$"}},
            {"name": "Command-Tenant-Id", "in": "header", "required": false,
                "description": "The tenant, as for every query (not read when bearer auth is on).",
                "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^(\\(0\\)|[A-Za-z0-9._:-]+)$"}},
        ],
        "responses": {
            "200": {"description": "The account: its available balance, the amount held by transfers in flight, the last event version applied",
                "content": {"application/json": {"schema": account_view_schema()}}},
            "400": error("IllegalArgument: the id or Command-Tenant-Id breaks the rules of an id"),
            "404": error("NotFound: no such account in the read model (or another tenant's)"),
            "503": error("ServiceUnavailable: the read model cannot be read"),
        },
    }});
    [("/account/{id}/view".to_owned(), view)]
        .into_iter()
        .collect()
}

/// The JSON Schema of [`AccountView`](crate::projection::AccountView).
fn account_view_schema() -> Value {
    json!({"type": "object", "required": ["id", "name", "balance", "held", "version"],
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "balance": {"type": "integer"},
        "held": {"type": "integer"},
        "version": {"type": "integer", "minimum": 0},
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_schema_names_every_field_of_the_view() {
        let view =
            serde_json::to_value(crate::projection::AccountView::default()).unwrap_or_default();
        let schema = account_view_schema();
        for field in view.as_object().into_iter().flat_map(|o| o.keys()) {
            assert!(
                schema["properties"].get(field).is_some(),
                "{field} is not in the schema"
            );
            assert!(
                schema["required"]
                    .as_array()
                    .is_some_and(|r| r.contains(&json!(field))),
                "{field}"
            );
        }
    }
}
