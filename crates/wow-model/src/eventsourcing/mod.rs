//! The decisions a store records for a request id: appended or rejected, and what a look-up
//! answers about it.

mod decision;

pub use decision::{is_recorded_rejection, RejectionRecord, RequestDecision, RequestRecord};
