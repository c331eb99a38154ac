//! What a saga sends through, for one event: request ids derived from the event, typed sends.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{saga_request_id, StepError};
use wow_contracts::command::JsonCommand;
use wow_contracts::deadline::DeadlineStore;
use wow_contracts::event::ConsumerError;
use wow_model::aggregate::{
    Aggregate, AggregateScope, DecodeDomainError, DELETE_AGGREGATE, RECOVER_AGGREGATE,
};
use wow_model::aggregate_id::AggregateId;
use wow_model::command::CommandResultError;
use wow_model::command::{CommandBody, CommandKind, OWNER_ID_HEADER, SPACE_ID_HEADER};
use wow_model::command::{CommandMessage, CommandResult};
use wow_model::deadline::{check_deadline_name, ScheduledCommand};
use wow_model::error_code::ErrorCode;

/// An aggregate a saga sends typed commands to: one whose rejections decode into its own
/// error type ([`StepError::Rejected`]). Every [`Aggregate`] whose error derives
/// `DomainError` is one.
pub trait SagaTarget: Aggregate<Error: DecodeDomainError> {}

impl<A> SagaTarget for A
where
    A: Aggregate,
    A::Error: DecodeDomainError,
{
}

/// `Ok` when `target` is an aggregate of type `A`; otherwise [`StepError::NotSent`]
/// (`IllegalArgument`), `what` (a command, or a built-in command's name) not sent.
fn addressed_to<A: SagaTarget>(
    target: &AggregateId,
    what: &str,
) -> Result<(), StepError<A::Error>> {
    if target.context_name == A::CONTEXT_NAME && target.aggregate_name == A::AGGREGATE_NAME {
        return Ok(());
    }
    Err(StepError::NotSent {
        code: ErrorCode::IllegalArgument,
        message: format!(
            "{what} of {}.{} cannot go to {target}",
            A::CONTEXT_NAME,
            A::AGGREGATE_NAME
        ),
    })
}

/// Where a [`SagaContext`] sends a command once its request id is derived: the gateway in
/// a running service (`wow-runtime` implements it for its `CommandGateway`), a scripted
/// replier in a [`SagaSpec`](super::SagaSpec). The seam sits
/// below the request id derivation and the duplicate rule of [`SagaContext::send`], so a spec
/// runs exactly the code a service runs, up to the gateway.
#[async_trait]
pub trait SagaSender: Send + Sync + std::fmt::Debug {
    /// Sends `command` and waits until it is processed: its result, or why it failed.
    async fn process(&self, command: JsonCommand) -> Result<CommandResult, CommandResultError>;
}

/// Every command a saga sent for one stream, as the `SAGA_HANDLED` signal reports them. It
/// outlives the saga's run, so the commands sent before a failure or a panic are reported.
#[derive(Debug, Default)]
pub struct SentLog(Mutex<Vec<Value>>);

impl SentLog {
    fn push(&self, entry: Value) -> usize {
        let mut sent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        sent.push(entry);
        sent.len() - 1
    }

    fn set_code(&self, at: usize, code: &ErrorCode) {
        let mut sent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(Value::Object(entry)) = sent.get_mut(at) {
            entry.insert("errorCode".to_owned(), Value::String(code.to_string()));
        }
    }

    /// The commands sent, in order, each with the code it was answered with.
    pub fn into_inner(self) -> Vec<Value> {
        self.0.into_inner().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a saga sends through, for one event: every command gets the next request id derived
/// from the event ([`saga_request_id`]).
#[derive(Debug)]
pub struct SagaContext<'a> {
    sender: &'a dyn SagaSender,
    event_id: &'a str,
    log: &'a SentLog,
    next: AtomicUsize,
    link: &'a [(String, String)],
    deadlines: Option<&'a dyn DeadlineStore>,
    source: Option<(&'a AggregateId, &'a str)>,
    held_to: Option<&'a AggregateScope>,
}

impl<'a> SagaContext<'a> {
    pub(crate) fn new(sender: &'a dyn SagaSender, event_id: &'a str, log: &'a SentLog) -> Self {
        Self {
            sender,
            event_id,
            log,
            next: AtomicUsize::new(0),
            link: &[],
            deadlines: None,
            source: None,
            held_to: None,
        }
    }

