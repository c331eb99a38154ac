//! Views as projections: any [`View`](wow_core::view::View) or
//! [`MultiStreamView`](wow_core::view::MultiStreamView) run as an event consumer over any
//! [`ViewStore`](wow_core::view::ViewStore), and the materialized snapshots every aggregate gets.

pub(crate) mod consumed;
mod materialized;
mod multi_stream;
mod projection;

pub use materialized::{snapshot_view, MaterializedSnapshots, MATERIALIZED_SNAPSHOTS};
pub use multi_stream::MultiStreamProjection;
pub use projection::{ViewOutOfOrder, ViewProjection};
