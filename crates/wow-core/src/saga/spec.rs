//! A given → when → expect test kit for sagas, like Wow's `SagaSpec`: given an appended
//! stream, script what each command the saga sends answers, and expect the commands it sent.
//!
//! The saga runs through the real [`SagaContext`]: request ids are derived from the event
//! exactly as in a running service (SPEC DS-3, [`saga_request_id`](crate::saga::saga_request_id)),
//! and a `DuplicateRequestId` answer counts as done, as it does there. Only the gateway is
//! replaced, by the replier the test scripts; no store, bus or runtime task is involved, and
//! nothing outlives the spec.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{DynSaga, Saga, SagaDelivery, SagaSender, SentLog, REJECTION_DETAIL};
use wow_contracts::command::JsonCommand;
use wow_contracts::deadline::DeadlineStore;
use wow_contracts::event::ConsumerError;
use wow_model::aggregate::{Aggregate, DomainError};
use wow_model::aggregate_id::{AggregateId, DEFAULT_TENANT_ID};
use wow_model::command::{BodyDecodeError, CommandBody, CommandResultError};
use wow_model::command::{CommandResult, CommandStage};
use wow_model::command::{OWNER_ID_HEADER, SPACE_ID_HEADER};
use wow_model::deadline::ScheduledCommand;
use wow_model::error_code::ErrorCode;
use wow_model::event::{DomainEvent, DomainEventStream};

/// The start of a saga spec: which saga, and the fixture identity of a stream built from
/// typed events, before anything is given.
///
/// ```
/// # use wow_core::testing_example::{Add, Added, Counter, CounterCommand, CounterEvent, CounterErrorKind};
/// use async_trait::async_trait;
/// use wow_core::event::ConsumerError;
/// use wow_core::saga::{saga_request_id, Saga, SagaContext, SagaReply, SagaSpec, StepError};
/// use wow_core::{DomainEventStream, ErrorCode};
///
/// /// Adds every addition to the counter `mirror` too, unless it would overflow there.
/// #[derive(Debug)]
/// struct Mirror;
///
/// #[async_trait]
/// impl Saga for Mirror {
///     type Aggregate = Counter;
///
///     fn name(&self) -> &str {
///         "mirror"
///     }
///
///     async fn on_event(
///         &self,
///         event: &CounterEvent,
///         stream: &DomainEventStream,
///         ctx: &SagaContext<'_>,
///     ) -> Result<(), ConsumerError> {
///         let CounterEvent::Added(Added { by }) = event else {
///             return Ok(());
///         };
///         let mut mirror = stream.aggregate_id.clone();
///         mirror.id = "mirror".into();
///         match ctx.send_to::<Counter>(mirror, CounterCommand::Add(Add { by: *by })).await {
///             Ok(_) | Err(StepError::Rejected { kind: CounterErrorKind::Overflow, .. }) => Ok(()),
///             Err(other) => Err(other.into()),
///         }
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let given = SagaSpec::new(Mirror)
///     .with_tenant("tenant-a")
///     .given([CounterEvent::Added(Added { by: 2 })]);
/// let event_id = given.stream().body[0].id.clone();
/// let expect = given.when_all_succeed().await.expect_ok();
/// let add = expect.expect_command(0);
/// assert_eq!((add.aggregate_id.id.as_str(), add.aggregate_id.tenant_id.as_str()), ("mirror", "tenant-a"));
/// assert_eq!(add.name, "add");
/// assert_eq!(add.request_id, saga_request_id(&event_id, 0));
///
/// // A step the target rejects for a reason the saga does not handle fails the saga with
/// // the target's code.
/// SagaSpec::new(Mirror)
///     .given([CounterEvent::Added(Added { by: 2 })])
///     .when_replying(|_| SagaReply::Rejected(ErrorCode::NotFound))
///     .await
///     .expect_failure(ErrorCode::NotFound)
///     .expect_command_names(&["add"]);
/// # }
/// ```
#[derive(Debug)]
pub struct SagaSpec<S: Saga> {
    saga: S,
    id: String,
    tenant: String,
    version: u64,
    header: BTreeMap<String, String>,
}

