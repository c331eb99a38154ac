//! Decisions that read other aggregates (SPEC DM-5): the read a handler gets, the condition
//! it leaves on the append, and the reader a node or a test kit supplies.

use std::sync::Mutex;

use futures::future::BoxFuture;

use crate::aggregate::AggregateState;
use crate::aggregate_id::{AggregateId, NamedAggregate};
use crate::services::ServiceFailure;

/// Another aggregate's current state, as a decision read it: from the store (history and
/// snapshot), never from a view.
#[derive(Debug, Clone, PartialEq)]
pub struct Read<S> {
    /// Its state: `Default` when it does not exist.
    pub state: S,
    /// Its version when read: 0 when it does not exist.
    pub version: u64,
    /// Whether it is soft-deleted (SPEC DM-6).
    pub deleted: bool,
}

impl<S> Read<S> {
    /// Whether it exists (has at least one stream), deleted or not.
    pub fn exists(&self) -> bool {
        self.version > 0
    }

    /// Whether it exists and is not deleted: what "there is such a room" means to most
    /// domains.
    pub fn is_live(&self) -> bool {
        self.exists() && !self.deleted
    }
}

/// "Append only while `aggregate_id` is at `version`": the condition a conditional read
/// leaves on its decision's append (SPEC DM-5). Every store checks it inside the append's
/// atomic write; when the aggregate moved, the append is refused
/// (`EventStoreError::ConditionFailed`) and the node decides again. Version 0 means "while it
/// still does not exist".
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VersionCondition {
    /// The aggregate read (of the appending aggregate's tenant).
    pub aggregate_id: AggregateId,
    /// The version it was read at.
    pub version: u64,
}

/// What reads other aggregates' current state for a decision: the node's store, or the test
/// kit's given histories. Implemented by the framework; a team calls
/// [`CommandContext::read`](crate::aggregate::CommandContext::read).
pub trait AggregateReader: Send + Sync {
    /// The current state of `aggregate_id` (version 0 when it does not exist). A store that
    /// cannot answer is a [`ServiceFailure`]: transient, nothing is recorded.
    fn read_state<'a>(
        &'a self,
        aggregate_id: &'a AggregateId,
    ) -> BoxFuture<'a, Result<AggregateState, ServiceFailure>>;
}

/// The reads of one decision: the reader, the aggregate types the deciding aggregate declared
/// it reads ([`Aggregate::reads`](crate::aggregate::Aggregate::reads)), and the conditions
/// its reads left, for the append.
pub struct AggregateReads<'a> {
    reader: &'a dyn AggregateReader,
    declared: &'a [NamedAggregate],
    conditions: Mutex<Vec<VersionCondition>>,
}

impl std::fmt::Debug for AggregateReads<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregateReads")
            .field("declared", &self.declared)
            .finish_non_exhaustive()
    }
}

impl<'a> AggregateReads<'a> {
    /// Reads through `reader`, of the types in `declared` only.
    pub fn new(reader: &'a dyn AggregateReader, declared: &'a [NamedAggregate]) -> Self {
        Self {
            reader,
            declared,
            conditions: Mutex::new(Vec::new()),
        }
    }

    /// Reads `aggregate_id`; when `conditional`, the append will hold only while it stays at
    /// the version read.
    pub(crate) async fn read(
        &self,
        aggregate_id: &AggregateId,
        conditional: bool,
    ) -> Result<AggregateState, ServiceFailure> {
        let declared = self.declared.iter().any(|named| {
            named.aggregate_name == aggregate_id.aggregate_name
                && named.context_name == aggregate_id.context_name
        });
        if !declared {
            return Err(ServiceFailure::new(
                aggregate_id.aggregate_name.as_str(),
                format!(
                    "the deciding aggregate does not declare that it reads `{}`: name it in its `Aggregate::reads`",
                    aggregate_id.aggregate_name
                ),
            ));
        }
        let state = self.reader.read_state(aggregate_id).await?;
        if conditional {
            let condition = VersionCondition {
                aggregate_id: aggregate_id.clone(),
                version: state.version(),
            };
            let mut conditions = self
                .conditions
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if !conditions.contains(&condition) {
                conditions.push(condition);
            }
        }
        Ok(state)
    }

    /// The conditions the decision's reads left, in the order first read, for the append
    /// of `deciding`: a read of the deciding aggregate itself leaves none (its own version
    /// is the append's own check).
    pub fn conditions_for(&self, deciding: &AggregateId) -> Vec<VersionCondition> {
        self.conditions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .filter(|condition| &condition.aggregate_id != deciding)
            .cloned()
            .collect()
    }
}
