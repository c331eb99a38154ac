//! How a command relates to its aggregate's existence.

use serde::{Deserialize, Serialize};

/// Whether a command creates its aggregate, may create it, acts on an existing one, or is
/// handled by no aggregate at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CommandKind {
    /// Acts on an aggregate that exists; to a missing aggregate it is `NotFound`.
    #[default]
    Normal,
    /// Creates the aggregate; it appends version 1 and conflicts if the aggregate exists.
    Create,
    /// Creates the aggregate when it is missing, acts on it otherwise.
    AllowCreate,
    /// Handled by no aggregate (SPEC RQ-12): nothing is appended, only `SENT` can be awaited,
    /// and its consumers see it at least once.
    Void,
}

impl CommandKind {
    /// Whether a command of this kind may run against an aggregate that does not exist yet.
    pub fn may_create(self) -> bool {
        matches!(self, CommandKind::Create | CommandKind::AllowCreate)
    }
}