    /// Every command sent names `scope`'s owner and space (SPEC TN-2); `None`: the saga acts
    /// across owners.
    pub(crate) fn held_to(mut self, scope: Option<&'a AggregateScope>) -> Self {
        self.held_to = scope;
        self
    }

    /// The owner and space every command sent is held to: those of the aggregate whose
    /// event the saga reacts to (an empty owner or space: none). `None` when the saga acts
    /// across owners ([`Saga::acts_across_owners`](super::Saga::acts_across_owners)).
    pub fn held_to_scope(&self) -> Option<&AggregateScope> {
        self.held_to
    }

    /// Schedules into `deadlines`, as the saga `saga` reacting to a stream of `source`.
    pub(crate) fn with_deadlines(
        mut self,
        deadlines: Option<&'a dyn DeadlineStore>,
        source: &'a AggregateId,
        saga: &'a str,
    ) -> Self {
        self.deadlines = deadlines;
        self.source = Some((source, saga));
        self
    }

    /// Schedules `command` for the aggregate `target` of type `A` at `due_at` (milliseconds
    /// since the Unix epoch), as the deadline `name` of this saga for the aggregate whose
    /// event it reacts to (SPEC DM-2): the scheduler sends it when due, with the next request
    /// id derived from the event, so a redelivered event schedules the same row again and
    /// the command takes effect once. A later event of the same aggregate cancels it with
    /// [`cancel_scheduled`](Self::cancel_scheduled), an event of another aggregate with
    /// [`cancel_scheduled_for`](Self::cancel_scheduled_for), and every aggregate's of the
    /// name at once with [`cancel_all_scheduled`](Self::cancel_all_scheduled).
    ///
    /// Fails (the saga's stage fails and is retried) when the store cannot keep it, when
    /// `name` is not a deadline name, or when the command does not encode.
    pub async fn schedule<A: Aggregate>(
        &self,
        name: &str,
        due_at: i64,
        target: AggregateId,
        command: A::Command,
    ) -> Result<(), ConsumerError> {
        let (deadlines, (source, saga)) = self.scheduling()?;
        let name = format!("{saga}/{name}");
        check_deadline_name(&name)
            .map_err(|why| ConsumerError::new(ErrorCode::IllegalArgument, why))?;
        if target.tenant_id != source.tenant_id {
            return Err(ConsumerError::new(
                ErrorCode::IllegalArgument,
                format!("deadline `{name}` sends to another tenant"),
            ));
        }
        let body = command.to_body().map_err(|error| {
            ConsumerError::new(
                ErrorCode::InternalServerError,
                format!("the command does not encode: {error}"),
            )
        })?;
        // SPEC DM-6: only a command declared #[command(deadline)] can be scheduled.
        let declared = A::Command::COMMANDS
            .iter()
            .any(|info| info.name == command.command_name() && info.deadline);
        if !declared {
            return Err(ConsumerError::new(
                ErrorCode::IllegalArgument,
                format!(
                    "deadline `{name}` fires command `{}` of `{}`, which is not declared #[command(deadline)]",
                    command.command_name(),
                    A::AGGREGATE_NAME
                ),
            ));
        }
        let index = self.next.fetch_add(1, Ordering::SeqCst);
        let row = ScheduledCommand {
            owner: source.clone(),
            name,
            due_at,
            target,
            command: command.command_name().to_owned(),
            body,
            request_id: saga_request_id(self.event_id, index),
            held_to: self.held_to.cloned(),
        };
        deadlines
            .schedule(&row)
            .await
            .map_err(|error| ConsumerError::new(error.error_code(), error.to_string()))
    }

