//! How a crate was compiled, measured from code compiled in it (SPEC PX-1): whether an
//! arithmetic overflow there panics, as PX-1 needs, or wraps silently, as Cargo's
//! default release profile has it. The service refuses to start on a crate that wraps.
//! See [`CrateBuild`] and [`crate_build!`](crate::crate_build).
pub use crate::model::build::CrateBuild;
