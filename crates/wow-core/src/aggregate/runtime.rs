//! A typed aggregate behind a JSON-in/JSON-out interface, so HTTP and the bus can carry it.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, OnceLock, RwLock};

use serde_json::Value;

use futures::FutureExt;
use wow_contracts::eventsourcing::AppendChanges;
use wow_contracts::eventsourcing::Snapshot;
use wow_model::aggregate::{
    check_command, is_lifecycle_command, is_lifecycle_event, Aggregate, AggregateError,
    AggregateState, CommandContext, DomainError, Lifecycle, LifecycleEvent, AGGREGATE_DELETED,
    DELETE_AGGREGATE, LIFECYCLE_REVISION, RECOVER_AGGREGATE,
};
use wow_model::aggregate_id::NamedAggregate;
use wow_model::command::{CommandBody, CommandInfo, CommandKind, EventBody};
use wow_model::deadline::{deadline_changes, DeadlineChange};
use wow_model::error_code::ErrorCode;
use wow_model::event::{DomainEvent, DomainEventStream, EventShape, Upcasters};
use wow_model::panic::panic_message;
use wow_model::services::Refusal;
use wow_model::unique_key::{key_changes, UniqueKey};

/// A command decoded and validated against its aggregate, ready to be handled.
pub struct DecodedCommand {
    name: &'static str,
    kind: CommandKind,
    body: Box<dyn Any + Send + Sync>,
}

impl fmt::Debug for DecodedCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecodedCommand")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl DecodedCommand {
    /// The command's stable name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The command's kind.
    pub fn kind(&self) -> CommandKind {
        self.kind
    }
}

/// One aggregate type, driven by JSON: what the registry holds for each aggregate.
///
/// Implemented for every [`Aggregate`] by [`TypedAggregateRuntime`]; users do not implement
/// it themselves.
#[async_trait::async_trait]
pub trait AggregateRuntime: Send + Sync + fmt::Debug {
    /// The aggregate's context and name.
    fn named_aggregate(&self) -> &NamedAggregate;

    /// The names the aggregate had before ([`Aggregate::ALIASES`]).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// Every command, by name and kind.
    fn commands(&self) -> &'static [CommandInfo];

