//! # wow-core
//!
//! The heart of wow-rs, an event-sourced command-processing framework in which every command
//! is safe to retry. Backends implement its contracts and prove it with the `wow-tck`
//! conformance suite; `wow-http` serves it; the example domains use nothing else.
//!
//! ## Three layers
//!
//! The source is in three layers, each importing only those below it:
//!
//! 1. **model** (`src/model/`): plain data and the traits a team implements for its own
//!    types: ids and time ([`id`]), [`AggregateId`], [`ErrorCode`], [`CommandMessage`],
//!    [`CommandResult`], [`CommandStage`], [`DomainEventStream`], the [`aggregate::Aggregate`]
//!    and [`view::View`] programming models, and the decisions a store records. No I/O.
//! 2. **contracts** (`src/contracts/`): what a backend or a transport implements, each with
//!    its in-memory reference: [`eventsourcing::EventStore`], [`eventsourcing::SnapshotStore`],
//!    [`command::CommandBus`], [`event::DomainEventBus`], [`event::EventConsumer`] and its
//!    records (positions, processed messages, the effect journal), [`view::ViewStore`],
//!    [`compensation::CompensationStore`], bundled per backend by [`Stores`].
//! 3. **domain** (`src/domain/`): the programming model run from JSON, over the contracts:
//!    the [`aggregate::AggregateRegistry`] that runs aggregates by name, quarantine, the
//!    [`saga::SagaContext`] a saga sends through, and the given → when → expect kits
//!    ([`aggregate::AggregateSpec`], [`view::ViewSpec`], [`saga::SagaSpec`],
//!    [`outbox::OutboxSpec`]) that run this same code without a store.
//!
//! What runs a service over these contracts (the request-id check, the command gateway,
//! waiting, the processing node, event dispatch and catch-up, projections, compensation,
//! the one-process pipeline) is the `wow-runtime` crate. A domain crate needs this crate
//! (and its derive macros) only.
//!
//! ## Where to find a concept
//!
//! The public modules below keep the vocabulary of Wow, the framework wow-rs follows
//! (CommandGateway, EventStore, RequestIdChecker, ...): each gathers one concept's items from
//! whichever layers hold them, so a reader who knows the word finds it by its module.

extern crate self as wow_core;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

mod contracts;
mod domain;
mod model;
#[doc(hidden)]
pub mod testing_example;

pub mod query {
    //! Wow's query DSL over documents (materialized snapshots, event streams, view rows): the
    //! conditions and query bodies Wow's clients send, checked and lowered into what every
    //! store runs the same way.
    pub use crate::model::query::{
        matches, order, project, Condition, Direction, DocumentQuery, FieldPath, Filter, ListQuery,
        Lowering, Operator, PagedList, PagedQuery, Pagination, Projection, QueryBody, QueryError,
        QueryRefusal, Range, Scalar, SharePlace, SingleQuery, Sort, SortKey, Target, TenantShare,
        TextMatch, DEFAULT_QUERY_TIMEOUT, MAX_CONDITIONS, MAX_DEPTH, MAX_LIST_LIMIT, MAX_PAGE_SIZE,
        MAX_PAGE_WINDOW, MAX_PATH_LEN, MAX_VALUES, MAX_VALUES_IN_ALL,
    };
}

pub mod aggregate {
    //! The aggregate programming model: the trait a team implements, the registry that runs
    //! it from JSON, quarantine of an aggregate whose code panicked (SPEC PX-1), and the
    //! given → when → expect test kit.
    pub use crate::domain::aggregate::{
        typed_events, AggregateRegistry, AggregateRuntime, AggregateSpec, Decided, DecodedCommand,
        DuplicateAggregateName, Expect, Given, QuarantinedAggregate, QuarantinedAggregates,
        RegistrationError, ReservedCommandName, TypedAggregateRuntime, UnknownAggregate,
        RESERVED_COMMAND_NAMES,
    };
    pub use crate::model::aggregate::{
        check_access, check_command, is_lifecycle_command, is_lifecycle_event, state_schema_of,
        AccessRefused, Aggregate, AggregateError, AggregateScope, AggregateState, CommandContext,
        DecodeDomainError, DomainError, Lifecycle, LifecycleEvent, AGGREGATE_DELETED,
        AGGREGATE_RECOVERED, DELETE_AGGREGATE, LIFECYCLE_REVISION, RECOVER_AGGREGATE,
    };
    pub use crate::model::services::{Refusal, ServiceFailure, ServiceNeed, Services};
}

