mod materialized;
mod projection;
mod spec;

pub use materialized::{snapshot_view, MaterializedSnapshots, MATERIALIZED_SNAPSHOTS};
pub use projection::{view, ViewOutOfOrder, ViewProjection};
pub use spec::{ViewExpect, ViewSpec};
