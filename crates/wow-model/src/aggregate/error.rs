//! Why a command could not be decided on by an aggregate.

use crate::aggregate_id::AggregateId;
use crate::command::{BindingError, BodyDecodeError, CommandKind};
use crate::error_code::ErrorCode;

/// Why decoding, validating or handling a command, or replaying history, failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AggregateError {
    /// The aggregate has no command of that name.
    #[error("aggregate `{aggregate}` has no command `{command}`")]
    UnknownCommand {
        /// The aggregate's name.
        aggregate: String,
        /// The command name asked for.
        command: String,
    },
    /// The body does not have the command's shape (malformed, wrong types, missing fields).
    #[error("the body of `{command}` is invalid: {message}")]
    InvalidBody {
        /// The command's name.
        command: String,
        /// What is wrong, as serde saw it.
        message: String,
        /// The field serde named, if it named one.
        field: Option<String>,
    },
    /// The body broke its own rules; nothing ran and no request id was consumed.
    #[error("the command failed validation: {}", describe(.0))]
    Validation(Vec<BindingError>),
    /// A non-create command for an aggregate that does not exist.
    #[error("aggregate {0} does not exist")]
    NotFound(AggregateId),
    /// A create command for an aggregate that exists.
    #[error("aggregate {0} already exists")]
    AlreadyExists(AggregateId),
    /// The command pinned a version the aggregate is not at.
    #[error("expected aggregate {aggregate_id} at version {expected}, but it is at {actual}")]
    ExpectedVersionConflict {
        /// The aggregate.
        aggregate_id: Box<AggregateId>,
        /// The version the command pinned.
        expected: u64,
        /// The version the aggregate is at.
        actual: u64,
    },
    /// A delete or recover of an aggregate whose type allows neither
    /// ([`Lifecycle::Disabled`](super::Lifecycle::Disabled), SPEC DM-6). Nothing ran and
    /// nothing is recorded.
    #[error("aggregate `{aggregate}` cannot be deleted or recovered: its domain disables both (`{command}` refused)")]
    LifecycleDisabled {
        /// The aggregate's name.
        aggregate: String,
        /// The built-in command refused.
        command: String,
    },
    /// A void command was given to an aggregate; no aggregate handles void commands.
    #[error("`{0}` is a void command: no aggregate handles it")]
    VoidCommand(String),
    /// The domain rejected the command by one of its rules.
    #[error("{message}")]
    Rejected {
        /// The domain's code for the rule.
        code: ErrorCode,
        /// The rejection's message, for a person.
        message: String,
        /// The domain error's fields ([`DomainError::detail`](super::DomainError::detail)),
        /// answered under [`REJECTION_DETAIL`](crate::command::REJECTION_DETAIL) so a
        /// saga can decode the whole typed error; empty for a unit variant.
        detail: serde_json::Map<String, serde_json::Value>,
    },
    /// History could not be replayed: a stored event is unknown or malformed, or versions
    /// are out of order. The history is left as it is.
    #[error("history of {aggregate_id} cannot be replayed at version {version}: {message}")]
    CorruptHistory {
        /// The aggregate.
        aggregate_id: Box<AggregateId>,
        /// The version of the stream that failed.
        version: u64,
        /// What is wrong.
        message: String,
    },
    /// An event or the state could not be turned into JSON.
    #[error("cannot encode: {0}")]
    Encode(#[source] serde_json::Error),
    /// The aggregate's handler panicked (or overflowed) on this command (SPEC PX-1). It is a
    /// fault, not a decision: nothing was recorded, and a resend with the same request id
    /// runs the handler again.
    #[error("the handler of {aggregate_id} panicked: {message}")]
    HandlerPanicked {
        /// The aggregate.
        aggregate_id: Box<AggregateId>,
        /// What the panic said.
        message: String,
    },
    /// A service the handler consulted failed (SPEC DM-3): a transient failure, not a
    /// decision. Nothing was recorded; the resend with the same request id decides again.
    #[error("{0}")]
    ServiceFailed(crate::services::ServiceFailure),
    /// A deadline names a command not declared `#[command(deadline)]` (SPEC DM-6): a fault in
    /// the domain's code, caught at its first decision (and by the test kit), never a
    /// decision. Nothing was recorded.
    #[error("deadline `{deadline}` of aggregate `{aggregate}` fires command `{command}`, which is not declared #[command(deadline)]: only commands a deadline may fire can be scheduled (they are internal unless declared #[command(deadline, public)])")]
    UndeclaredDeadlineCommand {
        /// The aggregate type whose command it names.
        aggregate: String,
        /// The deadline's name.
        deadline: String,
        /// The command it names.
        command: String,
    },
    /// The aggregate's `apply` panicked (or overflowed) on the stream at `version` (SPEC
    /// PX-1): the history cannot be applied by this code. Unlike the other failures of
    /// `apply`, the state it was given is half-applied and must be dropped.
    #[error("apply of {aggregate_id} panicked at version {version}: {message}")]
    ApplyPanicked {
        /// The aggregate.
        aggregate_id: Box<AggregateId>,
        /// The version of the stream whose `apply` panicked.
        version: u64,
        /// What the panic said.
        message: String,
    },
}