pub mod build {
    //! How a crate was compiled, measured from code compiled in it (SPEC PX-1): whether an
    //! arithmetic overflow there panics, as PX-1 needs, or wraps silently, as Cargo's
    //! default release profile has it. The service refuses to start on a crate that wraps.
    //! See [`CrateBuild`] and [`crate_build!`](crate::crate_build).
    pub use crate::model::build::CrateBuild;
}

pub mod command {
    //! Commands: the message, its kind and stages, results, and the bus that carries them to
    //! a processing node. The gateway, waiting and the node itself are `wow-runtime`'s.
    pub use crate::contracts::command::{
        CommandBus, CommandBusError, CommandHandler, InMemoryCommandBus, InTransit, JsonCommand,
    };
    pub use crate::model::command::{
        decided_result, duplicate_result, headers, request_fingerprint, BindingError,
        BodyDecodeError, CommandBody, CommandInfo, CommandKind, CommandMessage, CommandResult,
        CommandResultError, CommandStage, EventBody, FunctionInfo, FunctionKind, UnknownStage,
        WaitFunction, ORIGINAL_COMMAND_ID, OWNER_ID_HEADER, REJECTION_DETAIL, REPLAYED,
        SPACE_ID_HEADER,
    };
}

pub mod compensation {
    //! Event compensation (SPEC DS-4): a consumer's failure on an appended stream is recorded
    //! durably (which consumer, which stream and events, the error, the attempts) and
    //! retried later, by `wow-runtime`'s scheduler with exponential backoff or by hand,
    //! without touching history. An aggregate a processing node quarantined (SPEC PX-1) is recorded the same
    //! way, under the consumer [`AGGREGATE_PROCESSOR`].
    pub use crate::contracts::compensation::{
        due_order, next_record, succeeded, CompensationStore, ExecutionFailed,
        ExecutionFailedStatus, FailedExecution, FailureQuery, InMemoryCompensationStore, RetrySpec,
        AGGREGATE_PROCESSOR,
    };
}

pub mod event {
    //! Domain events, the event bus, the consumers of appended streams, and what keeps a
    //! consumer from applying an event twice: processed-message records, the effect journal
    //! and positions. The dispatch and catch-up that drive consumers are `wow-runtime`'s.
    pub use crate::contracts::event::{
        effect_key, run_external_effect, BadRuns, ConsumerError, ConsumerPositions,
        ConsumerStoreError, DomainEventBus, EffectAttempt, EffectError, EffectJournal,
        EffectOutcome, EffectState, EventBusError, EventConsumer, HandledVersions,
        InMemoryConsumerPositions, InMemoryEffectJournal, InMemoryProcessedMessages,
        NoopDomainEventBus, PositionRun, ProcessError, Processed, ResumedEffect, RunsText,
    };
    pub use crate::model::event::{
        DomainEvent, DomainEventStream, EventShape, UpcastError, Upcasters,
    };
}

