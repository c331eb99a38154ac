mod projection;
mod spec;

pub use projection::{view, ViewOutOfOrder, ViewProjection};
pub use spec::{ViewExpect, ViewSpec};
