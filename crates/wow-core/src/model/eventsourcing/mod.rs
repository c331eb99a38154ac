mod decision;

pub use decision::{is_recorded_rejection, RejectionRecord, RequestDecision, RequestRecord};
