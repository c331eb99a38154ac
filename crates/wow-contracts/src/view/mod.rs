//! The view store contract: one row per (view, tenant, aggregate id), written with its
//! processed-message record in one transaction (SPEC DS-2), loaded by key and listed by a
//! filter; its in-memory reference, forwarding base and recording wrapper.

#[macro_use]
mod methods;

mod decorator;
mod filter;
mod in_memory;
mod read;
mod recording;
mod store;

pub use decorator::ViewStoreDecorator;
pub use filter::{check_field, Condition, FilterValue, ViewFilter, MAX_FIELD_LEN};
pub use in_memory::InMemoryViewStore;
pub use read::view;
pub use recording::{RecordingViewStore, ViewStoreMethod};
pub use store::{apply_update, ViewKeyMismatch, ViewStore, ViewStoreError, ViewUpdate};
