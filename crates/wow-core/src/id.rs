//! Identifiers and time, taken through traits so that tests and the simulation can fix
//! them.
pub use wow_model::id::{
    exact_now_millis, new_id, now_millis, Clock, IdGenerator, ManualClock, SystemClock,
    UuidV7IdGenerator,
};
