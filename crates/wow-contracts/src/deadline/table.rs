//! The in-memory deadline rows: a map by key and, per tenant, an index by firing time.

use std::collections::{BTreeMap, BTreeSet};

use wow_model::aggregate_id::AggregateId;
use wow_model::deadline::{
    owner_hash, share_across_tenants, DeadlineBacklog, DeadlineChange, DueQuery, PartitionFilter,
    PendingDeadline, ScheduledCommand, HELD,
};

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
/// memory): each change made under the caller's lock, reads of what is due by a per-tenant
/// index on the firing time (so a due read costs what it returns, per tenant).
#[derive(Debug, Default)]
pub struct DeadlineTable {
    rows: BTreeMap<RowKey, PendingDeadline>,
    /// Per tenant: (fire_at, key).
    by_fire: BTreeMap<String, BTreeSet<(i64, RowKey)>>,
    /// (due_at, key), for the backlog's earliest due time.
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

    /// Writes `row`, replacing the owner's row of its name (its attempts start again).
    pub fn schedule(&mut self, row: ScheduledCommand) {
        self.put(PendingDeadline::new(row));
    }

    /// Deletes `owner`'s row `name` when `request_id` is `None` or the row's.
    pub fn delete(&mut self, owner: &AggregateId, name: &str, request_id: Option<&str>) -> bool {
        let key = row_key(owner, name);
        match self.rows.get(&key) {
            Some(row) if request_id.is_none_or(|id| id == row.schedule.request_id) => {
                self.remove(&key);
                true
            }
            _ => false,
        }
    }

    /// What [`DueQuery`] asks, judged at `now` (the query's own time when it names one).
    pub fn due(&self, query: &DueQuery, now: i64) -> Vec<PendingDeadline> {
        let at = query.at.unwrap_or(now);
        let per_tenant = query.per_tenant.max(1);
        let candidates = self
            .by_fire
            .values()
            .map(|index| {
                index
                    .iter()
                    .take_while(|(fire_at, _)| *fire_at <= at)
                    .filter_map(|(_, key)| self.rows.get(key))
                    .filter(|row| {
                        query.partitions.as_ref().is_none_or(|partitions| {
                            partitions.contains_hash(owner_hash(&row.schedule.owner))
                        })
                    })
                    .take(per_tenant)
                    .cloned()
                    .collect()
            })
            .collect();
        share_across_tenants(candidates, per_tenant, query.limit)
    }

    /// Records a failed firing of `owner`'s row `name` carrying `request_id`: due again at
    /// `fire_at` ([`HELD`](wow_model::deadline::HELD) to hold it). Its attempts after, if it was there.
    pub fn retry_at(
        &mut self,
        owner: &AggregateId,
        name: &str,
        request_id: &str,
        fire_at: i64,
    ) -> Option<u32> {
        let key = row_key(owner, name);
        let mut row = self.rows.get(&key)?.clone();
        if row.schedule.request_id != request_id {
            return None;
        }
        row.attempts = row.attempts.saturating_add(1);
        row.fire_at = fire_at;
        let attempts = row.attempts;
        self.put(row);
        Some(attempts)
    }

    /// Makes `owner`'s row `name` due at `now` and lifts a hold.
    pub fn fire_at(&mut self, owner: &AggregateId, name: &str, now: i64) -> bool {
        let Some(mut row) = self.rows.get(&row_key(owner, name)).cloned() else {
            return false;
        };
        row.fire_at = now;
        self.put(row);
        true
    }

    /// Deletes every row named `name` in `tenant`: how many.
    pub fn delete_named(&mut self, tenant: &str, name: &str) -> u64 {
        let keys: Vec<RowKey> = self
            .rows
            .keys()
            .filter(|key| key.0 == tenant && key.3 == name)
            .cloned()
            .collect();
        for key in &keys {
            self.remove(key);
        }
        keys.len() as u64
    }

    /// `owner`'s rows, by name.
    pub fn of(&self, owner: &AggregateId) -> Vec<PendingDeadline> {
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
        let moved: Vec<PendingDeadline> = self
            .rows
            .values()
            .filter(|row| {
                row.schedule.owner.aggregate_name == from
                    || row.schedule.target.aggregate_name == from
            })
            .cloned()
            .collect();
        for mut row in moved.iter().cloned() {
            self.remove(&row_key(&row.schedule.owner, &row.schedule.name));
            if row.schedule.owner.aggregate_name == from {
                to.clone_into(&mut row.schedule.owner.aggregate_name);
            }
            if row.schedule.target.aggregate_name == from {
                to.clone_into(&mut row.schedule.target.aggregate_name);
            }
            self.put(row);
        }
        moved.len() as u64
    }

    /// The earliest `fire_at` of the rows of `partitions` (every partition where `None`),
    /// held rows not counted: what [`DeadlineStore::next_fire_at`](crate::deadline::DeadlineStore::next_fire_at) answers.
    pub fn next_fire_at(&self, partitions: Option<&PartitionFilter>) -> Option<i64> {
        self.by_fire
            .values()
            .filter_map(|index| {
                index
                    .iter()
                    .take_while(|(fire_at, _)| *fire_at < HELD)
                    .filter_map(|(_, key)| self.rows.get(key))
                    .find(|row| {
                        partitions.is_none_or(|partitions| {
                            partitions.contains_hash(owner_hash(&row.schedule.owner))
                        })
                    })
                    .map(|row| row.fire_at)
            })
            .min()
    }

    /// How many rows are pending, and the earliest due time.
    pub fn backlog(&self) -> DeadlineBacklog {
        DeadlineBacklog {
            pending: self.rows.len() as u64,
            next_due_at: self.by_due.first().map(|(due_at, _)| *due_at),
        }
    }

    fn put(&mut self, row: PendingDeadline) {
        let key = row_key(&row.schedule.owner, &row.schedule.name);
        self.remove(&key);
        self.by_fire
            .entry(key.0.clone())
            .or_default()
            .insert((row.fire_at, key.clone()));
        self.by_due.insert((row.schedule.due_at, key.clone()));
        self.rows.insert(key, row);
    }

    fn remove(&mut self, key: &RowKey) {
        if let Some(old) = self.rows.remove(key) {
            self.by_due.remove(&(old.schedule.due_at, key.clone()));
            if let Some(index) = self.by_fire.get_mut(&key.0) {
                index.remove(&(old.fire_at, key.clone()));
                if index.is_empty() {
                    self.by_fire.remove(&key.0);
                }
            }
        }
    }
}