impl<S: Saga> SagaSpec<S> {
    /// A spec of `saga`. A stream built by [`SagaSpec::given`] belongs to the aggregate
    /// `spec-aggregate` of the default tenant, at version 1, unless the `with_*` setters say
    /// otherwise.
    pub fn new(saga: S) -> Self {
        Self {
            saga,
            id: "spec-aggregate".to_owned(),
            tenant: DEFAULT_TENANT_ID.to_owned(),
            version: 1,
            header: BTreeMap::new(),
        }
    }

    /// The aggregate a built stream belongs to records `owner` as its owner (SPEC TN-2):
    /// unless the saga acts across owners, every command it sends names that owner
    /// ([`SentCommand::owner_id`]). Default: none.
    pub fn with_owner(mut self, owner: impl Into<String>) -> Self {
        self.header.insert(OWNER_ID_HEADER.to_owned(), owner.into());
        self
    }

    /// The aggregate a built stream belongs to records `space` as its space (SPEC TN-2), as
    /// [`SagaSpec::with_owner`] does for the owner. Default: none.
    pub fn with_space(mut self, space: impl Into<String>) -> Self {
        self.header.insert(SPACE_ID_HEADER.to_owned(), space.into());
        self
    }

    /// Uses `id` as the id of the aggregate a built stream belongs to (default
    /// `spec-aggregate`).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Uses `tenant` as the tenant of the aggregate a built stream belongs to (default
    /// [`DEFAULT_TENANT_ID`]).
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = tenant.into();
        self
    }

    /// Uses `version` as the version of a built stream (default 1, the create). Panics on 0:
    /// no stream is at version 0.
    #[track_caller]
    pub fn with_version(mut self, version: u64) -> Self {
        assert!(version > 0, "a stream's version is at least 1");
        self.version = version;
        self
    }

    /// The saga will run on `stream`, exactly as given (its ids decide the request ids).
    pub fn given_stream(self, stream: DomainEventStream) -> SagaGiven<S> {
        SagaGiven {
            saga: self.saga,
            stream,
            pending: Vec::new(),
        }
    }

    /// The saga will run on one stream of its aggregate's `events`, in order, with fixed
    /// ids: the stream `spec-stream-<version>` and the events `spec-event-<version>-<index>`,
    /// so building the same spec twice gives the same stream, and the same request ids.
    /// Panics if `events` is empty (a stream is never empty) or an event does not encode.
    #[track_caller]
    pub fn given(
        self,
        events: impl IntoIterator<Item = <S::Aggregate as Aggregate>::Event>,
    ) -> SagaGiven<S> {
        self.given_of::<S::Aggregate>(events)
    }

    /// As [`SagaSpec::given`], with a stream of the aggregate `A`, which may be another
    /// aggregate than the saga's (the saga then skips it).
    #[track_caller]
    pub fn given_of<A: Aggregate>(
        mut self,
        events: impl IntoIterator<Item = A::Event>,
    ) -> SagaGiven<S> {
        let version = self.version;
        let body: Vec<DomainEvent> = events
            .into_iter()
            .enumerate()
            .map(|(index, event)| match DomainEvent::of(&event) {
                Ok(stored) => DomainEvent {
                    id: format!("spec-event-{version}-{index}"),
                    ..stored
                },
                Err(error) => panic!("event {event:?} does not encode to JSON: {error}"),
            })
            .collect();
        assert!(!body.is_empty(), "a stream holds at least one event");
        let stream = DomainEventStream {
            id: format!("spec-stream-{version}"),
            request_id: format!("spec-request-{version}"),
            command_id: format!("spec-command-{version}"),
            aggregate_id: A::named_aggregate().aggregate_id(self.id.clone(), self.tenant.clone()),
            version,
            create_time: 0,
            fingerprint: String::new(),
            header: std::mem::take(&mut self.header),
            body,
        };
        self.given_stream(stream)
    }
}