    /// Every event name.
    fn events(&self) -> &'static [&'static str];

    /// The JSON Schema of the state ([`Aggregate::state_schema`]).
    fn state_schema(&self) -> Value {
        serde_json::json!({"type": "object"})
    }

    /// Whether its snapshot queries are indexed ([`Aggregate::QUERY_INDEX`]).
    fn query_index(&self) -> bool {
        false
    }

    /// Who may delete and recover it ([`Aggregate::LIFECYCLE`], SPEC DM-6).
    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::Public
    }

    /// The names of the deadlines `state` holds that are due at `now`, earliest first (SPEC
    /// DM-6: a node decides them before a command that arrives after they came due). Empty for
    /// a deleted aggregate, and when the aggregate's `deadlines` panics.
    fn overdue(&self, state: &AggregateState, now: i64) -> Vec<String> {
        let _ = (state, now);
        Vec::new()
    }

    /// Whether the aggregate declares unique keys (its [`Aggregate::unique_keys`] answers
    /// `Some`, SPEC DM-1): the aggregates whose keys a backfill claims.
    fn declares_keys(&self) -> bool {
        false
    }

    /// The other aggregate types its decisions read ([`Aggregate::reads`], SPEC DM-5).
    fn reads(&self) -> &[NamedAggregate] {
        &[]
    }

    /// The unique keys `state` holds ([`Aggregate::unique_keys`], SPEC DM-1), with their
    /// reservation times: none for a deleted aggregate (SPEC DM-6) or one that declares none.
    /// When the aggregate's `unique_keys` panics (SPEC PX-1), the panic's message.
    fn held_keys(&self, state: &AggregateState) -> Result<Vec<UniqueKey>, String> {
        let _ = state;
        Ok(Vec::new())
    }

    /// Decodes and validates the command `name` with the JSON `body`.
    ///
    /// Fails with [`AggregateError::UnknownCommand`], [`AggregateError::InvalidBody`] or
    /// [`AggregateError::Validation`], and with [`AggregateError::LifecycleDisabled`] for the
    /// built-in delete and recover of an aggregate whose lifecycle is
    /// [`Lifecycle::Disabled`]; nothing else has happened when it fails.
    fn decode_command(&self, name: &str, body: &Value) -> Result<DecodedCommand, AggregateError>;

    /// The state before the first event (version 0).
    fn initial_state(&self) -> AggregateState;

    /// The state a snapshot holds; one that does not decode is
    /// [`AggregateError::CorruptHistory`] (the caller may replay from the events instead).
    fn restore_state(&self, snapshot: &Snapshot) -> Result<AggregateState, AggregateError>;

    /// `stream`'s events as today's code reads them: each stored event through the
    /// aggregate's [`Upcasters`], with the index of the stored event it came from (a split
    /// gives several with one index; a dropped event none). For showing history; nothing is
    /// written back. An event the upcasters refuse is [`AggregateError::CorruptHistory`].
    fn upcast(
        &self,
        stream: &DomainEventStream,
    ) -> Result<Vec<(usize, EventShape)>, AggregateError>;

    /// Folds `stream` into `state`. The stream must be the next version; a gap, an unknown
    /// event or a malformed body is [`AggregateError::CorruptHistory`] and leaves `state` as
    /// it was.
    ///
    /// A panic (or an arithmetic overflow) in the aggregate's `apply` is caught and returned
    /// as [`AggregateError::ApplyPanicked`] (SPEC PX-1); `state` is then half-applied and the
    /// caller must drop it.
    fn apply(
        &self,
        state: &mut AggregateState,
        stream: &DomainEventStream,
    ) -> Result<(), AggregateError>;

    /// Decides on `command` against `state`: the events to record (possibly none), or why not.
    ///
    /// Checks the existence rules of the command's kind first (`NotFound`, `AlreadyExists`,
    /// void commands), then runs the aggregate's handler. A panic (or an arithmetic overflow)
    /// in the handler is caught and returned as [`AggregateError::HandlerPanicked`] (SPEC
    /// PX-1); `state` is only read, so it is unchanged.
    ///
    /// With the events come the changes they make to the aggregate's unique keys
    /// ([`Aggregate::unique_keys`], SPEC DM-1) and deadlines ([`Aggregate::deadlines`], SPEC
    /// DM-2), for the store to make with the append. A deleted aggregate counts as holding
    /// neither (SPEC DM-6): a delete releases the keys and cancels the deadlines of the state,
    /// a recover claims and schedules them again. A service the handler consulted and
    /// that failed is [`AggregateError::ServiceFailed`] (SPEC DM-3): not a decision.
    async fn handle(
        &self,
        state: &AggregateState,
        command: &DecodedCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Decided, AggregateError>;
}

/// What a handler decided: the events to record, and the changes they make besides history.
#[derive(Debug, Default)]
pub struct Decided {
    /// The events, in order; none for a command that changes nothing.
    pub events: Vec<DomainEvent>,
    /// The claims and releases of unique keys (SPEC DM-1) and the deadlines scheduled and
    /// cancelled (SPEC DM-2) the events make, for
    /// [`History::append_with`](wow_contracts::eventsourcing::History::append_with).
    pub changes: AppendChanges,
}

impl Decided {
    /// Events that change no key and no deadline.
    pub fn events(events: Vec<DomainEvent>) -> Self {
        Self {
            events,
            changes: AppendChanges::default(),
        }
    }
}

/// The [`AggregateRuntime`] of the aggregate `A`.
pub struct TypedAggregateRuntime<A> {
    named: NamedAggregate,
    reads: Vec<NamedAggregate>,
    aggregate: PhantomData<fn() -> A>,
}

impl<A> fmt::Debug for TypedAggregateRuntime<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedAggregateRuntime")
            .field("named", &self.named)
            .finish()
    }
}

impl<A: Aggregate> Default for TypedAggregateRuntime<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: Aggregate> TypedAggregateRuntime<A> {
    /// The runtime of `A`.
    pub fn new() -> Self {
        Self {
            named: A::named_aggregate(),
            reads: A::reads(),
            aggregate: PhantomData,
        }
    }
}

/// The upcasters `A` declares, asked once per process; `None` when it declares none.
pub(crate) fn upcasters_of<A: Aggregate>() -> Option<Arc<Upcasters>> {
    static CACHE: OnceLock<RwLock<HashMap<TypeId, Option<Arc<Upcasters>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = TypeId::of::<A>();
    if let Some(known) = cache.read().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return known.clone();
    }
    let made = Some(A::upcasters())
        .filter(|upcasters| !upcasters.is_empty())
        .map(Arc::new);
    cache
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, made.clone());
    made
}

