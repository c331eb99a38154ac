//! The stages a command passes through, in order (SPEC ST-1).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A stage of a command's life, ordered from `Sent` to `SagaHandled`.
///
/// A caller names the stage it waits for; every component that finishes a stage signals it.
/// In JSON and HTTP headers a stage is its upper-case name (`SENT`, `PROCESSED`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CommandStage {
    /// The command bus accepted the command.
    Sent,
    /// The processing node ran the handler and appended (or rejected) the stream.
    Processed,
    /// The snapshot of the new state was saved.
    Snapshot,
    /// The projections applied the stream.
    Projected,
    /// The event processors handled the stream.
    EventHandled,
    /// The sagas handled the stream.
    SagaHandled,
}

impl CommandStage {
    /// Every stage, in order.
    pub const ALL: [CommandStage; 6] = [
        CommandStage::Sent,
        CommandStage::Processed,
        CommandStage::Snapshot,
        CommandStage::Projected,
        CommandStage::EventHandled,
        CommandStage::SagaHandled,
    ];

    /// Whether each consumer of the stage signals it on its own (`PROJECTED`, `EVENT_HANDLED`,
    /// `SAGA_HANDLED`), so that a wait can name one.
    pub fn has_consumer_signals(self) -> bool {
        matches!(
            self,
            CommandStage::Projected | CommandStage::EventHandled | CommandStage::SagaHandled
        )
    }

    /// The stage's upper-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            CommandStage::Sent => "SENT",
            CommandStage::Processed => "PROCESSED",
            CommandStage::Snapshot => "SNAPSHOT",
            CommandStage::Projected => "PROJECTED",
            CommandStage::EventHandled => "EVENT_HANDLED",
            CommandStage::SagaHandled => "SAGA_HANDLED",
        }
    }

    /// Whether reaching `self` means `other` has been passed too (stages are ordered).
    pub fn is_after_or_at(self, other: CommandStage) -> bool {
        self >= other
    }
}

impl fmt::Display for CommandStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The name given is not a stage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown command stage `{0}`; expected one of SENT, PROCESSED, SNAPSHOT, PROJECTED, EVENT_HANDLED, SAGA_HANDLED")]
pub struct UnknownStage(pub String);

impl FromStr for CommandStage {
    type Err = UnknownStage;

    /// Reads a stage by its upper-case name; case is ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CommandStage::ALL
            .into_iter()
            .find(|stage| stage.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownStage(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_are_ordered_as_the_spec_lists_them() {
        let mut sorted = CommandStage::ALL;
        sorted.sort();
        assert_eq!(sorted, CommandStage::ALL);
        assert!(CommandStage::SagaHandled.is_after_or_at(CommandStage::Processed));
        assert!(!CommandStage::Sent.is_after_or_at(CommandStage::Processed));
    }

    #[test]
    fn stage_names_round_trip() {
        for stage in CommandStage::ALL {
            assert_eq!(stage.as_str().parse::<CommandStage>(), Ok(stage));
            assert_eq!(
                serde_json::to_string(&stage).unwrap(),
                format!("\"{}\"", stage.as_str())
            );
        }
        assert_eq!(
            "processed".parse::<CommandStage>(),
            Ok(CommandStage::Processed)
        );
        assert!("DONE".parse::<CommandStage>().is_err());
    }
}