/// A saga spec with its stream given; next comes how the commands it sends are answered.
#[derive(Debug)]
pub struct SagaGiven<S: Saga> {
    saga: S,
    stream: DomainEventStream,
    pending: Vec<ScheduledCommand>,
}

impl<S: Saga> SagaGiven<S> {
    /// Deadlines pending before the stream arrives, as earlier events of this or other
    /// aggregates left them (name them `{saga}/{name}`, as the saga's own are): what the saga
    /// cancels of them shows in [`SagaExpect::expect_cancelled`].
    pub fn with_scheduled(mut self, rows: impl IntoIterator<Item = ScheduledCommand>) -> Self {
        self.pending.extend(rows);
        self
    }

    /// The stream the saga will run on (read its event ids to compute expected request ids).
    pub fn stream(&self) -> &DomainEventStream {
        &self.stream
    }

    /// Runs the saga on the stream exactly as the dispatcher does ([`DynSaga::run_stream`]): a
    /// stream of another aggregate is skipped, the stream is decoded once, and the saga runs
    /// with one [`SagaContext`](super::SagaContext) per event, stopping at the first event it fails on. Each command
    /// it sends is recorded and answered by `replier`, called once per command in the order
    /// they are sent.
    ///
    /// A panic in the saga or the replier propagates to the test.
    pub async fn when_replying<F>(self, replier: F) -> SagaExpect
    where
        F: FnMut(&SentCommand) -> SagaReply + Send,
    {
        let sender = Scripted {
            replier: Mutex::new(replier),
            sent: Mutex::new(Vec::new()),
        };
        let log = SentLog::default();
        let deadlines = wow_contracts::eventsourcing::InMemoryEventStore::new();
        for row in &self.pending {
            if let Err(error) = deadlines.schedule(row).await {
                panic!("a given deadline cannot be pending: {error}");
            }
        }
        let delivery = SagaDelivery::new(&sender, &log).with_deadlines(&deadlines);
        let outcome = DynSaga::run_stream(&self.saga, &self.stream, delivery).await;
        let now_pending = deadlines
            .due(i64::MAX, usize::MAX)
            .await
            .unwrap_or_default();
        let (kept, scheduled): (Vec<_>, Vec<_>) = now_pending
            .into_iter()
            .partition(|row| self.pending.contains(row));
        let cancelled = self
            .pending
            .into_iter()
            .filter(|row| !kept.contains(row) && !scheduled.iter().any(|new| same_row(new, row)))
            .collect();
        SagaExpect {
            sent: sender.sent.into_inner().unwrap_or_else(|p| p.into_inner()),
            stream: self.stream,
            outcome,
            scheduled,
            cancelled,
        }
    }

    /// Runs the saga as [`SagaGiven::when_replying`] does, every command succeeding.
    pub async fn when_all_succeed(self) -> SagaExpect {
        self.when_replying(|_| SagaReply::Succeeded).await
    }
}

/// Whether `a` and `b` are the same row: one owner, one name.
fn same_row(a: &ScheduledCommand, b: &ScheduledCommand) -> bool {
    a.owner == b.owner && a.name == b.name
}

/// How a scripted command answers the saga that sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SagaReply {
    /// The command was processed: the saga gets a successful `PROCESSED` result.
    Succeeded,
    /// The command was rejected with this code (`NotFound`, a domain code, ...): the saga
    /// gets [`CommandResultError::Failed`] at `PROCESSED`. `DuplicateRequestId` reaches the
    /// saga as success, as in a service (an earlier delivery already sent it). Panics when
    /// the code is `Ok`, which is no rejection.
    Rejected(ErrorCode),
    /// The command was rejected by the target's domain error with this code and these
    /// fields (see [`SagaReply::rejected_by`]): the saga gets a `PROCESSED` failure carrying
    /// the fields under [`REJECTION_DETAIL`], so a
    /// [`StepError::Rejected`](super::StepError::Rejected) holds the whole error.
    RejectedWith {
        /// The error's code.
        code: ErrorCode,
        /// The error's fields.
        detail: Map<String, Value>,
    },
    /// The wait expired with the outcome unknown: the saga gets
    /// [`CommandResultError::Timeout`] with `RequestTimeout`.
    TimedOut,
}