    /// Cancels this saga's deadline `name` for the aggregate whose event it reacts to:
    /// `true` when one was pending.
    pub async fn cancel_scheduled(&self, name: &str) -> Result<bool, ConsumerError> {
        let (deadlines, (source, saga)) = self.scheduling()?;
        deadlines
            .cancel(source, &format!("{saga}/{name}"))
            .await
            .map_err(|error| ConsumerError::new(error.error_code(), error.to_string()))
    }

    /// Cancels this saga's deadline `name` for `owner`, an aggregate of the tenant of the
    /// event it reacts to: a deadline the saga scheduled from another aggregate's event, as
    /// when a payment's event cancels the order's expiry. `true` when one was pending.
    ///
    /// Fails with `IllegalArgument` when `owner` is in another tenant (nothing is cancelled).
    pub async fn cancel_scheduled_for(
        &self,
        owner: &AggregateId,
        name: &str,
    ) -> Result<bool, ConsumerError> {
        let (deadlines, (source, saga)) = self.scheduling()?;
        if owner.tenant_id != source.tenant_id {
            return Err(ConsumerError::new(
                ErrorCode::IllegalArgument,
                format!("deadline `{saga}/{name}` belongs to another tenant"),
            ));
        }
        deadlines
            .cancel(owner, &format!("{saga}/{name}"))
            .await
            .map_err(|error| ConsumerError::new(error.error_code(), error.to_string()))
    }

    /// Cancels this saga's deadline `name` of every aggregate in the tenant of the event it
    /// reacts to (Axon's `cancelAll`): how many were pending. Another saga's deadlines of the
    /// same name, an aggregate's own, and other tenants' stay. A redelivered event cancels
    /// nothing more.
    pub async fn cancel_all_scheduled(&self, name: &str) -> Result<u64, ConsumerError> {
        let (deadlines, (source, saga)) = self.scheduling()?;
        deadlines
            .cancel_named(&source.tenant_id, &format!("{saga}/{name}"))
            .await
            .map_err(|error| ConsumerError::new(error.error_code(), error.to_string()))
    }

    fn scheduling(
        &self,
    ) -> Result<(&'a dyn DeadlineStore, (&'a AggregateId, &'a str)), ConsumerError> {
        match (self.deadlines, self.source) {
            (Some(deadlines), Some(source)) => Ok((deadlines, source)),
            _ => Err(ConsumerError::new(
                ErrorCode::ServiceUnavailable,
                "this saga runs without a deadline store",
            )),
        }
    }

    /// Every command sent carries `link` in its header (a chained wait's link).
    pub(crate) fn with_link(mut self, link: &'a [(String, String)]) -> Self {
        self.link = link;
        self
    }

    /// The id of the event the saga is reacting to (the request ids derive from it).
    pub fn event_id(&self) -> &str {
        self.event_id
    }

    /// Sends the typed `command` to the aggregate `aggregate_id` of type `A`, with the next
    /// derived request id, and waits until it is processed; see
    /// [`SagaContext::send_message`].
    pub async fn send_to<A: SagaTarget>(
        &self,
        aggregate_id: wow_model::aggregate_id::AggregateId,
        command: A::Command,
    ) -> Result<CommandResult, StepError<A::Error>> {
        self.send_message::<A>(CommandMessage::of(aggregate_id, command))
            .await
    }

    /// Sends `message`, a typed command of the aggregate `A` (its id and headers as the saga
    /// set them), with the next derived request id, and waits until it is processed.
    ///
    /// A rejection by one of `A`'s rules comes back as [`StepError::Rejected`] with the
    /// error's kind (and the whole error when the result carries its fields); a missing
    /// target as [`StepError::NotFound`]; any other failure as it came. A message for an
    /// aggregate of another type, or one that does not encode, is not sent
    /// ([`StepError::NotSent`]) and takes no request id.
    pub async fn send_message<A: SagaTarget>(
        &self,
        message: CommandMessage<A::Command>,
    ) -> Result<CommandResult, StepError<A::Error>> {
        addressed_to::<A>(&message.aggregate_id, "a command")?;
        let command = message.into_json().map_err(|error| StepError::NotSent {
            code: ErrorCode::InternalServerError,
            message: format!("the command does not encode: {error}"),
        })?;
        self.send(command).await.map_err(StepError::of)
    }

