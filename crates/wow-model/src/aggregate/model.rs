//! The trait a team implements once per aggregate.

use std::fmt::Debug;

use serde::{de::DeserializeOwned, Serialize};
use serde_json::{Map, Value};

use crate::aggregate::{AggregateReads, Lifecycle, Read};
use crate::aggregate_id::{AggregateId, NamedAggregate};
use crate::command::{CommandBody, EventBody};
use crate::deadline::Deadline;
use crate::error_code::ErrorCode;
use crate::event::Upcasters;
use crate::services::{Refusal, ServiceFailure, ServiceNeed, Services};
use crate::unique_key::UniqueKey;
use std::time::Instant;

/// A business-rule rejection of a domain, with its own error code.
///
/// Derive it with `#[derive(DomainError)]` next to `thiserror::Error`: each variant's code is
/// its name. Rejections are the domain's answer, not a fault: HTTP reports them as 422.
pub trait DomainError: std::error::Error + Send + Sync + 'static {
    /// The code a result reports for this rejection.
    fn error_code(&self) -> ErrorCode;

    /// This error's fields as a JSON object, keyed by field name (by index for a tuple
    /// variant); empty for a unit variant, and by default. What
    /// [`DecodeDomainError::decode`] reads back.
    fn detail(&self) -> Map<String, Value> {
        Map::new()
    }
}

impl DomainError for std::convert::Infallible {
    fn error_code(&self) -> ErrorCode {
        match *self {}
    }
}

/// A [`DomainError`] told back from a rejection, so that a saga whose step was rejected
/// matches the target's own error type rather than a code string. `#[derive(DomainError)]`
/// implements it, and writes the kind enum: for `AccountError`, `AccountErrorKind`, one
/// fieldless variant per error variant, with the same visibility. Two variants may not share
/// a code, and every field must be `Serialize + DeserializeOwned`.
///
/// A rejection is told back in two ways:
///
/// - its **kind**, from the error code alone ([`DecodeDomainError::kind_of`]): always
///   possible, on a first answer and on a replayed one (SPEC ID-6 records only the code and
///   message of a rejection), so it is what a saga decides on;
/// - the **whole error**, fields included ([`DecodeDomainError::decode`]), from the code and
///   the fields [`DomainError::detail`] wrote, when the result carries them (under the
///   result key [`REJECTION_DETAIL`](crate::command::REJECTION_DETAIL)).
///
/// ```
/// use wow_core::aggregate::DecodeDomainError;
/// use wow_core::DomainError;
///
/// #[derive(Debug, PartialEq, thiserror::Error, DomainError)]
/// enum StockError {
///     #[error("only {left} left")]
///     TooFew { left: u32 },
///     #[error("discontinued")]
///     Discontinued,
/// }
///
/// let error = StockError::TooFew { left: 2 };
/// let code = error.error_code();
/// assert_eq!(StockError::kind_of(&code), Some(StockErrorKind::TooFew));
/// assert_eq!(StockError::decode(&code, &error.detail()), Some(error));
/// ```
pub trait DecodeDomainError: DomainError + Sized {
    /// One fieldless value per variant.
    type Kind: Copy + Eq + std::hash::Hash + Debug + Send + Sync + 'static;

    /// This error's kind.
    fn kind(&self) -> Self::Kind;

    /// The kind whose code is `code`; `None` when `code` is none of this error's codes.
    fn kind_of(code: &ErrorCode) -> Option<Self::Kind>;

    /// The error whose code is `code`, with the fields `detail` holds (as
    /// [`DomainError::detail`] wrote them). `None` when `code` is none of this error's
    /// codes, or a field is missing or does not decode: never a guess.
    fn decode(code: &ErrorCode, detail: &Map<String, Value>) -> Option<Self>;
}

impl DecodeDomainError for std::convert::Infallible {
    type Kind = std::convert::Infallible;

    fn kind(&self) -> Self::Kind {
        *self
    }

    fn kind_of(_: &ErrorCode) -> Option<Self::Kind> {
        None
    }

    fn decode(_: &ErrorCode, _: &Map<String, Value>) -> Option<Self> {
        None
    }
}

