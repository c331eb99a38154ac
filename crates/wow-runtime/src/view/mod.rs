//! Views as projections: any [`View`](wow_core::view::View) run as an event consumer over any
//! [`ViewStore`](wow_core::view::ViewStore), and the materialized snapshots every aggregate gets.

mod materialized;
mod projection;

pub use materialized::{snapshot_view, MaterializedSnapshots, MATERIALIZED_SNAPSHOTS};
pub use projection::{ViewOutOfOrder, ViewProjection};
