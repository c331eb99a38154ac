//! Wow's soft delete, which every aggregate has: the built-in commands that delete and
//! recover an aggregate, and the events they record. A deleted aggregate keeps its history;
//! it refuses every command but `recover` with `IllegalAccessDeletedAggregate`.

/// The command that deletes an aggregate softly (`DELETE /{aggregate}/{id}`).
pub const DELETE_AGGREGATE: &str = "default_delete_aggregate";
/// The command that recovers a deleted aggregate (`PUT /{aggregate}/{id}/recover`).
pub const RECOVER_AGGREGATE: &str = "default_recover_aggregate";
/// The event [`DELETE_AGGREGATE`] records.
pub const AGGREGATE_DELETED: &str = "DefaultAggregateDeleted";
/// The event [`RECOVER_AGGREGATE`] records.
pub const AGGREGATE_RECOVERED: &str = "DefaultAggregateRecovered";
/// The revision of both events.
pub const LIFECYCLE_REVISION: &str = "0.0.1";

/// Whether `name` is one of the built-in commands.
pub fn is_lifecycle_command(name: &str) -> bool {
    name == DELETE_AGGREGATE || name == RECOVER_AGGREGATE
}

/// Whether `name` is one of the built-in events (which no aggregate's `apply` sees).
pub fn is_lifecycle_event(name: &str) -> bool {
    name == AGGREGATE_DELETED || name == AGGREGATE_RECOVERED
}
