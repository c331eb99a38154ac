//! Views: the `View` trait a team implements (a typed fold of one aggregate's events) and the
//! rows a view store keeps.

mod model;
mod row;

pub use model::View;
pub use row::{ViewKey, ViewRow};
