//! [`CommandTo`]: a command request as its route takes it. Which command the path names and
//! to which aggregate (each route by its `Addressing`), who sends it, and with which
//! options, read from the request's parts in the order the API checks them; the first that
//! is wrong is the answer, a `CommandResult` that names it (or the 401 of a missing token).

use std::marker::PhantomData;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use serde_json::Value;
use wow_core::aggregate::{
    is_lifecycle_command, AggregateRuntime, Lifecycle, UnknownAggregate, DELETE_AGGREGATE,
    RECOVER_AGGREGATE,
};
use wow_core::command::{headers, CommandInfo, CommandKind};
use wow_core::{id, AggregateId, CommandMessage, CommandStage, ErrorCode};
use wow_runtime::command::WaitPlan;

use super::address::{Address, Addressing};
use crate::access::{self, Denied};
use crate::auth::{self, Caller, NoTenant, Refused};
use crate::create_id::derived_aggregate_id;
use crate::error::ApiError;
use crate::ids::{Id, RequestId};
use crate::input::{self, CommandOptions, InputError};
use crate::operator;
use crate::state::HttpState;

/// A command request of the route `A`, read from its parts: the [`Command`].
#[derive(Debug)]
pub(crate) struct CommandTo<A> {
    command: Command,
    route: PhantomData<A>,
}

impl<A> CommandTo<A> {
    /// The command, whichever route named it.
    pub(crate) fn into_command(self) -> Command {
        self.command
    }
}

impl<A> FromRequestParts<HttpState> for CommandTo<A>
where
    A: Addressing + Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, ApiError> {
        let started = Instant::now();
        let Path(path) = Path::<A::Path>::from_request_parts(parts, state).await?;
        Self::of_path(path, &parts.headers, state, started)
    }
}

impl<A: Addressing> CommandTo<A> {
    /// The command of a request whose path parameters were read already (`path`), taken up
    /// at `started`.
    pub(crate) fn of_path(
        path: A::Path,
        headers: &HeaderMap,
        state: &HttpState,
        started: Instant,
    ) -> Result<Self, ApiError> {
        let address = A::address(path, headers)?;
        let command = Command::read(address, headers, state, started)?;
        Ok(Self {
            command,
            route: PhantomData,
        })
    }
}

/// Who sends which command to which aggregate, with which options.
#[derive(Debug)]
pub(crate) struct Command {
    /// When the request was taken up: the command's latency counts from here.
    started: Instant,
    caller: Caller,
    aggregate_id: AggregateId,
    info: CommandInfo,
    options: CommandOptions,
    /// `Command-Request-Id` as the caller sent it: the request id of a refusal's result.
    sent_request_id: Option<String>,
}

/// A command ready to send: the message, how long and for which stage to wait, whether to
/// stream its stages.
#[derive(Debug)]
pub(crate) struct Sendable {
    /// The command message.
    pub(crate) message: CommandMessage<Value>,
    /// The stage to wait for, for how long, and for which consumer.
    pub(crate) plan: WaitPlan,
    /// Whether to answer with the stream of stages rather than the result.
    pub(crate) stream: bool,
    /// When the request was taken up.
    pub(crate) started: Instant,
}

