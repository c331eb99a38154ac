//! The in-memory deadline rows: a map by key and an index by due time.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::aggregate_id::AggregateId;
use crate::model::deadline::{DeadlineBacklog, DeadlineChange, ScheduledCommand};

/// Tenant, aggregate name, aggregate id, deadline name.
type RowKey = (String, String, String, String);

fn row_key(owner: &AggregateId, name: &str) -> RowKey {
    (
        owner.tenant_id.clone(),
        owner.aggregate_name.clone(),
        owner.id.clone(),
        name.to_owned(),
    )
}

/// Deadline rows in memory, for the in-memory store (and any store that keeps its rows in
/// memory): each change made under the caller's lock, reads of what is due by the due-time
/// index.
#[derive(Debug, Default)]
pub struct DeadlineTable {
    rows: BTreeMap<RowKey, ScheduledCommand>,
    by_due: BTreeSet<(i64, RowKey)>,
}

impl DeadlineTable {
    /// Makes `owner`'s `changes`.
    pub fn change(&mut self, owner: &AggregateId, changes: &[DeadlineChange]) {
        for change in changes {
            match change {
                DeadlineChange::Schedule(row) => self.schedule(row.clone()),
                DeadlineChange::Cancel { name } => {
                    self.remove(&row_key(owner, name));
                }
            }
        }
    }

    /// Writes `row`, replacing the owner's row of its name.
    pub fn schedule(&mut self, row: ScheduledCommand) {
        let key = row_key(&row.owner, &row.name);
        self.remove(&key);
        self.by_due.insert((row.due_at, key.clone()));
        self.rows.insert(key, row);
    }

    /// Deletes `owner`'s row `name` when `request_id` is `None` or the row's.
    pub fn delete(&mut self, owner: &AggregateId, name: &str, request_id: Option<&str>) -> bool {
        let key = row_key(owner, name);
        match self.rows.get(&key) {
            Some(row) if request_id.is_none_or(|id| id == row.request_id) => {
                self.remove(&key);
                true
            }
            _ => false,
        }
    }

    /// The rows due at `now`, earliest first, at most `limit`.
    pub fn due(&self, now: i64, limit: usize) -> Vec<ScheduledCommand> {
        self.by_due
            .iter()
            .take_while(|(due_at, _)| *due_at <= now)
            .take(limit)
            .filter_map(|(_, key)| self.rows.get(key).cloned())
            .collect()
    }

    /// `owner`'s rows, by name.
    pub fn of(&self, owner: &AggregateId) -> Vec<ScheduledCommand> {
        let start = row_key(owner, "");
        self.rows
            .range(start..)
            .take_while(|(key, _)| {
                key.0 == owner.tenant_id && key.1 == owner.aggregate_name && key.2 == owner.id
            })
            .map(|(_, row)| row.clone())
            .collect()
    }

    /// Moves every row owned by or sent to an aggregate named `from` to the name `to` (an
    /// aggregate's rename).
    pub fn rename(&mut self, from: &str, to: &str) -> u64 {
        let moved: Vec<ScheduledCommand> = self
            .rows
            .values()
            .filter(|row| row.owner.aggregate_name == from || row.target.aggregate_name == from)
            .cloned()
            .collect();
        for mut row in moved.iter().cloned() {
            self.remove(&row_key(&row.owner, &row.name));
            if row.owner.aggregate_name == from {
                to.clone_into(&mut row.owner.aggregate_name);
            }
            if row.target.aggregate_name == from {
                to.clone_into(&mut row.target.aggregate_name);
            }
            self.schedule(row);
        }
        moved.len() as u64
    }

    /// How many rows are pending, and the earliest due time.
    pub fn backlog(&self) -> DeadlineBacklog {
        DeadlineBacklog {
            pending: self.rows.len() as u64,
            next_due_at: self.by_due.first().map(|(due_at, _)| *due_at),
        }
    }

    fn remove(&mut self, key: &RowKey) {
        if let Some(old) = self.rows.remove(key) {
            self.by_due.remove(&(old.due_at, key.clone()));
        }
    }
}