impl SagaReply {
    /// A rejection by the target aggregate's own `error`, fields included, so a test names
    /// the typed error rather than its code string. Use [`SagaReply::Rejected`] with the
    /// error's code to answer as a replayed rejection does (code and message only).
    pub fn rejected_by(error: &impl DomainError) -> Self {
        Self::RejectedWith {
            code: error.error_code(),
            detail: error.detail(),
        }
    }

    fn answer(self, command: &JsonCommand) -> Result<CommandResult, CommandResultError> {
        match self {
            SagaReply::Succeeded => Ok(CommandResult::success(command, CommandStage::Processed)),
            SagaReply::Rejected(code) => Err(rejection(command, code, None)),
            SagaReply::RejectedWith { code, detail } => Err(rejection(command, code, Some(detail))),
            SagaReply::TimedOut => {
                let result = CommandResult::failure(
                    command,
                    CommandStage::Sent,
                    ErrorCode::RequestTimeout,
                    "timed out in the saga spec",
                );
                Err(CommandResultError::Timeout {
                    result: Box::new(result),
                    timeout: Duration::ZERO,
                })
            }
        }
    }
}

/// A `PROCESSED` failure of `command` with `code`, carrying `detail` when given. Panics when
/// the code is `Ok`, which is no rejection.
fn rejection(
    command: &JsonCommand,
    code: ErrorCode,
    detail: Option<Map<String, Value>>,
) -> CommandResultError {
    assert!(
        !code.is_ok(),
        "a rejection needs an error code other than Ok"
    );
    let mut result = CommandResult::failure(
        command,
        CommandStage::Processed,
        code,
        "rejected by the saga spec",
    );
    if let Some(detail) = detail {
        result = result.with_result(REJECTION_DETAIL, Value::Object(detail));
    }
    CommandResultError::Failed(Box::new(result))
}

/// One command a saga sent, as the gateway would have received it. Every field is
/// deterministic for a given stream and replies, so two runs compare equal.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SentCommand {
    /// The aggregate it is for, with its tenant.
    pub aggregate_id: AggregateId,
    /// The command's name.
    pub name: String,
    /// The command's JSON body.
    pub body: Value,
    /// The request id the saga context derived from the event (SPEC DS-3).
    pub request_id: String,
    /// The command's header as the gateway would receive it: the owner and space it is held
    /// to (SPEC TN-2), and what the saga put there.
    pub header: BTreeMap<String, String>,
}

impl SentCommand {
    /// The owner the command names (SPEC TN-2): the one of the aggregate whose event the saga
    /// reacted to, unless the saga acts across owners; `None` when it names none.
    pub fn owner_id(&self) -> Option<&str> {
        self.header.get(OWNER_ID_HEADER).map(String::as_str)
    }

    /// The space the command names (SPEC TN-2), as [`SentCommand::owner_id`] the owner.
    pub fn space_id(&self) -> Option<&str> {
        self.header.get(SPACE_ID_HEADER).map(String::as_str)
    }

    /// The typed command, decoded from its name and body as the target aggregate would.
    pub fn decode<C: CommandBody>(&self) -> Result<C, BodyDecodeError> {
        C::from_body(&self.name, &self.body)
    }
}

/// The gateway of a spec: records each command and answers it from the script.
struct Scripted<F> {
    replier: Mutex<F>,
    sent: Mutex<Vec<SentCommand>>,
}

impl<F> fmt::Debug for Scripted<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scripted").finish_non_exhaustive()
    }
}

