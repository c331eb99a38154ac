//! The aggregates a service runs, by name.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::aggregate::{AggregateRuntime, TypedAggregateRuntime};
use wow_model::aggregate::Aggregate;
use wow_model::aggregate_id::{AggregateId, NamedAggregate};
use wow_model::error_code::ErrorCode;

/// Two aggregates were registered under one name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an aggregate named `{0}` is registered already")]
pub struct DuplicateAggregateName(pub String);

/// The command names that Wow's query routes take for themselves: `POST
/// /{aggregate}/snapshot/list` is a query, so a command `list` could not be sent to an aggregate
/// whose id is `snapshot` (or `event`). An aggregate with a command of one of these names is
/// refused at registration.
pub const RESERVED_COMMAND_NAMES: [&str; 4] = ["single", "list", "paged", "count"];

/// A command is named like one of Wow's query routes ([`RESERVED_COMMAND_NAMES`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("aggregate `{aggregate}` has a command named `{command}`, which Wow's query routes take (POST /{aggregate}/snapshot/{command}); rename the command (its route name)")]
pub struct ReservedCommandName {
    /// The aggregate.
    pub aggregate: String,
    /// The command.
    pub command: String,
}

/// Why an aggregate was not registered; nothing was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistrationError {
    /// Its name or an alias is taken.
    #[error(transparent)]
    Duplicate(#[from] DuplicateAggregateName),
    /// A command's name is taken by the query routes.
    #[error(transparent)]
    ReservedCommand(#[from] ReservedCommandName),
}

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

/// The aggregates of a service, each behind its JSON runtime, looked up by aggregate name
/// or by one of its former names ([`Aggregate::ALIASES`]).
#[derive(Debug, Clone, Default)]
pub struct AggregateRegistry {
    runtimes: BTreeMap<String, Arc<dyn AggregateRuntime>>,
    /// Former name → today's.
    aliases: BTreeMap<String, String>,
    /// The aggregate names some registered aggregate's decisions read (SPEC DM-5).
    read: BTreeSet<String>,
}

impl AggregateRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `A`; a second aggregate with the same name, or a command named like a query
    /// route, is an error.
    pub fn register<A: Aggregate>(&mut self) -> Result<&mut Self, RegistrationError> {
        self.register_runtime(Arc::new(TypedAggregateRuntime::<A>::new()))
    }

    /// Registers an aggregate runtime; a name or alias already taken (by a name or an alias)
    /// is an error, and nothing is registered then.
    pub fn register_runtime(
        &mut self,
        runtime: Arc<dyn AggregateRuntime>,
    ) -> Result<&mut Self, RegistrationError> {
        let name = runtime.named_aggregate().aggregate_name.clone();
        if let Some(command) = runtime
            .commands()
            .iter()
            .find(|info| RESERVED_COMMAND_NAMES.contains(&info.name))
        {
            return Err(ReservedCommandName {
                aggregate: name,
                command: command.name.to_owned(),
            }
            .into());
        }
        let aliases = runtime.aliases();
        let claimed: Vec<&str> = std::iter::once(name.as_str())
            .chain(aliases.iter().copied())
            .collect();
        for (index, claim) in claimed.iter().enumerate() {
            let taken = self.runtimes.contains_key(*claim)
                || self.aliases.contains_key(*claim)
                || claimed[..index].contains(claim);
            if taken {
                return Err(DuplicateAggregateName((*claim).to_owned()).into());
            }
        }
        for alias in aliases {
            self.aliases.insert((*alias).to_owned(), name.clone());
        }
        self.read.extend(
            runtime
                .reads()
                .iter()
                .map(|named| named.aggregate_name.clone()),
        );
        self.runtimes.insert(name, runtime);
        Ok(self)
    }

    /// Whether a registered aggregate's decisions read the aggregate named `name` under a
    /// condition (SPEC DM-5, [`Aggregate::reads`]): its appends must exclude a concurrent
    /// check of one.
    pub fn is_read_by_others(&self, name: &str) -> bool {
        !self.read.is_empty() && self.read.contains(name)
    }

    /// Each (aggregate, type it reads) whose read type is not registered (SPEC DM-5): a
    /// service that cannot read what its decisions read is refused at assembly.
    pub fn unserved_reads(&self) -> Vec<(String, NamedAggregate)> {
        self.runtimes
            .values()
            .flat_map(|runtime| {
                runtime.reads().iter().filter_map(move |named| {
                    let served = self
                        .runtimes
                        .get(&named.aggregate_name)
                        .is_some_and(|read| {
                            read.named_aggregate().context_name == named.context_name
                        });
                    (!served).then(|| {
                        (
                            runtime.named_aggregate().aggregate_name.clone(),
                            named.clone(),
                        )
                    })
                })
            })
            .collect()
    }

    /// The runtime of the aggregate named `name` (today's name or a former one).
    pub fn get(&self, name: &str) -> Option<&Arc<dyn AggregateRuntime>> {
        self.runtimes.get(name).or_else(|| {
            self.aliases
                .get(name)
                .and_then(|today| self.runtimes.get(today))
        })
    }

    /// The runtime of the aggregate named `name` (today's name or a former one), or why there
    /// is none.
    pub fn find(&self, name: &str) -> Result<&Arc<dyn AggregateRuntime>, UnknownAggregate> {
        self.get(name)
            .ok_or_else(|| UnknownAggregate(name.to_owned()))
    }

    /// Puts today's name in `aggregate_id` when it names the aggregate by a former one; any
    /// other name (today's, an unknown one) is left as it is.
    pub fn use_todays_name(&self, aggregate_id: &mut AggregateId) {
        if let Some(today) = self.aliases.get(&aggregate_id.aggregate_name) {
            aggregate_id.aggregate_name.clone_from(today);
        }
    }

    /// Whether `name` is a former name of a registered aggregate.
    pub fn is_former_name(&self, name: &str) -> bool {
        self.aliases.contains_key(name)
    }

    /// Every (former name, today's name), in former-name order.
    pub fn aliases(&self) -> impl Iterator<Item = (&str, &str)> {
        self.aliases
            .iter()
            .map(|(alias, name)| (alias.as_str(), name.as_str()))
    }

    /// Every registered aggregate, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn AggregateRuntime>> {
        self.runtimes.values()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testing_example::{Counter, Tally};

    #[test]
    fn a_former_name_finds_todays_aggregate() {
        let mut registry = AggregateRegistry::new();
        registry.register::<Tally>().unwrap();
        for name in ["tally", "counter"] {
            let runtime = registry.find(name).unwrap();
            assert_eq!(runtime.named_aggregate().aggregate_name, "tally");
        }
        assert!(registry.find("count").is_err());
        let aliases: Vec<_> = registry.aliases().collect();
        assert_eq!(aliases, [("counter", "tally")]);
    }

    #[test]
    fn a_name_taken_as_an_alias_or_a_name_is_refused() {
        let mut registry = AggregateRegistry::new();
        registry.register::<Counter>().unwrap();
        let refused = registry.register::<Tally>().unwrap_err();
        assert_eq!(refused, DuplicateAggregateName("counter".into()).into());
        assert!(
            registry.get("tally").is_none(),
            "nothing registered on refusal"
        );
    }

    mod listing {
        use serde::{Deserialize, Serialize};

        use crate::testing_example::{Counter, CounterError, CounterEvent, CounterState};
        use wow_model::aggregate::{Aggregate, CommandContext};

        /// A command that lists: named like the query route `list`.
        #[derive(Debug, Clone, wow_core::Command)]
        pub(super) enum ListingCommand {
            /// Lists.
            List(Nothing),
        }

        /// No fields.
        #[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
        pub(super) struct Nothing {}

        #[derive(Debug)]
        pub(super) struct Listing;

        impl Aggregate for Listing {
            const CONTEXT_NAME: &'static str = "demo";
            const AGGREGATE_NAME: &'static str = "listing";
            type State = CounterState;
            type Command = ListingCommand;
            type Event = CounterEvent;
            type Error = CounterError;

            fn handle(
                _: &CounterState,
                _: ListingCommand,
                _: &CommandContext<'_>,
            ) -> Result<Vec<CounterEvent>, CounterError> {
                Ok(Vec::new())
            }

            fn apply(state: &mut CounterState, event: &CounterEvent) {
                Counter::apply(state, event);
            }
        }
    }

    #[test]
    fn a_command_named_like_a_query_route_is_refused() {
        let mut registry = AggregateRegistry::new();
        let refused = registry.register::<listing::Listing>().unwrap_err();
        assert_eq!(
            refused,
            ReservedCommandName {
                aggregate: "listing".into(),
                command: "list".into()
            }
            .into()
        );
        assert!(
            refused.to_string().contains("rename the command"),
            "{refused}"
        );
        assert!(registry.get("listing").is_none());
    }
}