/// Today's shape of the events of one stream: each stored event through `upcasters` (when
/// one applies to its name and revision), in order. A dropped event yields nothing; a split
/// one several. The error names the event and the revision it was stored at.
pub(crate) fn upcast_events(
    upcasters: Option<&Upcasters>,
    stream: &DomainEventStream,
) -> Result<Vec<(usize, EventShape)>, AggregateError> {
    let mut shapes = Vec::with_capacity(stream.body.len());
    for (index, event) in stream.body.iter().enumerate() {
        let stored = EventShape::new(
            event.name.clone(),
            event.revision.clone(),
            event.body.clone(),
        );
        match upcasters.filter(|u| u.applies_to(&event.name, &event.revision)) {
            None => shapes.push((index, stored)),
            Some(upcasters) => {
                let today = upcasters
                    .apply(stored)
                    .map_err(|error| undecodable(stream, event, &error.to_string()))?;
                shapes.extend(today.into_iter().map(|shape| (index, shape)));
            }
        }
    }
    Ok(shapes)
}

/// The history of `stream` cannot be read: names the aggregate, the version, the event and the
/// revision it was stored at (the aggregate is quarantined by its caller).
fn undecodable(stream: &DomainEventStream, event: &DomainEvent, why: &str) -> AggregateError {
    AggregateError::CorruptHistory {
        aggregate_id: Box::new(stream.aggregate_id.clone()),
        version: stream.version,
        message: format!(
            "event `{}` stored at revision {} does not decode: {why}",
            event.name, event.revision
        ),
    }
}

/// Soft delete and recover, which every aggregate has: `Some` decision for the built-in
/// commands (the event to record), and for any command to a deleted aggregate (its refusal);
/// `None` for the aggregate's handler.
fn lifecycle(
    state: &AggregateState,
    command: &'static str,
    ctx: &CommandContext<'_>,
) -> Option<Result<LifecycleEvent, AggregateError>> {
    let refused = |code: ErrorCode, message: String| {
        Some(Err(AggregateError::Rejected {
            code,
            message,
            detail: serde_json::Map::new(),
        }))
    };
    if state.is_deleted() && command != RECOVER_AGGREGATE {
        return refused(
            ErrorCode::IllegalAccessDeletedAggregate,
            format!(
                "aggregate {} is deleted: only recover reaches it",
                ctx.aggregate_id
            ),
        );
    }
    if !is_lifecycle_command(command) {
        return None;
    }
    if !ctx.exists() {
        return Some(Err(AggregateError::NotFound(ctx.aggregate_id.clone())));
    }
    if command == DELETE_AGGREGATE {
        Some(Ok(LifecycleEvent::AggregateDeleted))
    } else if state.is_deleted() {
        Some(Ok(LifecycleEvent::AggregateRecovered))
    } else {
        refused(
            ErrorCode::IllegalState,
            format!(
                "aggregate {} is not deleted: nothing to recover",
                ctx.aggregate_id
            ),
        )
    }
}

/// The built-in event that records `event`.
fn lifecycle_event(event: LifecycleEvent) -> DomainEvent {
    DomainEvent {
        id: wow_model::id::new_id(),
        name: event.event_name().to_owned(),
        revision: LIFECYCLE_REVISION.to_owned(),
        body: Value::Object(serde_json::Map::new()),
    }
}

/// The changes a delete or a recover of an aggregate of type `A` in `state` makes besides its
/// history (SPEC DM-6): a deleted aggregate counts as holding no keys and no deadlines, so a
/// delete releases the keys `state` holds and cancels its deadlines, and a recover claims
/// them and schedules its deadlines again, with request ids derived from the recover's
/// stream (the one after `ctx.version`): a new firing, never a replay of one refused while
/// the aggregate was deleted.
fn lifecycle_changes<A: Aggregate>(
    state: &A::State,
    event: LifecycleEvent,
    ctx: &CommandContext<'_>,
) -> Result<AppendChanges, AggregateError> {
    let held_keys = A::unique_keys(state).unwrap_or_default();
    let held_deadlines = A::deadlines(state).unwrap_or_default();
    let (owner, version) = (ctx.aggregate_id, ctx.version + 1);
    let (keys, deadlines) = if event.deletes() {
        (
            key_changes(&held_keys, &[]),
            deadline_changes(owner, version, &held_deadlines, &[]),
        )
    } else {
        (
            key_changes(&[], &held_keys),
            deadline_changes(owner, version, &[], &held_deadlines),
        )
    };
    let deadlines = deadlines.map_err(AggregateError::Encode)?;
    check_deadline_commands::<A>(&deadlines)?;
    Ok(AppendChanges {
        keys,
        deadlines,
        ..AppendChanges::default()
    })
}