fn describe(errors: &[BindingError]) -> String {
    errors
        .iter()
        .map(BindingError::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl AggregateError {
    /// The error code a result reports for this error.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            AggregateError::UnknownCommand { .. } | AggregateError::NotFound(_) => {
                ErrorCode::NotFound
            }
            AggregateError::InvalidBody { .. } => ErrorCode::BadRequest,
            AggregateError::Validation(_) => ErrorCode::CommandValidation,
            AggregateError::AlreadyExists(_) => ErrorCode::DuplicateAggregateId,
            AggregateError::ExpectedVersionConflict { .. } => {
                ErrorCode::CommandExpectVersionConflict
            }
            AggregateError::VoidCommand(_) => ErrorCode::IllegalArgument,
            AggregateError::LifecycleDisabled { .. } => ErrorCode::LifecycleDisabled,
            AggregateError::Rejected { code, .. } => code.clone(),
            AggregateError::ServiceFailed(_) => ErrorCode::ServiceFailed,
            AggregateError::CorruptHistory { .. }
            | AggregateError::UndeclaredDeadlineCommand { .. }
            | AggregateError::Encode(_)
            | AggregateError::HandlerPanicked { .. }
            | AggregateError::ApplyPanicked { .. } => ErrorCode::InternalServerError,
        }
    }

    /// When this says that the aggregate's history cannot be applied by this code (a stream
    /// that does not replay, or an `apply` that panicked): the aggregate whose history it is,
    /// the version of the failing stream and what went wrong. A processing node quarantines
    /// such an aggregate rather than load it again for every command (SPEC PX-1). `None` for
    /// every other error.
    pub fn unappliable_history(&self) -> Option<(&AggregateId, u64, &str)> {
        match self {
            AggregateError::CorruptHistory {
                aggregate_id,
                version,
                message,
            }
            | AggregateError::ApplyPanicked {
                aggregate_id,
                version,
                message,
            } => Some((aggregate_id, *version, message)),
            _ => None,
        }
    }

    /// The binding errors a result reports: the failed rules, or the field a bad body names.
    pub fn binding_errors(&self) -> Vec<BindingError> {
        match self {
            AggregateError::Validation(errors) => errors.clone(),
            AggregateError::InvalidBody {
                field: Some(field),
                message,
                ..
            } => vec![BindingError::new(field.clone(), message.clone())],
            _ => Vec::new(),
        }
    }

    #[doc(hidden)]
    pub fn invalid_body(command: &str, error: &BodyDecodeError) -> Self {
        let (message, path) = match error {
            BodyDecodeError::InvalidBody { source, path, .. } => (source.to_string(), path.clone()),
            other => (other.to_string(), None),
        };
        AggregateError::InvalidBody {
            command: command.to_owned(),
            field: path.or_else(|| field_named_in(&message)),
            message,
        }
    }
}

/// The field serde names in messages such as "missing field `amount`" or "unknown field `x`".
fn field_named_in(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    let field = &message[start..start + len];
    (message.starts_with("missing field") || message.starts_with("unknown field"))
        .then(|| field.to_owned())
}

/// Checks that a command of `kind` may run against an aggregate at `version` (0: missing),
/// and that a pinned `expected` version matches.
pub fn check_command(
    aggregate_id: &AggregateId,
    command_name: &str,
    kind: CommandKind,
    version: u64,
    expected: Option<u64>,
) -> Result<(), AggregateError> {
    match kind {
        CommandKind::Void => return Err(AggregateError::VoidCommand(command_name.to_owned())),
        CommandKind::Create if version > 0 => {
            return Err(AggregateError::AlreadyExists(aggregate_id.clone()))
        }
        CommandKind::Normal if version == 0 => {
            return Err(AggregateError::NotFound(aggregate_id.clone()))
        }
        _ => {}
    }
    match expected {
        Some(expected) if expected != version => Err(AggregateError::ExpectedVersionConflict {
            aggregate_id: Box::new(aggregate_id.clone()),
            expected,
            actual: version,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> AggregateId {
        AggregateId::new("bank", "account", "a", "t")
    }

    #[test]
    fn existence_rules_follow_the_command_kind() {
        assert!(matches!(
            check_command(&id(), "deposit", CommandKind::Normal, 0, None),
            Err(AggregateError::NotFound(_))
        ));
        assert!(matches!(
            check_command(&id(), "open", CommandKind::Create, 2, None),
            Err(AggregateError::AlreadyExists(_))
        ));
        assert!(check_command(&id(), "open", CommandKind::Create, 0, None).is_ok());
        assert!(check_command(&id(), "upsert", CommandKind::AllowCreate, 0, None).is_ok());
        assert!(check_command(&id(), "upsert", CommandKind::AllowCreate, 3, None).is_ok());
        assert!(matches!(
            check_command(&id(), "note", CommandKind::Void, 0, None),
            Err(AggregateError::VoidCommand(_))
        ));
    }

    #[test]
    fn a_pinned_version_must_match() {
        let err = check_command(&id(), "deposit", CommandKind::Normal, 3, Some(2)).unwrap_err();
        assert_eq!(err.error_code(), ErrorCode::CommandExpectVersionConflict);
        assert!(check_command(&id(), "deposit", CommandKind::Normal, 3, Some(3)).is_ok());
    }

    #[test]
    fn serde_messages_name_their_field() {
        assert_eq!(
            field_named_in("missing field `amount` at line 1 column 2"),
            Some("amount".into())
        );
        assert_eq!(
            field_named_in("invalid type: string \"x\", expected u64"),
            None
        );
    }
}
