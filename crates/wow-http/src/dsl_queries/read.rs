//! [`DslQuery`]: a query of Wow's DSL as a route takes it: the aggregate `{aggregate}` names,
//! the caller's tenant, and the body read as the route's query (or a bare condition), checked
//! and narrowed to the caller's owner and space.

use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::HeaderMap;
use serde::de::DeserializeOwned;
use serde_json::Value;
use wow_core::aggregate::AggregateRuntime;
use wow_core::command::headers;
use wow_core::query::{Condition, ListQuery, Operator, PagedQuery, QueryBody, SingleQuery};
use wow_core::ErrorCode;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::Aggregate;
use crate::state::HttpState;

/// A query of `{aggregate}`, as `T`: refused with 401, 400 or 403 for the caller, 404 for an
/// aggregate this service does not have, and 400 (413, 408) for a body that is not a query.
#[derive(Debug)]
pub(crate) struct DslQuery<T> {
    /// The aggregate queried.
    pub(crate) runtime: Arc<dyn AggregateRuntime>,
    /// The caller's tenant: the only one the query sees (SPEC TN-1).
    pub(crate) tenant: String,
    /// The query, narrowed to the owner the request names (its token's; else
    /// `/owner/{ownerId}/` or `Command-Owner-Id`) and to its token's space, as Wow rewrites
    /// a query's condition.
    pub(crate) query: T,
    /// What the answer must include (SPEC DS-6): the freshness headers, when given.
    pub(crate) freshness: Option<crate::fresh::Freshness>,
}

impl<T: DeserializeOwned + Narrow + Send> FromRequest<HttpState> for DslQuery<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &HttpState) -> Result<Self, ApiError> {
        let (mut parts, body) = request.into_parts();
        let caller = Caller::from_request_parts(&mut parts, state).await?;
        let Aggregate(runtime) = Aggregate::from_request_parts(&mut parts, state).await?;
        let value = crate::input::query_body(body, state.config().body_limit)
            .await
            .map_err(|e| ApiError::new(e.status(), ErrorCode::BadRequest, e.to_string()))?;
        let query = parsed::<T>(value)?;
        let query = narrowed(query, &caller, &parts.headers)?;
        let freshness = crate::fresh::Freshness::of(&parts.headers)
            .map_err(|(_, _, message)| ApiError::bad_request(message))?;
        Ok(Self {
            runtime,
            tenant: caller.tenant,
            query,
            freshness,
        })
    }
}

/// The body as `T`: a JSON object whose parts have the shapes the document gives them.
fn parsed<T: DeserializeOwned + Narrow>(value: Value) -> Result<T, ApiError> {
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "body: must be a JSON object (a query, or a condition for count)",
        ));
    }
    check_parts(&value, T::BARE).map_err(ApiError::bad_request)?;
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let at = e.path().to_string();
        ApiError::bad_request(format!("body.{at}: {}", e.into_inner()))
    })
}

/// `query` narrowed to the caller's owner and space. SPEC TN-2: a bound caller sees only its
/// owner's (and space's) documents, whatever the condition says; the token's owner wins over
/// the header (which may only repeat it). An aggregate in no space is in every space of its
/// owner (as the command side decides).
fn narrowed<T: Narrow>(mut query: T, caller: &Caller, headers: &HeaderMap) -> Result<T, ApiError> {
    let named = crate::input::owned_id(headers, headers::OWNER_ID)
        .map_err(|e| ApiError::illegal_argument(e.message))?;
    let narrowing = [
        caller
            .owner
            .clone()
            .or(named)
            .map(|owner| Condition::of(Operator::OwnerId, "", owner).imposed()),
        caller.space.clone().map(|space| {
            Condition::logical(
                Operator::Or,
                vec![
                    Condition::of(Operator::SpaceId, "", space).imposed(),
                    Condition::of(Operator::SpaceId, "", "").imposed(),
                ],
            )
            .imposed()
        }),
    ];
    // Imposed: the narrowing counts against none of the caller's query limits.
    for owned in narrowing.into_iter().flatten() {
        let condition = std::mem::take(query.condition_of());
        *query.condition_of() = if condition.operator == Operator::All {
            owned
        } else {
            Condition::logical(Operator::And, vec![owned, condition]).imposed()
        };
    }
    Ok(query)
}

/// What a query's documents can be narrowed by: its condition.
pub(crate) trait Narrow {
    /// Whether the body is a bare condition (a count) rather than a query.
    const BARE: bool = false;

    /// The condition that picks the documents.
    fn condition_of(&mut self) -> &mut Condition;
}

impl Narrow for Condition {
    const BARE: bool = true;

    fn condition_of(&mut self) -> &mut Condition {
        self
    }
}

/// Where a query's parts must be objects (or an array of objects), as the document says.
/// serde reads a struct from a JSON array too (its fields in order), so `{"projection":
/// [[], []]}` would pass as a projection: the shape is checked first.
fn check_parts(value: &Value, bare: bool) -> Result<(), String> {
    fn condition(value: &Value, at: &str) -> Result<(), String> {
        let Some(object) = value.as_object() else {
            return Err(format!("{at}: must be an object (a condition)"));
        };
        if let Some(options) = object.get("options") {
            if !options.is_object() && !options.is_null() {
                return Err(format!("{at}.options: must be an object"));
            }
        }
        match object.get("children") {
            None | Some(Value::Null) => Ok(()),
            Some(Value::Array(children)) => children
                .iter()
                .enumerate()
                .try_for_each(|(i, child)| condition(child, &format!("{at}.children[{i}]"))),
            Some(_) => Err(format!("{at}.children: must be an array of conditions")),
        }
    }
    if bare {
        return condition(value, "body");
    }
    for part in ["projection", "pagination"] {
        match value.get(part) {
            None | Some(Value::Null) | Some(Value::Object(_)) => {}
            Some(_) => return Err(format!("body.{part}: must be an object")),
        }
    }
    if let Some(sort) = value.get("sort").filter(|sort| !sort.is_null()) {
        let objects = sort
            .as_array()
            .is_some_and(|items| items.iter().all(Value::is_object));
        if !objects {
            return Err("body.sort: must be an array of objects".to_owned());
        }
    }
    match value.get("condition") {
        None | Some(Value::Null) => Ok(()),
        Some(found) => condition(found, "body.condition"),
    }
}

macro_rules! narrow_query {
    ($($body:ty),*) => {$(
        impl Narrow for $body {
            fn condition_of(&mut self) -> &mut Condition {
                self.condition_mut()
            }
        }
    )*};
}

narrow_query!(SingleQuery, ListQuery, PagedQuery);