impl Command {
    /// The command `address` names, from the caller `headers` say, with the options they
    /// give; checked in this order: the caller, the aggregate, the options, the id, the
    /// command.
    fn read(
        address: Address,
        headers: &HeaderMap,
        state: &HttpState,
        started: Instant,
    ) -> Result<Self, ApiError> {
        let Address {
            aggregate,
            id,
            command,
        } = address;
        let sent_request_id = headers
            .get(headers::REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let refused = |refused| {
            refused_caller(
                refused,
                &aggregate,
                id.as_deref(),
                sent_request_id.as_deref(),
            )
        };
        // SPEC DM-6: an operator's delete or recover is the one command an operator token
        // sends; it acts in the tenant the request names.
        let operators = is_lifecycle_command(&command)
            && state
                .registry()
                .get(&aggregate)
                .is_some_and(|runtime| runtime.lifecycle() == Lifecycle::Operator);
        let caller = if operators {
            operator::permits_command(state.config(), headers)?;
            let tenant =
                auth::named_tenant(headers).map_err(|invalid| refused(Refused::Tenant(invalid)))?;
            Caller {
                tenant: tenant.0,
                owner: None,
                space: None,
            }
        } else {
            auth::caller(state.config(), headers).map_err(refused)?
        };
        let id = id.unwrap_or_else(|| unnamed_id(headers, &caller.tenant, &aggregate));
        let runtime = state
            .registry()
            .get(&aggregate)
            .ok_or_else(|| unknown_aggregate(&aggregate, &id, &caller.tenant))?;
        let aggregate_id = runtime
            .named_aggregate()
            .aggregate_id(id.clone(), caller.tenant.clone());
        let refuse = |error: InputError| {
            ApiError::command(error.result(&aggregate_id, sent_request_id.as_deref()))
        };
        let options = CommandOptions::read(headers, state.config()).map_err(refuse)?;
        Id::parse(&id).map_err(|invalid| {
            refuse(InputError::bad(
                ErrorCode::IllegalArgument,
                "aggregateId",
                invalid.for_binding(),
            ))
        })?;
        let info = find_command(runtime.as_ref(), &aggregate, &command).map_err(refuse)?;
        Ok(Self {
            started,
            caller,
            aggregate_id,
            info,
            options,
            sent_request_id,
        })
    }

    /// Whether the caller may reach the aggregate (SPEC TN-2), checked before anything is
    /// sent so that nothing is recorded for a refused caller: a refusal is 403 with the
    /// code and the caller's own ids, nothing of the aggregate's.
    pub(crate) async fn permitted(&self, state: &HttpState) -> Result<(), ApiError> {
        access::permitted(state, &self.caller, &self.aggregate_id)
            .await
            .map_err(|denied| match denied {
                Denied::Refused(refused) => ApiError::command(
                    InputError::refused(refused.code, refused.message)
                        .result(&self.aggregate_id, self.sent_request_id.as_deref()),
                ),
                denied => denied.into(),
            })
    }

    /// The command's JSON body, at most `limit` bytes, sent as JSON.
    pub(crate) async fn body(&self, body: Body, limit: usize) -> Result<Value, ApiError> {
        let content_type = self.options.content_type.as_deref();
        input::body(body, limit, content_type)
            .await
            .map_err(|error| {
                ApiError::command(
                    error.result(&self.aggregate_id, self.options.request_id.as_deref()),
                )
            })
    }

    /// The message to send with `value` as its body, and how long and for which stage to
    /// wait. The token's owner and space win over the headers (which may only repeat them).
    pub(crate) fn into_sendable(self, value: Value) -> Sendable {
        let Command {
            started,
            caller,
            aggregate_id,
            info,
            mut options,
            ..
        } = self;
        options.owner_id = caller.owner.or(options.owner_id);
        options.space_id = caller.space.or(options.space_id);
        let stream = options.stream && info.kind != CommandKind::Void;
        let (message, plan) = message_and_plan(aggregate_id, info, options, value);
        Sendable {
            message,
            plan,
            stream,
            started,
        }
    }
}

/// The id of a create that names none: derived from the intent when the request carries a
/// valid request id, else a fresh one.
fn unnamed_id(headers: &HeaderMap, tenant: &str, aggregate: &str) -> String {
    let request_id = headers
        .get(headers::REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|id| RequestId::parse(id).is_ok());
    match request_id {
        // SPEC ES-4: the resend of a create must meet its first attempt in one aggregate.
        Some(request_id) => derived_aggregate_id(tenant, aggregate, request_id),
        None => id::new_id(),
    }
}

/// The answer to a command whose caller is refused: unauthorized (401, 400), a tenant id
/// that breaks the rules, or headers naming another owner or space than its token's (403);
/// the last two as a command's result. A command's error carries its ids (SPEC ID-4); the
/// tenant it named is not one.
fn refused_caller(
    refused: Refused,
    aggregate: &str,
    id: Option<&str>,
    request_id: Option<&str>,
) -> ApiError {
    let named = AggregateId::new("", aggregate, id.unwrap_or_default(), "");
    let answer = |error: InputError| ApiError::command(error.result(&named, request_id));
    match refused {
        Refused::Tenant(NoTenant::Invalid(rule)) => answer(InputError::bad(
            ErrorCode::IllegalArgument,
            headers::TENANT_ID,
            rule,
        )),
        Refused::Tenant(unauthorized) => unauthorized.into(),
        Refused::Access(refused) => answer(InputError::refused(refused.code, refused.message)),
    }
}

/// The answer to a command for an aggregate this service does not have.
fn unknown_aggregate(aggregate: &str, id: &str, tenant: &str) -> ApiError {
    let unknown = AggregateId::new("", aggregate, id, tenant);
    let error = InputError::refused(
        ErrorCode::NotFound,
        UnknownAggregate(aggregate.to_owned()).to_string(),
    );
    ApiError::command(error.result(&unknown, None))
}

/// The command a caller may send by this name.
fn find_command(
    runtime: &dyn AggregateRuntime,
    aggregate: &str,
    command: &str,
) -> Result<CommandInfo, InputError> {
    // The built-in soft delete and recover: routed by DELETE and PUT only (their names are
    // no aggregate's commands), as the aggregate's lifecycle allows (SPEC DM-6).
    if let Some(name) = [DELETE_AGGREGATE, RECOVER_AGGREGATE]
        .into_iter()
        .find(|name| *name == command)
    {
        let lifecycle = runtime.lifecycle();
        if !lifecycle.allowed() {
            return Err(InputError::refused(
                ErrorCode::LifecycleDisabled,
                format!("aggregate `{aggregate}` cannot be deleted or recovered: its domain disables both"),
            ));
        }
        if !lifecycle.open_over_http() {
            // Internal, as an internal command is: to a caller it does not exist.
            return Err(no_such_command(aggregate, command));
        }
        return Ok(CommandInfo {
            name,
            kind: CommandKind::Normal,
            internal: false,
            deadline: false,
            schema: || serde_json::json!({"type": "object"}),
        });
    }
    runtime
        .commands()
        .iter()
        // An internal command is sent by sagas only: to a caller it does not exist.
        .find(|c| c.name == command && !c.internal)
        .copied()
        .ok_or_else(|| no_such_command(aggregate, command))
}

/// 404: the aggregate has no command of that name a caller may send.
fn no_such_command(aggregate: &str, command: &str) -> InputError {
    InputError::refused(
        ErrorCode::NotFound,
        format!("aggregate `{aggregate}` has no command `{command}`"),
    )
}

/// The message to send and how long and for which stage to wait.
fn message_and_plan(
    aggregate_id: AggregateId,
    info: CommandInfo,
    options: CommandOptions,
    value: Value,
) -> (CommandMessage<Value>, WaitPlan) {
    let mut message = CommandMessage::new(aggregate_id, info.name, info.kind, value);
    if let Some(request_id) = options.request_id {
        message.request_id = request_id;
    }
    message.aggregate_version = options.expected_version;
    for (header, value) in [
        (wow_core::command::OWNER_ID_HEADER, options.owner_id),
        (wow_core::command::SPACE_ID_HEADER, options.space_id),
    ] {
        if let Some(value) = value {
            message.header.insert(header.to_owned(), value);
        }
    }
    // SPEC OB-1: the request's trace context travels with the command.
    message.header.extend(options.trace);
    // A void command can be awaited only up to SENT (SPEC RQ-12), so that is its default; an
    // explicit later stage is still refused by the gateway.
    // A chained wait starts at SAGA_HANDLED; another stage named with a tail is refused.
    let stage = options.stage.unwrap_or(if info.kind == CommandKind::Void {
        CommandStage::Sent
    } else if options.wait_tail.is_some() {
        CommandStage::SagaHandled
    } else {
        CommandStage::Processed
    });
    let plan = WaitPlan::new(stage).with_timeout(options.timeout);
    let plan = match options.wait_function {
        Some(function) => plan.for_wait_function(function),
        None => plan,
    };
    let plan = match options.wait_tail {
        Some(tail) => plan.with_tail(tail),
        None => plan,
    };
    (message, plan)
}