#[async_trait]
impl<F> SagaSender for Scripted<F>
where
    F: FnMut(&SentCommand) -> SagaReply + Send,
{
    async fn process(&self, command: JsonCommand) -> Result<CommandResult, CommandResultError> {
        let sent = SentCommand {
            aggregate_id: command.aggregate_id.clone(),
            name: command.name.clone(),
            body: command.body.clone(),
            request_id: command.request_id.clone(),
            header: command.header.clone(),
        };
        let reply = {
            let mut replier = self.replier.lock().unwrap_or_else(|p| p.into_inner());
            (*replier)(&sent)
        };
        self.sent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(sent);
        reply.answer(&command)
    }
}

/// What the saga did: the commands it sent and how it ended. Each `expect_*` that checks
/// returns the spec for more; [`SagaExpect::expect_commands`] and
/// [`SagaExpect::expect_command`] hand the commands over for the test's own assertions.
#[derive(Debug)]
pub struct SagaExpect {
    stream: DomainEventStream,
    sent: Vec<SentCommand>,
    outcome: Result<(), ConsumerError>,
    scheduled: Vec<ScheduledCommand>,
    cancelled: Vec<ScheduledCommand>,
}

impl SagaExpect {
    /// Every command the saga sent, in the order sent (up to and including the one it
    /// failed on, if it failed).
    pub fn expect_commands(&self) -> &[SentCommand] {
        &self.sent
    }

    /// The `index`-th command sent (from 0); panics if the saga sent fewer.
    #[track_caller]
    pub fn expect_command(&self, index: usize) -> &SentCommand {
        match self.sent.get(index) {
            Some(command) => command,
            None => panic!(
                "expected a command at index {index}, but the saga sent {}: {:?}",
                self.sent.len(),
                self.names()
            ),
        }
    }

    /// The deadlines the saga scheduled (SPEC DM-2), earliest first, each named
    /// `{saga}/{name}` and owned by the aggregate whose event it reacted to. A row given by
    /// [`SagaGiven::with_scheduled`] shows here only when the saga scheduled it anew.
    pub fn expect_scheduled(&self) -> &[ScheduledCommand] {
        &self.scheduled
    }

    /// The deadlines given by [`SagaGiven::with_scheduled`] that the saga cancelled, in the
    /// order given (SPEC DM-2): by [`SagaContext::cancel_scheduled`](super::SagaContext::cancel_scheduled),
    /// [`cancel_scheduled_for`](super::SagaContext::cancel_scheduled_for) or
    /// [`cancel_all_scheduled`](super::SagaContext::cancel_all_scheduled).
    pub fn expect_cancelled(&self) -> &[ScheduledCommand] {
        &self.cancelled
    }

    /// Expects the saga to have sent nothing.
    #[track_caller]
    pub fn expect_no_commands(self) -> Self {
        assert!(
            self.sent.is_empty(),
            "expected no commands, the saga sent {:?}",
            self.sent
        );
        self
    }

    /// Expects exactly these commands, by name, in order.
    #[track_caller]
    pub fn expect_command_names(self, names: &[&str]) -> Self {
        assert_eq!(self.names(), names, "the saga sent other commands");
        self
    }

    /// Expects the saga to have handled every event of the stream.
    #[track_caller]
    pub fn expect_ok(self) -> Self {
        if let Err(error) = &self.outcome {
            panic!("expected the saga to succeed, it failed with {error}");
        }
        self
    }

    /// Expects the saga to have failed with `code` (its stage fails, and a compensation
    /// record would retry it).
    #[track_caller]
    pub fn expect_failure(self, code: ErrorCode) -> Self {
        match &self.outcome {
            Ok(()) => panic!("expected the saga to fail with {code}, it succeeded"),
            Err(error) => assert_eq!(error.code, code, "the saga failed otherwise: {error}"),
        }
        self
    }

    /// The saga's failure, if it failed.
    pub fn error(&self) -> Option<&ConsumerError> {
        self.outcome.as_ref().err()
    }

    /// The stream the saga ran on.
    pub fn stream(&self) -> &DomainEventStream {
        &self.stream
    }

    fn names(&self) -> Vec<&str> {
        self.sent.iter().map(|c| c.name.as_str()).collect()
    }
}
