//! The aggregates a service runs, by name.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::aggregate::Aggregate;
use crate::model::error_code::ErrorCode;
use crate::runtime::aggregate::{AggregateRuntime, TypedAggregateRuntime};

/// Two aggregates were registered under one name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an aggregate named `{0}` is registered already")]
pub struct DuplicateAggregateName(pub String);

/// No aggregate of that name is registered: answered `NotFound` (HTTP 404).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no aggregate named `{0}`")]
pub struct UnknownAggregate(pub String);

impl UnknownAggregate {
    /// The code a result reports for it.
    pub fn error_code(&self) -> ErrorCode {
        ErrorCode::NotFound
    }
}

/// The aggregates of a service, each behind its JSON runtime, looked up by aggregate name.
#[derive(Debug, Clone, Default)]
pub struct AggregateRegistry {
    runtimes: BTreeMap<String, Arc<dyn AggregateRuntime>>,
}

impl AggregateRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `A`; a second aggregate with the same name is an error.
    pub fn register<A: Aggregate>(&mut self) -> Result<&mut Self, DuplicateAggregateName> {
        self.register_runtime(Arc::new(TypedAggregateRuntime::<A>::new()))
    }

    /// Registers an aggregate runtime; a second one with the same name is an error.
    pub fn register_runtime(
        &mut self,
        runtime: Arc<dyn AggregateRuntime>,
    ) -> Result<&mut Self, DuplicateAggregateName> {
        let name = runtime.named_aggregate().aggregate_name.clone();
        if self.runtimes.contains_key(&name) {
            return Err(DuplicateAggregateName(name));
        }
        self.runtimes.insert(name, runtime);
        Ok(self)
    }

    /// The runtime of the aggregate named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn AggregateRuntime>> {
        self.runtimes.get(name)
    }

    /// The runtime of the aggregate named `name`, or why there is none.
    pub fn find(&self, name: &str) -> Result<&Arc<dyn AggregateRuntime>, UnknownAggregate> {
        self.runtimes
            .get(name)
            .ok_or_else(|| UnknownAggregate(name.to_owned()))
    }

    /// Every registered aggregate, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn AggregateRuntime>> {
        self.runtimes.values()
    }
}
