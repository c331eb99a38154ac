mod filter;
mod in_memory;
mod store;

pub use filter::{check_field, Condition, FilterValue, ViewFilter, MAX_FIELD_LEN};
pub use in_memory::InMemoryViewStore;
pub use store::{apply_update, ViewKeyMismatch, ViewStore, ViewStoreError, ViewUpdate};