/// SPEC DM-6: every deadline `changes` schedule fires a command `A` declares
/// `#[command(deadline)]`, so a command only a deadline should send is internal by default.
pub(crate) fn check_deadline_commands<A: Aggregate>(
    changes: &[DeadlineChange],
) -> Result<(), AggregateError> {
    for change in changes {
        if let DeadlineChange::Schedule(row) = change {
            let declared = A::Command::COMMANDS
                .iter()
                .any(|info| info.name == row.command && info.deadline);
            if !declared {
                return Err(AggregateError::UndeclaredDeadlineCommand {
                    aggregate: A::AGGREGATE_NAME.to_owned(),
                    deadline: row.name.clone(),
                    command: row.command.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Decodes the typed events of one stream, upcast to today's shapes first.
pub(crate) fn decode_events<A: Aggregate>(
    stream: &DomainEventStream,
) -> Result<Vec<A::Event>, AggregateError> {
    let upcasters = upcasters_of::<A>();
    let upcasters = upcasters.as_deref().filter(|u| {
        stream
            .body
            .iter()
            .any(|e| u.applies_to(&e.name, &e.revision))
    });
    let Some(upcasters) = upcasters else {
        // Nothing to upcast: decode as stored.
        return stream
            .body
            .iter()
            .filter(|event| !is_lifecycle_event(&event.name))
            .map(|event| {
                event
                    .decode::<A::Event>()
                    .map_err(|error| undecodable(stream, event, &error.to_string()))
            })
            .collect();
    };
    upcast_events(Some(upcasters), stream)?
        .into_iter()
        .filter(|(_, shape)| !is_lifecycle_event(&shape.name))
        .map(|(index, shape)| {
            A::Event::from_body(&shape.name, &shape.body)
                .map_err(|error| undecodable(stream, &stream.body[index], &error.to_string()))
        })
        .collect()
}

/// Runs `A`'s handler ([`Aggregate::decide`]) after the existence rules, as the runtime and
/// the test kit both do.
pub(crate) async fn decide<A: Aggregate>(
    state: &A::State,
    command: A::Command,
    ctx: &CommandContext<'_>,
) -> Result<Vec<A::Event>, AggregateError> {
    check_command(
        ctx.aggregate_id,
        command.command_name(),
        command.kind(),
        ctx.version,
        None,
    )?;
    A::decide(state, command, ctx)
        .await
        .map_err(|refusal| match refusal {
            Refusal::Rejected(error) => AggregateError::Rejected {
                code: error.error_code(),
                message: error.to_string(),
                detail: error.detail(),
            },
            Refusal::ServiceFailed(failure) => AggregateError::ServiceFailed(failure),
        })
}

/// The changes `events` make to an aggregate of type `A` in `state` besides its history: its
/// unique keys (SPEC DM-1) and its deadlines (SPEC DM-2), each the state after the events
/// against `state`; nothing for an aggregate that holds neither. The events are applied to a
/// copy; the state itself is untouched. The new stream is the one after `ctx.version`.
pub(crate) fn changes_of<A: Aggregate>(
    state: &A::State,
    events: &[A::Event],
    ctx: &CommandContext<'_>,
) -> Result<AppendChanges, AggregateError> {
    let keys_before = A::unique_keys(state);
    let deadlines_before = A::deadlines(state);
    if events.is_empty() || (keys_before.is_none() && deadlines_before.is_none()) {
        return Ok(AppendChanges::default());
    }
    let mut after = state.clone();
    for event in events {
        A::apply(&mut after, event);
    }
    let keys = match keys_before {
        Some(before) => key_changes(&before, &A::unique_keys(&after).unwrap_or_default()),
        None => Vec::new(),
    };
    let deadlines = match deadlines_before {
        Some(before) => deadline_changes(
            ctx.aggregate_id,
            ctx.version + 1,
            &before,
            &A::deadlines(&after).unwrap_or_default(),
        )
        .map_err(AggregateError::Encode)?,
        None => Vec::new(),
    };
    check_deadline_commands::<A>(&deadlines)?;
    Ok(AppendChanges {
        keys,
        deadlines,
        ..AppendChanges::default()
    })
}

#[async_trait::async_trait]
impl<A: Aggregate> AggregateRuntime for TypedAggregateRuntime<A> {
    fn named_aggregate(&self) -> &NamedAggregate {
        &self.named
    }

    fn aliases(&self) -> &'static [&'static str] {
        A::ALIASES
    }

    fn commands(&self) -> &'static [CommandInfo] {
        A::Command::COMMANDS
    }

    fn events(&self) -> &'static [&'static str] {
        A::Event::EVENTS
    }

    fn state_schema(&self) -> Value {
        A::state_schema()
    }

    fn query_index(&self) -> bool {
        A::QUERY_INDEX
    }

    fn lifecycle(&self) -> Lifecycle {
        A::LIFECYCLE
    }

    fn overdue(&self, state: &AggregateState, now: i64) -> Vec<String> {
        if state.is_deleted() {
            return Vec::new();
        }
        let Some(typed) = state.downcast_ref::<A::State>() else {
            return Vec::new();
        };
        let held = panic::catch_unwind(AssertUnwindSafe(|| A::deadlines(typed)))
            .ok()
            .flatten()
            .unwrap_or_default();
        let mut due: Vec<(i64, String)> = held
            .into_iter()
            .filter(|deadline| deadline.due_at <= now)
            .map(|deadline| (deadline.due_at, deadline.name))
            .collect();
        due.sort();
        due.into_iter().map(|(_, name)| name).collect()
    }

    fn declares_keys(&self) -> bool {
        panic::catch_unwind(|| A::unique_keys(&A::State::default()).is_some()).unwrap_or(true)
    }

    fn reads(&self) -> &[NamedAggregate] {
        &self.reads
    }

    fn held_keys(&self, state: &AggregateState) -> Result<Vec<UniqueKey>, String> {
        if state.is_deleted() {
            return Ok(Vec::new());
        }
        let typed = state
            .downcast_ref::<A::State>()
            .ok_or_else(|| format!("the state is not a {} state", A::AGGREGATE_NAME))?;
        panic::catch_unwind(AssertUnwindSafe(|| A::unique_keys(typed)))
            .map(Option::unwrap_or_default)
            .map_err(|payload| panic_message(payload.as_ref()))
    }

    fn decode_command(&self, name: &str, body: &Value) -> Result<DecodedCommand, AggregateError> {
        if let Some(builtin) = [DELETE_AGGREGATE, RECOVER_AGGREGATE]
            .into_iter()
            .find(|builtin| *builtin == name)
        {
            if !A::LIFECYCLE.allowed() {
                return Err(AggregateError::LifecycleDisabled {
                    aggregate: A::AGGREGATE_NAME.to_owned(),
                    command: builtin.to_owned(),
                });
            }
            return Ok(DecodedCommand {
                name: builtin,
                kind: CommandKind::Normal,
                body: Box::new(()),
            });
        }
        let Some(info) = A::Command::COMMANDS.iter().find(|info| info.name == name) else {
            return Err(AggregateError::UnknownCommand {
                aggregate: A::AGGREGATE_NAME.to_owned(),
                command: name.to_owned(),
            });
        };
        let command = A::Command::from_body(name, body)
            .map_err(|error| AggregateError::invalid_body(name, &error))?;
        command.validate().map_err(AggregateError::Validation)?;
        Ok(DecodedCommand {
            name: info.name,
            kind: info.kind,
            body: Box::new(command),
        })
    }

    fn initial_state(&self) -> AggregateState {
        AggregateState::new(A::State::default(), 0).with_schema(A::STATE_VERSION)
    }

    fn upcast(
        &self,
        stream: &DomainEventStream,
    ) -> Result<Vec<(usize, EventShape)>, AggregateError> {
        upcast_events(upcasters_of::<A>().as_deref(), stream)
    }

    fn restore_state(&self, snapshot: &Snapshot) -> Result<AggregateState, AggregateError> {
        if snapshot.state_version != A::STATE_VERSION {
            return Err(AggregateError::CorruptHistory {
                aggregate_id: Box::new(snapshot.aggregate_id.clone()),
                version: snapshot.version,
                message: format!(
                    "the snapshot holds state version {}; this build's is {}",
                    snapshot.state_version,
                    A::STATE_VERSION
                ),
            });
        }
        let state: A::State = serde_json::from_value(snapshot.state.clone()).map_err(|error| {
            AggregateError::CorruptHistory {
                aggregate_id: Box::new(snapshot.aggregate_id.clone()),
                version: snapshot.version,
                message: format!("snapshot does not decode: {error}"),
            }
        })?;
        Ok(AggregateState::new(state, snapshot.version)
            .with_schema(A::STATE_VERSION)
            .with_tenant(&snapshot.aggregate_id.tenant_id))
    }

    fn apply(
        &self,
        state: &mut AggregateState,
        stream: &DomainEventStream,
    ) -> Result<(), AggregateError> {
        let corrupt = |message: String| AggregateError::CorruptHistory {
            aggregate_id: Box::new(stream.aggregate_id.clone()),
            version: stream.version,
            message,
        };
        if stream.version != state.version() + 1 {
            return Err(corrupt(format!(
                "expected version {} next, got {}",
                state.version() + 1,
                stream.version
            )));
        }
        let events = decode_events::<A>(stream)?;
        let typed = state
            .downcast_mut::<A::State>()
            .ok_or_else(|| corrupt("the state belongs to another aggregate".to_owned()))?;
        // SPEC PX-1: the team's `apply` may panic or overflow; that fails this load or this
        // command, never the worker that runs it. The typed state may be half-applied then;
        // the error says so and the callers drop it.
        let applied = panic::catch_unwind(AssertUnwindSafe(|| {
            for event in &events {
                A::apply(typed, event);
            }
        }));
        if let Err(payload) = applied {
            let message = panic_message(payload.as_ref());
            tracing::error!(aggregate_id = %stream.aggregate_id, version = stream.version, panic = %message, "the aggregate's apply panicked");
            return Err(AggregateError::ApplyPanicked {
                aggregate_id: Box::new(stream.aggregate_id.clone()),
                version: stream.version,
                message,
            });
        }
        if let Some(last) = stream
            .body
            .iter()
            .rev()
            .find(|e| is_lifecycle_event(&e.name))
        {
            state.set_deleted(last.name == AGGREGATE_DELETED);
        }
        state.set_version(stream.version, &stream.aggregate_id.tenant_id);
        Ok(())
    }

    async fn handle(
        &self,
        state: &AggregateState,
        command: &DecodedCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Decided, AggregateError> {
        let mismatch = |what: &str| AggregateError::CorruptHistory {
            aggregate_id: Box::new(ctx.aggregate_id.clone()),
            version: ctx.version,
            message: format!(
                "the {what} belongs to another aggregate than `{}`",
                A::AGGREGATE_NAME
            ),
        };
        let built_in = lifecycle(state, command.name, ctx);
        if let Some(Err(refused)) = built_in {
            return Err(refused);
        }
        let typed_state = state
            .downcast_ref::<A::State>()
            .ok_or_else(|| mismatch("state"))?;
        if let Some(Ok(event)) = built_in {
            // SPEC PX-1: the team's `unique_keys` and `deadlines` may panic too.
            let changes = panic::catch_unwind(AssertUnwindSafe(|| {
                lifecycle_changes::<A>(typed_state, event, ctx)
            }))
            .unwrap_or_else(|payload| {
                let message = panic_message(payload.as_ref());
                tracing::error!(aggregate_id = %ctx.aggregate_id, command = command.name, request_id = ctx.request_id, panic = %message, "the aggregate's keys or deadlines panicked");
                Err(AggregateError::HandlerPanicked {
                    aggregate_id: Box::new(ctx.aggregate_id.clone()),
                    message,
                })
            })?;
            return Ok(Decided {
                events: vec![lifecycle_event(event)],
                changes,
            });
        }
        let typed_command = command
            .body
            .downcast_ref::<A::Command>()
            .ok_or_else(|| mismatch("command"))?
            .clone();
        // SPEC PX-1: a panicking handler fails this command only. It reads the state through
        // a shared reference, so nothing it could have half-changed survives the unwind.
        let decided = AssertUnwindSafe(async {
            let events = decide::<A>(typed_state, typed_command, ctx).await?;
            let changes = changes_of::<A>(typed_state, &events, ctx)?;
            Ok((events, changes))
        })
        .catch_unwind()
        .await
        .unwrap_or_else(|payload| {
            let message = panic_message(payload.as_ref());
            tracing::error!(aggregate_id = %ctx.aggregate_id, command = command.name, command_id = ctx.command_id, request_id = ctx.request_id, panic = %message, "the aggregate's handler panicked");
            Err(AggregateError::HandlerPanicked {
                aggregate_id: Box::new(ctx.aggregate_id.clone()),
                message,
            })
        });
        let (events, changes) = decided?;
        Ok(Decided {
            events: events
                .iter()
                .map(|event| DomainEvent::of(event).map_err(AggregateError::Encode))
                .collect::<Result<_, _>>()?,
            changes,
        })
    }
}