/// What a handler knows about the command it decides on, besides the state.
#[derive(Debug, Clone, Copy)]
pub struct CommandContext<'a> {
    /// The aggregate the command is for.
    pub aggregate_id: &'a AggregateId,
    /// The aggregate's current version (0 when it does not exist yet).
    pub version: u64,
    /// The command id of the message.
    pub command_id: &'a str,
    /// The caller's request id.
    pub request_id: &'a str,
    /// The time of the decision, in milliseconds since the Unix epoch, from the node's clock.
    pub now: i64,
    /// The services the node was assembled with (SPEC DM-3), for [`Aggregate::decide`].
    pub services: &'a Services,
    /// The latest moment the decision may take: service calls through
    /// [`call`](Self::call) end there. `None` in the test kit: no bound.
    pub deadline: Option<Instant>,
    /// What reads other aggregates for [`read`](Self::read) (SPEC DM-5); `None` where
    /// nothing can be read (every read is then a [`ServiceFailure`]).
    pub reads: Option<&'a AggregateReads<'a>>,
}

impl CommandContext<'_> {
    /// Whether the aggregate exists (has at least one stream).
    pub fn exists(&self) -> bool {
        self.version > 0
    }

    /// The service of type `T` the node was assembled with; a [`ServiceFailure`] naming the
    /// type when there is none (declare it in [`Aggregate::required_services`] and assembly
    /// refuses to start without it).
    pub fn service<T: Send + Sync + 'static>(&self) -> Result<&T, ServiceFailure> {
        self.services.get::<T>().ok_or_else(|| {
            ServiceFailure::new(
                std::any::type_name::<T>(),
                "no such service was given to this service",
            )
        })
    }

    /// Awaits `call`, a call to the service `service`, no longer than the command's own
    /// [`deadline`](Self::deadline): a call that errs or runs out of time is a
    /// [`ServiceFailure`], which a handler returns with `?` (not a decision: nothing is
    /// recorded, and the resend decides again).
    pub async fn call<T, E: std::fmt::Display>(
        &self,
        service: &str,
        call: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T, ServiceFailure> {
        crate::services::bounded(service, self.deadline, call).await
    }

    /// The current state of the aggregate `B` with id `id` in this command's tenant, read
    /// from the store (SPEC DM-5), **and a condition on this decision's append**: the events
    /// are recorded only while that aggregate is still at the version read, checked inside
    /// the append's atomic write. When it moved meanwhile, nothing is recorded and the
    /// command is decided again on fresh state (as for a version conflict, SPEC ES-3); a
    /// rejection or a decision with no events is answered as decided.
    ///
    /// `B` must be named in [`Aggregate::reads`] of the deciding aggregate; a read of
    /// another type, or a store that cannot answer, is a [`ServiceFailure`] (returned with
    /// `?`: nothing is recorded, and the resend decides again).
    ///
    /// ```ignore
    /// let room = ctx.read::<Room>(&hold.room).await?;
    /// if !room.is_live() {
    ///     return Err(Refusal::Rejected(BookingError::NoSuchRoom));
    /// }
    /// ```
    pub async fn read<B: Aggregate>(&self, id: &str) -> Result<Read<B::State>, ServiceFailure> {
        self.read_of::<B>(id, true).await
    }

    /// The current state of the aggregate `B` with id `id`, as [`read`](Self::read) reads
    /// it, but **without** a condition on the append: for what the decision may act on
    /// although it is already out of date (a display name copied into an event).
    pub async fn peek<B: Aggregate>(&self, id: &str) -> Result<Read<B::State>, ServiceFailure> {
        self.read_of::<B>(id, false).await
    }

    async fn read_of<B: Aggregate>(
        &self,
        id: &str,
        conditional: bool,
    ) -> Result<Read<B::State>, ServiceFailure> {
        let Some(reads) = self.reads else {
            return Err(ServiceFailure::new(
                B::AGGREGATE_NAME,
                "no other aggregate can be read here",
            ));
        };
        let aggregate_id =
            B::named_aggregate().aggregate_id(id, self.aggregate_id.tenant_id.as_str());
        let state = reads.read(&aggregate_id, conditional).await?;
        let typed = state.downcast_ref::<B::State>().cloned().ok_or_else(|| {
            ServiceFailure::new(
                B::AGGREGATE_NAME,
                "the store's aggregate of this name has another state type",
            )
        })?;
        Ok(Read {
            state: typed,
            version: state.version(),
            deleted: state.is_deleted(),
        })
    }
}

