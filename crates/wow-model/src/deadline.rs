//! Deadlines (SPEC DM-2): a command scheduled for a time, kept as a row written with the stream
//! that scheduled it, fired by a scheduler through the gateway.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::aggregate::AggregateScope;
use crate::aggregate_id::AggregateId;
use crate::command::CommandBody;

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
    /// The owner and space the command acts for when it fires (SPEC TN-2): a saga's deadline
    /// is held to the owner and space of the event the saga reacted to, as its commands sent
    /// at once are, so the node refuses it for another owner's aggregate. `None` for an
    /// aggregate's own deadline and for a saga that acts across owners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_to: Option<AggregateScope>,
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
            held_to: None,
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

/// A pending deadline as the scheduler and the operators see it: its schedule, and where its
/// firing stands (SPEC DM-2, DM-6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingDeadline {
    /// What was scheduled.
    #[serde(flatten)]
    pub schedule: ScheduledCommand,
    /// When the scheduler may fire it next, in milliseconds since the Unix epoch: its due
    /// time, later after a failed firing (exponential backoff), [`HELD`] once it failed as
    /// often as the scheduler allows (it then waits for an operator or a compensation retry).
    pub fire_at: i64,
    /// How many firings failed transiently since it was scheduled.
    pub attempts: u32,
}

impl PendingDeadline {
    /// A row scheduled just now: due at its due time, no attempt yet.
    pub fn new(schedule: ScheduledCommand) -> Self {
        Self {
            fire_at: schedule.due_at,
            schedule,
            attempts: 0,
        }
    }

    /// Whether it waits for an operator (or a compensation retry) instead of the scheduler.
    pub fn is_held(&self) -> bool {
        self.fire_at == HELD
    }
}

/// The `fire_at` of a row the scheduler no longer fires by itself: it failed as often as the
/// scheduler allows, a compensation record says so, and an operator's re-fire (or that
/// record's retry) sets it due again.
pub const HELD: i64 = i64::MAX;

/// A failed firing of `owner`'s row `name`, which carried `request_id`, as
/// `DeadlineStore::retry_later` (wow-contracts) records it: the row is due again `after` from
/// `from` (the store's now when `None`), or [`HELD`] when `after` is `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailedFiring<'a> {
    /// The aggregate that owns the row.
    pub owner: &'a AggregateId,
    /// The row's name.
    pub name: &'a str,
    /// The request id of the schedule that fired: a row scheduled again since, with another
    /// request id, is left alone.
    pub request_id: &'a str,
    /// How long until the row is due again; `None`: held, no longer fired by the scheduler.
    pub after: Option<std::time::Duration>,
    /// The time `after` counts from, in milliseconds since the Unix epoch; `None`: the
    /// store's now.
    pub from: Option<i64>,
}

impl FailedFiring<'_> {
    /// The row's next `fire_at`: `after` from `from` (from `now()` when `from` is `None`,
    /// `now` called only then), saturating, and always before [`HELD`]; [`HELD`] when `after`
    /// is `None`.
    pub fn fire_at(&self, now: impl FnOnce() -> i64) -> i64 {
        match self.after {
            Some(after) => self
                .from
                .unwrap_or_else(now)
                .saturating_add(i64::try_from(after.as_millis()).unwrap_or(i64::MAX))
                .min(HELD - 1),
            None => HELD,
        }
    }
}

/// The partitions a scheduler fires: those of `owned` among `count` (a processor's leases in
/// the distributed mode). A row belongs to the partition of its owner aggregate
/// ([`partition_of`]), the same partition its commands go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionFilter {
    /// How many partitions there are (at least 1).
    pub count: u32,
    /// The partitions this scheduler holds.
    pub owned: Vec<u32>,
}

impl PartitionFilter {
    /// 2^64 mod `count` (at least 1): what a store that keeps [`owner_hash`] as a signed
    /// 64-bit integer adds to a negative hash's remainder to get the unsigned hash's, so that
    /// its SQL places a row in the partition [`contains_hash`](Self::contains_hash) does.
    pub fn signed_hash_wrap(count: u32) -> i64 {
        i64::try_from((1u128 << 64) % u128::from(count.max(1))).unwrap_or(0)
    }

    /// Whether `owner`'s rows are in one of the owned partitions.
    pub fn contains(&self, owner: &AggregateId) -> bool {
        self.owned.contains(&partition_of(owner, self.count))
    }