pub mod eventsourcing {
    //! Event sourcing: the EventStore and SnapshotStore contracts, their in-memory versions,
    //! the decisions they record, the global feed of appended streams ([`GlobalPosition`],
    //! [`FeedEntry`]). Loading, caching and snapshotting aggregates are `wow-runtime`'s. A wrapper that adds
    //! one concern to a store implements [`EventStoreDecorator`] (or
    //! [`SnapshotStoreDecorator`]) and states only what it changes; [`RecordingEventStore`]
    //! proves in a test that every other method reaches the store it wraps.
    pub use crate::contracts::eventsourcing::{
        check_appendable, check_claimable, check_deadline_changes, check_key_changes,
        check_rejectable, check_rename, check_time_range, check_version_range, stream_document,
        AggregateRenames, AppendChanges, ConnectionUse, EventStore, EventStoreDecorator,
        EventStoreError, EventStoreMethod, FeedEntry, GatedEventStore, GlobalPosition,
        InMemoryEventStore, InMemoryRenames, InMemorySnapshotStore, KeyTaken,
        ParseGlobalPositionError, PendingMigration, RecordingEventStore, RecordingSnapshotStore,
        RejectedStream, RenameError, RenamedRows, SchemaStatus, Snapshot, SnapshotStore,
        SnapshotStoreDecorator, SnapshotStoreError, SnapshotStoreMethod, StoreCheck, StoreHealth,
    };
    pub use crate::model::error::BoxError;
    pub use crate::model::eventsourcing::{
        is_recorded_rejection, RejectionRecord, RequestDecision, RequestRecord,
    };
}

pub mod id {
    //! Identifiers and time, taken through traits so that tests and the simulation can fix
    //! them.
    pub use crate::model::id::{
        exact_now_millis, new_id, now_millis, Clock, IdGenerator, ManualClock, SystemClock,
        UuidV7IdGenerator,
    };
}

pub mod outbox {
    //! Outboxes: rows for the outside world, written once per event in the store's own
    //! database and sent from there at most once each (SPEC DS-2). The portable counterpart
    //! of views: a team writes an [`Outbox`] once, with no SQL and no backend, names the
    //! outside system its rows go to as an [`OutboxSender`], and
    //! [`OutboxSpec`] tests it without a store; `wow-runtime`'s processor records its rows
    //! through the view store and its delivery sends them through the effect journal.
    pub use crate::domain::outbox::{OutboxExpect, OutboxSpec};
    pub use crate::model::outbox::{row_id, EventMeta, Outbox, OutboxEntry, OutboxSender};
}

pub mod saga {
    //! Sagas: react to events by sending commands through the gateway, with request ids
    //! derived from the event that caused them (SPEC DS-3). The dispatcher that runs them is
    //! `wow-runtime`'s; [`SagaSender`] is the seam between the two.
    pub use crate::domain::saga::{
        saga_request_id, DynSaga, Saga, SagaContext, SagaDelivery, SagaExpect, SagaGiven,
        SagaReply, SagaSender, SagaSpec, SentCommand, SentLog, StepError, REJECTION_DETAIL,
    };
}

pub mod deadline {
    //! Deadlines (SPEC DM-2): commands scheduled for a time. An aggregate states the deadlines
    //! its state holds ([`Aggregate::deadlines`](crate::aggregate::Aggregate::deadlines)); the
    //! node hands the difference a decision makes ([`deadline_changes`]) to the store with the
    //! stream, which writes the rows in the same atomic write
    //! ([`EventStore::append_with`](crate::eventsourcing::EventStore::append_with)). A
    //! scheduler fires due rows ([`DeadlineStore::due`]) through the gateway with the request
    //! id derived from the schedule, so firing twice takes effect once.
    pub use crate::contracts::deadline::{DeadlineStore, DeadlineTable};
    pub use crate::model::deadline::{
        aggregate_hash, backoff, check_deadline_name, deadline_changes, deadline_request_id,
        owner_hash, partition_of, share_across_tenants, Deadline, DeadlineBacklog, DeadlineChange,
        DueQuery, PartitionFilter, PendingDeadline, ScheduledCommand, HELD, MAX_DEADLINE_NAME_LEN,
    };
}

