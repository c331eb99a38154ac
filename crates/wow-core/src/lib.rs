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
//! 3. **runtime** (`src/runtime/`): what runs over the contracts: the request-id check
//!    ([`idempotency`]), the [`command::CommandGateway`], waiting, the processing node, the
//!    [`event::EventDispatcher`] and catch-up, [`saga`]s, views as projections,
//!    [`compensation::CompensationScheduler`], the one-process [`pipeline::LocalPipeline`],
//!    and the given → when → expect kits ([`aggregate::AggregateSpec`], [`view::ViewSpec`],
//!    [`saga::SagaSpec`]) that run this same code without a store.
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
mod model;
mod runtime;
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
    pub use crate::model::aggregate::{
        check_access, check_command, is_lifecycle_command, is_lifecycle_event, state_schema_of,
        AccessRefused, Aggregate, AggregateError, AggregateScope, AggregateState, CommandContext,
        DecodeDomainError, DomainError, AGGREGATE_DELETED, AGGREGATE_RECOVERED, DELETE_AGGREGATE,
        LIFECYCLE_REVISION, RECOVER_AGGREGATE,
    };
    pub use crate::runtime::aggregate::{
        typed_events, AggregateRegistry, AggregateRuntime, AggregateSpec, DecodedCommand,
        DuplicateAggregateName, Expect, Given, QuarantinedAggregate, QuarantinedAggregates,
        RegistrationError, ReservedCommandName, TypedAggregateRuntime, UnknownAggregate,
        RESERVED_COMMAND_NAMES,
    };
}

pub mod command {
    //! Commands: the message, its kind and stages, results, the bus, the gateway, waiting,
    //! the processing node's handler, and the look-up of what became of a request.
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
    pub use crate::runtime::command::{
        look_up_request, signal_wanted, CommandGateway, CommandGatewayBuilder,
        DefaultCommandHandler, DefaultCommandHandlerBuilder, InFlightRequests, RequestOutcome,
        WaitCoordinator, WaitFunctions, WaitHandle, WaitNotifier, WaitPlan, WaitTail,
        WeakCommandGateway, CHAIN_HEADER, CHAIN_REPLY_HEADER, CHAIN_STAGE_HEADER,
        DEFAULT_CONFLICT_RETRIES, DEFAULT_SEND_TIMEOUT, DEFAULT_UNSURE_HORIZON,
        DEFAULT_WAIT_TIMEOUT, PROTOCOL_HEADER, PROTOCOL_VERSION, QUARANTINED, RECORDED, SENT,
        TAIL_CONTEXT_HEADER, TAIL_FUNCTION_HEADER, TAIL_PROCESSOR_HEADER, TAIL_STAGE_HEADER,
        TIMEOUT_MS, WAIT_REPLY_HEADER, WAIT_STAGE_HEADER,
    };
}

pub mod compensation {
    //! Event compensation (SPEC DS-4): a consumer's failure on an appended stream is recorded
    //! durably (which consumer, which stream and events, the error, the attempts) and
    //! retried later, by a scheduler with exponential backoff or by hand, without touching
    //! history. An aggregate a processing node quarantined (SPEC PX-1) is recorded the same
    //! way, under the consumer [`AGGREGATE_PROCESSOR`].
    pub use crate::contracts::compensation::{
        due_order, next_record, succeeded, CompensationStore, ExecutionFailed,
        ExecutionFailedStatus, FailedExecution, FailureQuery, InMemoryCompensationStore, RetrySpec,
        AGGREGATE_PROCESSOR,
    };
    pub use crate::runtime::compensation::{CompensationError, CompensationScheduler, RetryPass};
}

pub mod event {
    //! Domain events, the event bus, the dispatch of appended streams to their consumers, and
    //! what keeps consumers from applying an event twice: processed-message records, the
    //! effect journal, positions and catch-up.
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
    pub use crate::runtime::event::{
        catch_up, CatchUpError, CatchUpProgress, EventDispatcher, EventDispatcherBuilder,
        EventFeed, FeedFollower, FeedWake, InMemoryDomainEventBus, NamedConsumer, PartitionOf,
        DEFAULT_PARTITION_CAPACITY, FEED_POLL,
    };
}