    /// Deletes the aggregate `aggregate_id` of type `A` softly (Wow's `DELETE`, SPEC DM-6),
    /// with the next derived request id, and waits until it is processed. A saga may delete
    /// under every [`Lifecycle`](wow_model::aggregate::Lifecycle) but `Disabled`
    /// (`LifecycleDisabled`); an aggregate already deleted answers
    /// `IllegalAccessDeletedAggregate`. Fails as [`send_message`](Self::send_message) does.
    pub async fn delete<A: SagaTarget>(
        &self,
        aggregate_id: AggregateId,
    ) -> Result<CommandResult, StepError<A::Error>> {
        self.send_built_in::<A>(aggregate_id, DELETE_AGGREGATE)
            .await
    }

    /// Recovers the deleted aggregate `aggregate_id` of type `A` (Wow's recover, SPEC DM-6),
    /// with the next derived request id, and waits until it is processed: its keys are
    /// claimed again (`DuplicateKey` when another aggregate took one meanwhile) and its
    /// deadlines scheduled again. One that is not deleted answers `IllegalState`.
    pub async fn recover<A: SagaTarget>(
        &self,
        aggregate_id: AggregateId,
    ) -> Result<CommandResult, StepError<A::Error>> {
        self.send_built_in::<A>(aggregate_id, RECOVER_AGGREGATE)
            .await
    }

    async fn send_built_in<A: SagaTarget>(
        &self,
        aggregate_id: AggregateId,
        name: &'static str,
    ) -> Result<CommandResult, StepError<A::Error>> {
        addressed_to::<A>(&aggregate_id, name)?;
        let command = CommandMessage::new(aggregate_id, name, CommandKind::Normal, json!({}));
        self.send(command).await.map_err(StepError::of)
    }

    /// Sends the untyped `command` with the next request id derived from the event, and waits
    /// until it is processed. Prefer [`SagaContext::send_to`], whose rejections are typed.
    ///
    /// Unless the saga acts across owners, the command names the owner and space of the
    /// aggregate whose event the saga reacts to, in place of any the saga put in its header
    /// (SPEC TN-2): one for an aggregate of another owner or space is refused
    /// (`IllegalAccessOwnerAggregate` / `IllegalAccessSpaceAggregate`). Where that aggregate
    /// records no owner (or no space) the command keeps what the saga named, if anything.
    ///
    /// A `DuplicateRequestId` answer means a delivery of this event before already sent it:
    /// it is returned as `Ok`, with that code and the original version, because the intent is
    /// done. Any other failure is returned as it came.
    pub async fn send(
        &self,
        mut command: JsonCommand,
    ) -> Result<CommandResult, CommandResultError> {
        let index = self.next.fetch_add(1, Ordering::SeqCst);
        command.request_id = saga_request_id(self.event_id, index);
        command.header.extend(self.link.iter().cloned());
        if let Some(scope) = self.held_to {
            for (header, value) in [
                (OWNER_ID_HEADER, &scope.owner_id),
                (SPACE_ID_HEADER, &scope.space_id),
            ] {
                if !value.is_empty() {
                    command.header.insert(header.to_owned(), value.clone());
                }
            }
        }
        let at = self.log.push(json!({
            "aggregateName": command.aggregate_id.aggregate_name,
            "aggregateId": command.aggregate_id.id,
            "command": command.name,
            "requestId": command.request_id,
            "commandId": command.id,
        }));
        let outcome = self.sender.process(command).await;
        let code = match &outcome {
            Ok(result) => &result.error_code,
            Err(error) => error.error_code(),
        };
        self.log.set_code(at, code);
        match outcome {
            Err(CommandResultError::Failed(result))
                if result.error_code == ErrorCode::DuplicateRequestId =>
            {
                Ok(*result)
            }
            other => other,
        }
    }
}