pub mod unique_key {
    //! Unique keys across aggregates (SPEC DM-1): a value (an email, a SKU) an aggregate holds
    //! in a named key space of its tenant. An aggregate states the keys its state holds
    //! ([`Aggregate::unique_keys`](crate::aggregate::Aggregate::unique_keys)); the node hands
    //! the difference a decision makes ([`key_changes`]) to the store with the stream, and the
    //! store writes both in one atomic write, its unique constraint deciding between two
    //! claimants ([`EventStore::append_with`](crate::eventsourcing::EventStore::append_with)).
    pub use crate::model::unique_key::{
        check_unique_key, key_changes, KeyChange, KeyClaim, KeyHolder, UniqueKey,
        MAX_KEY_SPACE_LEN, MAX_KEY_VALUE_LEN,
    };
}

pub mod view {
    //! Views: read models a team writes once, as a typed fold of one aggregate's events, and
    //! that every backend stores the same way.
    //!
    //! - [`View`] is the team's part: a serializable state per (tenant, aggregate id) and a
    //!   pure `apply` of the aggregate's own event enum. No SQL, no backend.
    //! - [`ViewStore`] is the contract a backend implements: one row per (view, tenant,
    //!   aggregate id), written together with its processed-message record in one
    //!   transaction (SPEC DS-2), loaded by key, listed by a [`ViewFilter`] in pages.
    //!   [`InMemoryViewStore`] is the reference; `wow-sqlite` and `wow-postgres` hold the
    //!   durable ones, and `wow-tck` proves them alike.
    //! - `wow-runtime`'s `ViewProjection` runs any `View` as an
    //!   [`EventConsumer`](crate::event::EventConsumer) over any `ViewStore`, in version
    //!   order per aggregate; [`view()`] reads one row back typed.
    //! - [`ViewSpec`] tests a view without a store: given the aggregate's events, expect its
    //!   state.
    //!
    //! Concurrency: every update of one row is serialised by its store (the in-memory lock,
    //! the SQLite writer, a PostgreSQL lock on the key), so concurrent deliveries of distinct
    //! streams of one aggregate each apply once, in whatever order the projection's version
    //! check allows.
    //!
    //! A wrapper that adds one concern to a view store implements [`ViewStoreDecorator`] and
    //! states only what it changes; [`RecordingViewStore`] proves in a test that every other
    //! method reaches the store it wraps.
    pub use crate::contracts::view::{
        apply_update, check_field, view, Condition, FilterValue, InMemoryViewStore,
        RecordingViewStore, ViewFilter, ViewKeyMismatch, ViewStore, ViewStoreDecorator,
        ViewStoreError, ViewStoreMethod, ViewUpdate, MAX_FIELD_LEN,
    };
    pub use crate::domain::view::{ViewExpect, ViewSpec};
    pub use crate::model::view::{View, ViewKey, ViewRow};
}

pub use contracts::stores::Stores;
pub use model::aggregate::DomainError;
pub use model::aggregate_id::{
    check_aggregate_id, check_request_id, group_by_aggregate, AggregateId, NamedAggregate,
    AGGREGATE_ID_PATTERN, DEFAULT_TENANT_ID, MAX_AGGREGATE_ID_BYTES,
};
pub use model::command::{CommandMessage, CommandResult, CommandStage};
pub use model::error::BoxError;
pub use model::error_code::ErrorCode;
pub use model::event::{DomainEvent, DomainEventStream};
pub use model::panic::panic_message;
pub use wow_macros::{Command, Event};

/// See [`schemars`]: `#[wow_core::async_trait]` on a saga's (or a consumer's) `impl`.
pub use async_trait::async_trait;
/// The crates a domain's payloads derive from, at the versions wow-core is built with: a
/// domain crate writes `use wow_core::schemars;` for `#[derive(schemars::JsonSchema)]` (the
/// schemas of `/openapi.json`), and names `validator` (or this re-export, with
/// `#[validate(crate = "wow_core::validator")]`) for its payloads' rules. Nothing else: the
/// server, the backends and axum are chosen in the service's `main`, through `wow-service`.
pub use schemars;
/// See [`schemars`]: the logs and spans a domain writes, into the service's subscriber.
pub use tracing;
/// See [`schemars`]: the validation rules of a command's payload.
pub use validator;
