//! Deadlines (SPEC DM-2): a command scheduled for a time, kept as a row written with the stream
//! that scheduled it, fired by a scheduler through the gateway.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::aggregate_id::AggregateId;
use crate::model::command::CommandBody;

/// The longest deadline name, in bytes.
pub const MAX_DEADLINE_NAME_LEN: usize = 64;

/// A command an aggregate's state says must reach it at a time: the order that expires unless
/// it is paid. Named, so that the state can move or drop it later (a paid order no longer
/// lists its expiry, and the append that pays it cancels the row).
#[derive(Debug, Clone, PartialEq)]
pub struct Deadline<C> {
    /// The deadline's name, unique within its aggregate (`expire`, `remind`).
    pub name: String,
    /// When the command becomes due, in milliseconds since the Unix epoch.
    pub due_at: i64,
    /// The command sent to the aggregate when it is due.
    pub command: C,
}

impl<C> Deadline<C> {
    /// The deadline `name`: `command` is sent to the aggregate at `due_at` (milliseconds since
    /// the Unix epoch).
    pub fn new(name: impl Into<String>, due_at: i64, command: C) -> Self {
        Self {
            name: name.into(),
            due_at,
            command,
        }
    }
}

/// One scheduled command as a store keeps it: who scheduled it, when it is due, what it sends
/// to whom, and the request id it is sent with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledCommand {
    /// The aggregate whose stream scheduled it; with `name`, the row's key. Its tenant is
    /// the row's tenant, and in distributed mode its partition's owner fires it.
    pub owner: AggregateId,
    /// The deadline's name, unique within its owner.
    pub name: String,
    /// When it becomes due, in milliseconds since the Unix epoch.
    pub due_at: i64,
    /// The aggregate the command is for.
    pub target: AggregateId,
    /// The command's name.
    pub command: String,
    /// The command's body.
    pub body: Value,
    /// The request id the command is sent with, derived from the schedule (the owner, the
    /// name and the version of the stream that scheduled it), so firing twice takes effect
    /// once and a deadline scheduled again later is a new request.
    pub request_id: String,
}

impl ScheduledCommand {
    /// Whether `other` is the same schedule: same due time, command and target (the request
    /// id aside, which names the stream that wrote it).
    pub fn same_schedule(&self, other: &ScheduledCommand) -> bool {
        self.name == other.name
            && self.due_at == other.due_at
            && self.target == other.target
            && self.command == other.command
            && self.body == other.body
    }
}

/// What an append does to one of its aggregate's deadlines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "camelCase")]
// A decision changes one or two deadlines at most, and a schedule is the common change: boxing
// it would cost an allocation for nothing.
#[allow(clippy::large_enum_variant)]
pub enum DeadlineChange {
    /// Write the row, replacing any of the same owner and name.
    Schedule(ScheduledCommand),
    /// Delete the owner's row of this name, if there is one.
    Cancel {
        /// The deadline's name.
        name: String,
    },
}

impl DeadlineChange {
    /// The deadline's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Schedule(row) => &row.name,
            Self::Cancel { name } => name,
        }
    }
}

/// The request id an aggregate's deadline is fired with: derived from the schedule (its name
/// and the version of the stream that wrote it), so that the same schedule always fires with
/// the same one, and a schedule written again by a later stream with another. Request ids are
/// kept per aggregate, and the deadline is the aggregate's own; at most 95 bytes.
pub fn deadline_request_id(name: &str, version: u64) -> String {
    format!("deadline/{name}/{version}")
}

/// Checks a deadline's name: 1 to [`MAX_DEADLINE_NAME_LEN`] bytes of letters, digits, `-`,
/// `_`, `.` and `/`.
pub fn check_deadline_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_DEADLINE_NAME_LEN {
        return Err(format!(
            "a deadline's name must be 1 to {MAX_DEADLINE_NAME_LEN} bytes"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
    {
        return Err(format!(
            "deadline name `{name}` may hold only letters, digits, `-`, `_`, `.` and `/`"
        ));
    }
    Ok(())
}

/// The rows `owner`'s deadlines `before` and `after` a decision call for, as changes: each
/// deadline gone is cancelled, each new or moved one scheduled (with the request id of the
/// stream at `version` that writes it), each unchanged one left alone. In name order.
pub fn deadline_changes<C: CommandBody>(
    owner: &AggregateId,
    version: u64,
    before: &[Deadline<C>],
    after: &[Deadline<C>],
) -> Result<Vec<DeadlineChange>, serde_json::Error> {
    let row = |deadline: &Deadline<C>| -> Result<ScheduledCommand, serde_json::Error> {
        Ok(ScheduledCommand {
            owner: owner.clone(),
            name: deadline.name.clone(),
            due_at: deadline.due_at,
            target: owner.clone(),
            command: deadline.command.command_name().to_owned(),
            body: deadline.command.to_body()?,
            request_id: deadline_request_id(&deadline.name, version),
        })
    };
    let mut changes = Vec::new();
    for gone in before
        .iter()
        .filter(|b| !after.iter().any(|a| a.name == b.name))
    {
        changes.push(DeadlineChange::Cancel {
            name: gone.name.clone(),
        });
    }
    for deadline in after {
        let scheduled = row(deadline)?;
        let unchanged = match before.iter().find(|b| b.name == deadline.name) {
            Some(earlier) => row(earlier)?.same_schedule(&scheduled),
            None => false,
        };
        if !unchanged {
            changes.push(DeadlineChange::Schedule(scheduled));
        }
    }
    changes.sort_by(|a, b| a.name().cmp(b.name()));
    changes.dedup_by(|a, b| a.name() == b.name());
    Ok(changes)
}

/// Where the scheduler stands: how many deadlines are pending, and the earliest due time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadlineBacklog {
    /// Pending deadlines, in every tenant.
    pub pending: u64,
    /// The earliest due time among them, if any.
    pub next_due_at: Option<i64>,
}
