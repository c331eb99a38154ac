//! Which function signalled a result: Wow's `FunctionInfo` (`{functionKind, contextName,
//! processorName, name}`), and the part of one a wait names.

use serde::{Deserialize, Serialize};

/// What kind of function signalled, as Wow names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FunctionKind {
    /// A command handler (the gateway at `SENT`, the aggregate at `PROCESSED`).
    Command,
    /// An aggregate's event sourcing.
    Sourcing,
    /// An event consumer: a projection, an event processor, a saga.
    Event,
    /// A consumer of state events (the snapshotter).
    StateEvent,
    /// An error handler.
    Error,
}

/// The function that signalled a result: for a downstream stage, one consumer (a projection,
/// an event processor, a saga) by its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionInfo {
    /// What kind of function it is.
    pub function_kind: FunctionKind,
    /// The bounded context it runs in.
    pub context_name: String,
    /// The processor: a consumer's name (a view, an outbox, a saga), an aggregate's name.
    pub processor_name: String,
    /// The function of the processor (`onEvent` for a consumer).
    pub name: String,
}

impl FunctionInfo {
    /// The framework's own function that signals `stage` as a whole, named as Wow names its
    /// own (context `wow`): the gateway's `send` at `SENT`, the aggregate's `process` at
    /// `PROCESSED`, the snapshotter's `save` at `SNAPSHOT`, and for a downstream stage the
    /// dispatcher's `complete` (every consumer of the stage handled the stream; Wow has no such
    /// signal). For the results of a stage as a whole, which carry no consumer's function.
    pub fn of_stage(stage: super::CommandStage) -> Self {
        use super::CommandStage;
        let (function_kind, processor_name, name) = match stage {
            CommandStage::Sent => (FunctionKind::Command, "CommandGateway", "send"),
            CommandStage::Processed => (FunctionKind::Command, "SimpleCommandAggregate", "process"),
            CommandStage::Snapshot => (FunctionKind::StateEvent, "SnapshotDispatcher", "save"),
            CommandStage::Projected | CommandStage::EventHandled | CommandStage::SagaHandled => {
                (FunctionKind::Event, "EventDispatcher", "complete")
            }
        };
        Self {
            function_kind,
            context_name: "wow".to_owned(),
            processor_name: processor_name.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The consumer `processor` of `context`, handling events.
    pub fn event(context: impl Into<String>, processor: impl Into<String>) -> Self {
        Self {
            function_kind: FunctionKind::Event,
            context_name: context.into(),
            processor_name: processor.into(),
            name: "onEvent".to_owned(),
        }
    }
}

/// The function a wait is for (Wow's `Command-Wait-Context`, `-Processor` and `-Function`):
/// each part that is not empty must equal the signalling function's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct WaitFunction {
    /// The bounded context, or empty for any.
    pub context: String,
    /// The processor (a consumer's name), or empty for any.
    pub processor: String,
    /// The function's name, or empty for any.
    pub name: String,
}

impl WaitFunction {
    /// The processor named `processor`, in any context.
    pub fn processor(processor: impl Into<String>) -> Self {
        Self {
            processor: processor.into(),
            ..Self::default()
        }
    }

    /// Whether `function` is the one waited for.
    pub fn matches(&self, function: &FunctionInfo) -> bool {
        let part = |wanted: &str, actual: &str| wanted.is_empty() || wanted == actual;
        part(&self.context, &function.context_name)
            && part(&self.processor, &function.processor_name)
            && part(&self.name, &function.name)
    }
}

impl std::fmt::Display for WaitFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let any = |part: &str| {
            if part.is_empty() {
                "*".to_owned()
            } else {
                part.to_owned()
            }
        };
        write!(
            f,
            "{}.{}.{}",
            any(&self.context),
            any(&self.processor),
            any(&self.name)
        )
    }
}
