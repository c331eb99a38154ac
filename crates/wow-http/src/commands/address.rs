//! How each command route's path names the command and its aggregate: [`Addressing`], one
//! marker type per route.

use axum::http::HeaderMap;
use serde::de::DeserializeOwned;
use wow_core::aggregate::{is_lifecycle_command, DELETE_AGGREGATE, RECOVER_AGGREGATE};
use wow_core::command::headers;

use crate::error::ApiError;

/// How a route's path names a command and its aggregate.
pub(crate) trait Addressing {
    /// The route's path parameters.
    type Path: DeserializeOwned + Send;

    /// The command and the aggregate `path` names (a create's id: from `headers`); `Err`
    /// when the path names no command a caller may send.
    fn address(path: Self::Path, headers: &HeaderMap) -> Result<Address, ApiError>;
}

/// The command a path names, and the aggregate it goes to.
#[derive(Debug)]
pub(crate) struct Address {
    /// The aggregate's name.
    pub(super) aggregate: String,
    /// Its id; `None`: a create's that names none, derived or made once the tenant is known.
    pub(super) id: Option<String>,
    /// The command's name.
    pub(super) command: String,
}

/// `POST /{aggregate}/{id}/{command}`: a command to an aggregate (not a built-in).
#[derive(Debug)]
pub(crate) enum ToAggregate {}

/// `POST /{aggregate}/{command}`: a create whose id comes from `Command-Aggregate-Id`; or,
/// absent that, derived from the tenant, the aggregate name and `Command-Request-Id` (so a
/// resend reaches the same aggregate and is answered as a duplicate, never opens a second
/// one); or, with neither header, made by the server.
#[derive(Debug)]
pub(crate) enum Create {}

/// `DELETE /{aggregate}/{id}`: Wow's soft delete.
#[derive(Debug)]
pub(crate) enum Delete {}

/// `PUT /{aggregate}/{id}/recover`: Wow's recover.
#[derive(Debug)]
pub(crate) enum Recover {}

/// 404: the built-in soft delete and recover answer DELETE and PUT only.
fn no_command(aggregate: &str, command: &str) -> ApiError {
    ApiError::not_found(format!(
        "aggregate `{aggregate}` has no command `{command}`"
    ))
}

impl Addressing for ToAggregate {
    type Path = (String, String, String);

    fn address((aggregate, id, command): Self::Path, _: &HeaderMap) -> Result<Address, ApiError> {
        if is_lifecycle_command(&command) {
            return Err(no_command(&aggregate, &command));
        }
        Ok(Address {
            aggregate,
            id: Some(id),
            command,
        })
    }
}

impl Addressing for Create {
    type Path = (String, String);

    fn address((aggregate, command): Self::Path, headers: &HeaderMap) -> Result<Address, ApiError> {
        let named = headers
            .get(headers::AGGREGATE_ID)
            .map(|v| v.to_str().map(str::to_owned).unwrap_or_default());
        if is_lifecycle_command(&command) {
            return Err(no_command(&aggregate, &command));
        }
        Ok(Address {
            aggregate,
            id: named,
            command,
        })
    }
}

impl Addressing for Delete {
    type Path = (String, String);

    fn address((aggregate, id): Self::Path, _: &HeaderMap) -> Result<Address, ApiError> {
        Ok(Address {
            aggregate,
            id: Some(id),
            command: DELETE_AGGREGATE.to_owned(),
        })
    }
}

impl Addressing for Recover {
    type Path = (String, String, String);

    fn address((aggregate, id, _): Self::Path, _: &HeaderMap) -> Result<Address, ApiError> {
        Ok(Address {
            aggregate,
            id: Some(id),
            command: RECOVER_AGGREGATE.to_owned(),
        })
    }
}
