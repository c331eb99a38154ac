//! Views as projections: any [`View`](wow_core::view::View) or
//! [`MultiStreamView`](wow_core::view::MultiStreamView) run as an event consumer over any
//! [`ViewStore`](wow_core::view::ViewStore), the materialized snapshots every aggregate gets,
//! and the generations a view is rebuilt in beside itself.

pub(crate) mod consumed;
mod generation;
mod materialized;
mod materialized_store;
mod multi_stream;
mod projection;
mod rebuild;

pub use generation::{
    generation_name, refresh_generations, Generation, GenerationConflict, GenerationalViews,
    ViewGenerations, GENERATIONS_VIEW, REFRESH_EVERY,
};
pub use materialized::{
    regenerate_snapshot, snapshot_view, MaterializedSnapshots, MATERIALIZED_SNAPSHOTS,
};
pub use materialized_store::MaterializedSnapshotStore;
pub use multi_stream::MultiStreamProjection;
pub use projection::{ViewOutOfOrder, ViewProjection};
pub use rebuild::{RebuildError, RebuildProgress, RebuildState, RebuildableView, ViewRebuilds};
