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

mod multi;
mod spec;

pub use multi::{EventMeta, FoldOf, MultiStreamView, RowChange, RowOf, ViewInputs};

pub use spec::{ViewExpect, ViewSpec};
pub use wow_contracts::view::{
    apply_update, check_field, view, Condition, FilterValue, InMemoryViewStore, RecordingViewStore,
    ViewFilter, ViewKeyMismatch, ViewStore, ViewStoreDecorator, ViewStoreError, ViewStoreMethod,
    ViewUpdate, MAX_FIELD_LEN,
};
pub use wow_model::view::{View, ViewKey, ViewRow};