/// An aggregate: its name, its state, the commands it decides on and the events it records.
///
/// `handle` is a pure decision: state + command → events, or a typed rejection. `apply` folds
/// one event into the state and cannot fail; replaying an aggregate's history through `apply`
/// rebuilds its state.
///
/// Neither should panic, but a panic or an arithmetic overflow in either is contained (SPEC
/// PX-1): a panicking `handle` fails that one command with `InternalServerError` and records
/// nothing; a panicking `apply` quarantines the aggregate (see
/// `wow_core::aggregate::QuarantinedAggregates`). Use checked
/// arithmetic and a typed rejection for what input can provoke. An overflow panics only where
/// the crate is built with overflow checks: a release build needs `[profile.release]
/// overflow-checks = true` in the workspace's `Cargo.toml`, and the service refuses to start
/// without it (it measures the crate through the command enum,
/// [`CommandBody::crate_build`](crate::command::CommandBody::crate_build)).
///
/// ```
#[doc = include_str!("../../../wow-core/src/counter_example.rs")]
/// ```
pub trait Aggregate: Send + Sync + 'static {
    /// The bounded context the aggregate belongs to.
    const CONTEXT_NAME: &'static str;
    /// The aggregate's name, unique within a store (the first segment of its HTTP routes).
    const AGGREGATE_NAME: &'static str;

    /// The names this aggregate had before, oldest first: declare the old name here when you
    /// rename an aggregate, once. On start the service re-keys whatever the store still holds
    /// under an old name (history, request ids, rejections, snapshots, consumer positions,
    /// compensation records) to [`AGGREGATE_NAME`](Self::AGGREGATE_NAME), in one
    /// transaction, and commands that name an old name (an old client's route, a message
    /// from a node of the previous release) reach this aggregate. Default: none.
    const ALIASES: &'static [&'static str] = &[];

    /// Whether the store keeps an index for Wow's snapshot queries of this aggregate, where
    /// it has one (`ViewStore::declare_query_index`:
    /// PostgreSQL serves every equality test from a GIN index over the materialized
    /// snapshots). It costs each snapshot's write a little more. Default `false`.
    const QUERY_INDEX: bool = false;

    /// Who may delete and recover this aggregate (Wow's soft delete, SPEC DM-6):
    /// [`Lifecycle::Public`], the default, lets every caller that may send its commands;
    /// `Operator` only an operator's token over HTTP; `Internal` only sagas and in-process
    /// senders; `Disabled` no one (`LifecycleDisabled`). Sagas and in-process senders are
    /// never refused but by `Disabled`.
    ///
    /// Whoever sends them, a delete releases the aggregate's unique keys and cancels its
    /// deadlines, and a recover claims and schedules them again (see
    /// [`unique_keys`](Self::unique_keys) and [`deadlines`](Self::deadlines)).
    const LIFECYCLE: Lifecycle = Lifecycle::Public;

    /// The version of the state's shape, recorded with every snapshot. Raise it whenever
    /// `State` changes shape: a snapshot of another version is ignored and the state is
    /// rebuilt from history, never decoded into the wrong shape. Default 1.
    const STATE_VERSION: u32 = 1;

    /// The state the events fold into; `Default` is the state before the first event.
    type State: Default + Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The commands, one enum variant each (`#[derive(Command)]`).
    type Command: CommandBody + Clone + Debug;
    /// The events, one enum variant each (`#[derive(Event)]`).
    type Event: EventBody + Clone + Debug;
    /// The business-rule rejections (`#[derive(DomainError)]`), or `Infallible`.
    type Error: DomainError;

    /// Decides on `command` given the current `state`: the events to record, or a rejection.
    fn handle(
        state: &Self::State,
        command: Self::Command,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<Self::Event>, Self::Error>;

    /// Decides on `command` as [`handle`](Self::handle) does, and may first consult services
    /// (SPEC DM-3): a price, a currency rate. `ctx.service::<T>()` gives the service the node
    /// was assembled with, and `ctx.call(name, future)` bounds a call by the command's own
    /// deadline. Put what the service answered into the events: replaying history runs
    /// `apply` only and never calls a service. A [`ServiceFailure`] (returned with `?`) is a
    /// transient failure, not a decision: the command answers `ServiceFailed` (HTTP 503),
    /// nothing is recorded, and the resend with the same request id decides again.
    ///
    /// The default decides with `handle`. An aggregate that consults a service overrides it
    /// for the commands that need one and forwards the others to `handle`.
    fn decide(
        state: &Self::State,
        command: Self::Command,
        ctx: &CommandContext<'_>,
    ) -> impl std::future::Future<Output = Result<Vec<Self::Event>, Refusal<Self::Error>>> + Send
    {
        std::future::ready(Self::handle(state, command, ctx).map_err(Refusal::Rejected))
    }

    /// The services [`decide`](Self::decide) needs, by type: assembling a service that runs
    /// this aggregate without one of them is refused. Default: none.
    fn required_services() -> Vec<ServiceNeed> {
        Vec::new()
    }

    /// The other aggregate types [`decide`](Self::decide) reads with
    /// [`CommandContext::read`] (SPEC DM-5), e.g. `vec![Room::named_aggregate()]`. A service
    /// that runs this aggregate must run these too (assembly is refused otherwise), and
    /// their appends exclude a concurrent check of a condition on them (on PostgreSQL, a
    /// lock per aggregate read). Default: none.
    fn reads() -> Vec<NamedAggregate> {
        Vec::new()
    }

    /// Folds one event into the state.
    fn apply(state: &mut Self::State, event: &Self::Event);

    /// How events stored in older shapes are read today (see [`Upcasters`]): renamed or
    /// reshaped fields, split, renamed or dropped events. Default: none. Asked once per
    /// process; applied on every read of history, never written back.
    fn upcasters() -> Upcasters {
        Upcasters::new()
    }

    /// The JSON Schema of [`Aggregate::State`], as `/openapi.json` shows it: the state the
    /// snapshot queries answer, and the fields a condition can name, which Wow's generated
    /// clients type from it. Default: any object. A state that derives
    /// `schemars::JsonSchema` returns [`state_schema_of::<Self::State>()`](state_schema_of).
    fn state_schema() -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }

    /// The unique keys `state` holds (SPEC DM-1): values such as an SKU or an email that no
    /// other aggregate of the tenant may hold at the same time, each in a named key space.
    /// `None`, the default, says the aggregate holds no keys, and nothing is computed;
    /// an aggregate that holds keys answers `Some` for every state, empty when it holds none.
    ///
    /// Asked of the state before a decision and of the state after its events: the keys
    /// gained are claimed and those lost released in the same atomic write as the stream, so
    /// a command whose claim meets another holder is refused (`DuplicateKey`, recorded as
    /// its decision) and appends nothing, and a rejected or failed command changes no key.
    /// A key moves with the state: a renamed SKU releases the old value and claims the new
    /// one.
    ///
    /// A soft-deleted aggregate holds no keys (SPEC DM-6): the delete's append releases the
    /// keys of its state, and the recover's append claims them again. When another aggregate
    /// took one meanwhile, the recover is refused `DuplicateKey` (recorded as its decision,
    /// as any claim's refusal), and the aggregate stays deleted until the key is free.
    fn unique_keys(state: &Self::State) -> Option<Vec<UniqueKey>> {
        let _ = state;
        None
    }

    /// The deadlines `state` holds (SPEC DM-2): commands to send to this aggregate at a time,
    /// each named (an order's `expire`, due fifteen minutes after it was placed). `None`, the
    /// default, says the aggregate has none, and nothing is computed; an aggregate with
    /// deadlines answers `Some` for every state, empty when none is pending.
    ///
    /// Asked of the state before a decision and of the state after its events: a deadline
    /// gained or moved is scheduled and one lost cancelled, in the same atomic write as the
    /// stream, so a paid order that no longer lists its expiry cancels it, and a rejected or
    /// failed command schedules nothing. When it is due, the scheduler sends the command with
    /// a request id derived from the schedule, so firing twice takes effect once; the
    /// command is decided like any other, on the state of that moment.
    ///
    /// A soft-deleted aggregate has no deadlines (SPEC DM-6): the delete's append cancels the
    /// rows of its state, and the recover's append schedules the state's deadlines again, with
    /// request ids derived from the recover's stream, so each is a new firing. One whose time
    /// passed while the aggregate was deleted is due at once after the recover.
    fn deadlines(state: &Self::State) -> Option<Vec<Deadline<Self::Command>>> {
        let _ = state;
        None
    }

    /// The aggregate's type.
    fn named_aggregate() -> NamedAggregate {
        NamedAggregate::new(Self::CONTEXT_NAME, Self::AGGREGATE_NAME)
    }
}

/// The JSON Schema of a state type that derives `schemars::JsonSchema`, for
/// [`Aggregate::state_schema`].
pub fn state_schema_of<T: schemars::JsonSchema>() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(T))
        .unwrap_or_else(|_| serde_json::json!({"type": "object"}))
}
