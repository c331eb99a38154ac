mod model;
mod row;

pub use model::View;
pub use row::{ViewKey, ViewRow};