pub mod eventsourcing {
    //! Event sourcing: the EventStore and SnapshotStore contracts, their in-memory versions,
    //! the decisions they record, the global feed of appended streams ([`GlobalPosition`],
    //! [`FeedEntry`]), and loading, caching and snapshotting aggregates. A wrapper that adds
    //! one concern to a store implements [`EventStoreDecorator`] (or
    //! [`SnapshotStoreDecorator`]) and states only what it changes; [`RecordingEventStore`]
    //! proves in a test that every other method reaches the store it wraps.
    pub use crate::contracts::eventsourcing::{
        check_appendable, check_rejectable, check_rename, check_time_range, check_version_range,
        stream_document, AggregateRenames, EventStore, EventStoreDecorator, EventStoreError,
        EventStoreMethod, FeedEntry, GatedEventStore, GlobalPosition, InMemoryEventStore,
        InMemoryRenames, InMemorySnapshotStore, ParseGlobalPositionError, PendingMigration,
        RecordingEventStore, RecordingSnapshotStore, RejectedStream, RenameError, RenamedRows,
        SchemaStatus, Snapshot, SnapshotStore, SnapshotStoreDecorator, SnapshotStoreError,
        SnapshotStoreMethod,
    };
    pub use crate::model::error::BoxError;
    pub use crate::model::eventsourcing::{
        is_recorded_rejection, RejectionRecord, RequestDecision, RequestRecord,
    };
    pub use crate::runtime::eventsourcing::{
        load_aggregate, recorded_scope, AggregateCache, LoadError, SnapshotStrategy, Snapshotter,
        DEFAULT_CACHE_CAPACITY,
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

pub mod idempotency {
    //! The request-id check (SPEC RQ-1..RQ-11): a fast Bloom filter per aggregate type, then
    //! persisted history when the filter says "maybe seen". Neither is the arbiter of
    //! concurrent requests: the EventStore's append is.
    pub use crate::runtime::idempotency::{
        BloomIdempotencyChecker, BloomIdempotencyCheckerProvider, DefaultRequestIdChecker,
        EventStoreRequestIdExistenceChecker, IdempotencyChecker, IdempotencyCheckerProvider,
        IdempotencyConfig, NoopIdempotencyChecker, NoopRequestIdExistenceChecker, RequestIdCheck,
        RequestIdChecker, RequestIdExistenceChecker,
    };
}

pub mod metrics {
    //! Counters of the command pipeline, read by `/metrics`.
    pub use crate::runtime::metrics::{MetricsSnapshot, PipelineMetrics};
}

pub mod outbox {
    //! Outboxes: rows for the outside world, written once per event in the store's own
    //! database and sent from there at most once each (SPEC DS-2). The portable counterpart
    //! of views: a team writes an [`Outbox`] once, with no SQL and no backend;
    //! [`OutboxProcessor`] records its rows through the view store, [`OutboxDelivery`] sends
    //! them through the effect journal, and [`OutboxSpec`] tests it without a store.
    pub use crate::model::outbox::{row_id, EventMeta, Outbox, OutboxEntry};
    pub use crate::runtime::outbox::{
        outbox_page, outbox_rows, Delivery, DeliveryError, OutboxDelivery, OutboxExpect,
        OutboxProcessor, OutboxSender, OutboxSpec,
    };
}

pub mod pipeline {
    //! One process running every role: a gateway, a processing node and the event dispatch.
    pub use crate::runtime::pipeline::{store_checker, LocalPipeline, LocalPipelineBuilder};
}

pub mod saga {
    //! Sagas: react to events by sending commands through the gateway, with request ids
    //! derived from the event that caused them (SPEC DS-3).
    pub use crate::runtime::saga::{
        saga_request_id, DynSaga, Saga, SagaContext, SagaDelivery, SagaExpect, SagaGiven,
        SagaReply, SagaSpec, SentCommand, StepError, REJECTION_DETAIL,
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
    //! - [`ViewProjection`] runs any `View` as an
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
        apply_update, check_field, Condition, FilterValue, InMemoryViewStore, RecordingViewStore,
        ViewFilter, ViewKeyMismatch, ViewStore, ViewStoreDecorator, ViewStoreError,
        ViewStoreMethod, ViewUpdate, MAX_FIELD_LEN,
    };
    pub use crate::model::view::{View, ViewKey, ViewRow};
    pub use crate::runtime::view::{
        snapshot_view, view, MaterializedSnapshots, ViewExpect, ViewOutOfOrder, ViewProjection,
        ViewSpec, MATERIALIZED_SNAPSHOTS,
    };
}

pub use contracts::stores::Stores;
pub use model::aggregate::DomainError;
pub use model::aggregate_id::{
    check_aggregate_id, check_request_id, group_by_aggregate, AggregateId, NamedAggregate,
    DEFAULT_TENANT_ID, MAX_AGGREGATE_ID_BYTES,
};
pub use model::command::{CommandMessage, CommandResult, CommandStage};
pub use model::error::BoxError;
pub use model::error_code::ErrorCode;
pub use model::event::{DomainEvent, DomainEventStream};
pub use wow_macros::{Command, Event};

/// The crates a domain's payloads derive from, at the versions wow-core is built with: a
/// domain crate writes `use wow_core::schemars;` for `#[derive(schemars::JsonSchema)]` (the
/// schemas of `/openapi.json`), and names `validator` (or this re-export, with
/// `#[validate(crate = "wow_core::validator")]`) for its payloads' rules. Nothing else: the
/// server, the backends and axum are chosen in the service's `main`, through `wow-service`.
pub use schemars;
/// See [`schemars`]: the validation rules of a command's payload.
pub use validator;