    /// Whether a row whose owner hashes to `hash` ([`owner_hash`]) is in one of them.
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.owned
            .contains(&((hash % u64::from(self.count.max(1))) as u32))
    }
}

/// The stable 64-bit hash of an aggregate (tenant, aggregate name, id) that places it in a
/// partition: the same in every process and every build. Stores keep it with each deadline row
/// so that a scheduler reads only its own partitions' rows.
pub fn owner_hash(owner: &AggregateId) -> u64 {
    aggregate_hash(&owner.tenant_id, &owner.aggregate_name, &owner.id)
}

/// [`owner_hash`] of the aggregate (tenant, aggregate name, id), from its parts.
pub fn aggregate_hash(tenant_id: &str, aggregate_name: &str, id: &str) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    // Each part ends with a byte no part holds, so ("ab", "c") and ("a", "bc") differ.
    for part in [tenant_id, aggregate_name, id] {
        hasher.update(part.as_bytes());
        hasher.update(&[0xff]);
    }
    hasher.digest()
}

/// The partition of `aggregate` among `count` (at least 1): where its commands go in the
/// distributed mode, and which processor fires the deadlines it owns.
pub fn partition_of(aggregate: &AggregateId, count: u32) -> u32 {
    (owner_hash(aggregate) % u64::from(count.max(1))) as u32
}

/// What a scheduler's pass asks the store for (SPEC DM-6): the rows it may fire now, shared
/// fairly across tenants, of its own partitions only, so that one tenant's or partition's
/// backlog and one stuck row never delay another's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueQuery {
    /// Judges "due" at this time; `None`: by the store's own clock (the database's on
    /// PostgreSQL), so every process fires by one clock whatever its own says.
    pub at: Option<i64>,
    /// The most rows in all.
    pub limit: usize,
    /// The most rows of one tenant. Each tenant's earliest rows come first, and no tenant gets
    /// its (n+1)th row before every tenant with due rows got its nth, as far as `limit` goes.
    pub per_tenant: usize,
    /// Only rows whose owner is in these partitions; `None`: all.
    pub partitions: Option<PartitionFilter>,
}

impl DueQuery {
    /// Up to `limit` rows due at `at`, of every tenant and partition, earliest first.
    pub fn at(at: i64, limit: usize) -> Self {
        Self {
            at: Some(at),
            limit,
            per_tenant: limit,
            partitions: None,
        }
    }

    /// Up to `limit` rows due by the store's clock, at most `per_tenant` of one tenant.
    pub fn by_store_clock(limit: usize, per_tenant: usize) -> Self {
        Self {
            at: None,
            limit,
            per_tenant: per_tenant.max(1),
            partitions: None,
        }
    }

    /// Only the rows of `partitions`.
    pub fn in_partitions(mut self, partitions: PartitionFilter) -> Self {
        self.partitions = Some(partitions);
        self
    }
}

/// Picks from `candidates` (each tenant's due rows, each list earliest first) what a
/// [`DueQuery`] answers: round by round one more row of each tenant, each round in due order,
/// up to `limit`. Stores that read each tenant's rows on their own share this step.
pub fn share_across_tenants(
    candidates: Vec<Vec<PendingDeadline>>,
    per_tenant: usize,
    limit: usize,
) -> Vec<PendingDeadline> {
    let mut ranked: Vec<(usize, PendingDeadline)> = candidates
        .into_iter()
        .flat_map(|rows| rows.into_iter().take(per_tenant.max(1)).enumerate())
        .collect();
    ranked.sort_by(|(rank_a, a), (rank_b, b)| {
        rank_a.cmp(rank_b).then_with(|| {
            (a.fire_at, &a.schedule.owner.tenant_id).cmp(&(b.fire_at, &b.schedule.owner.tenant_id))
        })
    });
    ranked.truncate(limit);
    let mut rows: Vec<PendingDeadline> = ranked.into_iter().map(|(_, row)| row).collect();
    rows.sort_by_key(|row| row.fire_at);
    rows
}

/// The delay before the `attempts`th retry of a firing that failed: `base` doubled per
/// attempt, at most `max`.
pub fn backoff(
    base: std::time::Duration,
    max: std::time::Duration,
    attempts: u32,
) -> std::time::Duration {
    let factor = 1u32
        .checked_shl(attempts.saturating_sub(1).min(30))
        .unwrap_or(u32::MAX);
    base.saturating_mul(factor).min(max)
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
