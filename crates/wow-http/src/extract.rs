//! The extractors the routes share, each rejecting with [`ApiError`]: who calls ([`Caller`],
//! [`CallerTenant`]), the aggregate a path names ([`Aggregate`]) and the aggregate a read
//! route names in the caller's tenant ([`ReadTarget`]). The routes of one module keep their
//! own extractors there (a command's in `commands`, a query's in `dsl_queries`).

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::Deserialize;
use wow_core::aggregate::AggregateRuntime;
use wow_core::{AggregateId, ErrorCode};

use crate::auth::{self, Caller};
use crate::error::ApiError;
use crate::ids::Id;
use crate::state::HttpState;

/// The caller: its tenant, and the owner and space its token binds it to ([`auth::caller`]);
/// refused with 401, 400 or 403.
impl FromRequestParts<HttpState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, ApiError> {
        Ok(auth::caller(state.config(), &parts.headers)?)
    }
}

/// The tenant the request acts for ([`auth::tenant`]); refused with 401 or 400.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallerTenant(pub(crate) String);

impl FromRequestParts<HttpState> for CallerTenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, ApiError> {
        Ok(Self(auth::tenant(state.config(), &parts.headers)?.0))
    }
}

/// The path parameters `{aggregate}` and `{id}`, by name (a route's other parameters are
/// its own to read).
#[derive(Debug, Deserialize)]
struct Named {
    aggregate: String,
    id: String,
}

/// The path parameter `{aggregate}`.
#[derive(Debug, Deserialize)]
struct AggregateName {
    aggregate: String,
}

/// The aggregate `{aggregate}` names: 404 `NotFound` for one this service does not have.
#[derive(Debug, Clone)]
pub(crate) struct Aggregate(pub(crate) Arc<dyn AggregateRuntime>);

impl FromRequestParts<HttpState> for Aggregate {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, ApiError> {
        let Path(AggregateName { aggregate }) = Path::from_request_parts(parts, state).await?;
        let runtime = state
            .registry()
            .find(&aggregate)
            .map_err(|unknown| ApiError::not_found(unknown.to_string()))?;
        Ok(Self(runtime.clone()))
    }
}

/// The aggregate a read route names (`/{aggregate}/{id}/…`) in the caller's tenant; refused
/// as a read's error: 401 or 400 for the caller, 404 for an aggregate type this service does
/// not have or an id no aggregate can have.
#[derive(Debug, Clone)]
pub(crate) struct ReadTarget {
    /// The aggregate's runtime.
    pub(crate) runtime: Arc<dyn AggregateRuntime>,
    /// The aggregate, in the caller's tenant.
    pub(crate) aggregate_id: AggregateId,
}

impl ReadTarget {
    /// The id the path names.
    pub(crate) fn id(&self) -> &str {
        &self.aggregate_id.id
    }
}

impl FromRequestParts<HttpState> for ReadTarget {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, ApiError> {
        let CallerTenant(tenant) = CallerTenant::from_request_parts(parts, state).await?;
        let Path(Named { aggregate, id }) = Path::from_request_parts(parts, state).await?;
        let runtime = state
            .registry()
            .find(&aggregate)
            .map_err(|unknown| ApiError::read_not_found(unknown.to_string()))?;
        let id =
            Id::parse(&id).map_err(|_| ApiError::read_not_found(format!("no aggregate `{id}`")))?;
        let aggregate_id = runtime
            .named_aggregate()
            .aggregate_id(id.into_string(), tenant);
        Ok(Self {
            runtime: runtime.clone(),
            aggregate_id,
        })
    }
}

/// A path whose parameters do not read as the route's. A segment that is not UTF-8 is refused
/// before any route runs (the `rules` layer), so what is left is a route that names
/// parameters it does not have: 500.
impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        let status = rejection.status();
        let code = if status == StatusCode::BAD_REQUEST {
            ErrorCode::IllegalArgument
        } else {
            ErrorCode::InternalServerError
        };
        ApiError::new(status, code, rejection.body_text())
    }
}
