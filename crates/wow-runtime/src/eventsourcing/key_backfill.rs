//! The backfill of unique keys (SPEC DM-1): an aggregate type that starts declaring keys
//! ([`Aggregate::unique_keys`](wow_core::aggregate::Aggregate::unique_keys)) while it has
//! aggregates leaves their values unclaimed, since only decisions claim keys.
//! [`claim_declared_keys`] folds each of those aggregates and claims the keys its state holds
//! ([`KeyIndex::claim_keys`]), where they are free or already its own, and reports the values
//! another aggregate holds instead of stopping.

use wow_core::aggregate::AggregateRuntime;
use wow_core::eventsourcing::{EventStore, EventStoreError, KeysToClaim, SnapshotStore};
use wow_core::unique_key::{KeyClaim, UniqueKey};
use wow_core::{AggregateId, NamedAggregate};

use super::repository::{load_aggregate, LoadError};

/// How many aggregate ids one page of the scan reads.
const PAGE: usize = 500;

/// A key an aggregate's state holds and another aggregate holds in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyConflict {
    /// The key, as the claimant's state declares it.
    pub key: UniqueKey,
    /// The aggregate whose state declares the key and could not claim it.
    pub claimant: AggregateId,
    /// The aggregate that holds it.
    pub holder: AggregateId,
}

/// What [`claim_declared_keys`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyBackfill {
    /// The aggregates folded, of every type that declares keys.
    pub aggregates: u64,
    /// The keys claimed now.
    pub claimed: u64,
    /// The keys their aggregates held already (all of them, on a second run).
    pub held: u64,
    /// The keys another aggregate holds, each with both aggregates.
    pub conflicts: Vec<KeyConflict>,
}

/// Where a backfill stands, handed to its progress callback after each aggregate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBackfillProgress {
    /// The aggregate type being folded.
    pub aggregate: NamedAggregate,
    /// How many aggregates of that type there are, of every tenant.
    pub aggregates_total: u64,
    /// How many of them are folded and their keys claimed.
    pub aggregates_done: u64,
    /// What the backfill did so far, over every type.
    pub claimed: u64,
    /// Conflicts found so far, over every type.
    pub conflicts: u64,
}

/// Why a backfill stopped (a conflict does not stop it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyBackfillError {
    /// The event store failed (listing aggregates or claiming keys).
    #[error("the event store failed: {0}")]
    Store(#[from] EventStoreError),
    /// An aggregate's history does not fold.
    #[error("{aggregate_id} does not load: {source}")]
    Load {
        /// The aggregate.
        aggregate_id: AggregateId,
        /// Why.
        #[source]
        source: LoadError,
    },
    /// The aggregate's `unique_keys` panicked on its state.
    #[error("the keys of {aggregate_id} cannot be read: {message}")]
    Keys {
        /// The aggregate.
        aggregate_id: AggregateId,
        /// The panic's message.
        message: String,
    },
}

/// Claims the keys every aggregate of the types in `runtimes` that declare keys
/// ([`AggregateRuntime::declares_keys`]) holds today: each aggregate of every tenant is folded
/// (from its snapshot in `snapshots`, when usable, then its events) and its keys claimed at its
/// version with [`KeyIndex::claim_keys`](wow_core::eventsourcing::KeyIndex::claim_keys), reservation times included. A deleted aggregate
/// holds none. A key free (or a lapsed reservation) is claimed, one the aggregate holds is left
/// alone, and one another aggregate holds is reported in [`KeyBackfill::conflicts`] and left
/// alone: resolve it in the domain (rename one value) and run again. Running it twice claims
/// nothing the second time.
///
/// `progress` is called once per type when its aggregates are counted and after each
/// aggregate. It runs beside live traffic: a decision made meanwhile claims its keys in its
/// own append, and the store decides between the two.
///
/// # Errors
///
/// [`KeyBackfillError`] when the store fails, an aggregate's history does not fold, or its
/// `unique_keys` panics; the keys claimed until then stay claimed, and a rerun goes on.
pub async fn claim_declared_keys(
    runtimes: &[&dyn AggregateRuntime],
    store: &dyn EventStore,
    snapshots: Option<&dyn SnapshotStore>,
    progress: &(dyn Fn(&KeyBackfillProgress) + Send + Sync),
) -> Result<KeyBackfill, KeyBackfillError> {
    let mut done = KeyBackfill::default();
    for runtime in runtimes.iter().filter(|runtime| runtime.declares_keys()) {
        let named = runtime.named_aggregate().clone();
        let total = count(store, &named).await?;
        let mut step = KeyBackfillProgress {
            aggregate: named.clone(),
            aggregates_total: total,
            aggregates_done: 0,
            claimed: done.claimed,
            conflicts: done.conflicts.len() as u64,
        };
        progress(&step);
        let mut after: Option<AggregateId> = None;
        loop {
            let page = store
                .scan_aggregate_ids(&named, after.as_ref(), PAGE)
                .await?;
            for aggregate_id in &page {
                claim_one(*runtime, store, snapshots, aggregate_id, &mut done).await?;
                done.aggregates += 1;
                step.aggregates_done += 1;
                step.claimed = done.claimed;
                step.conflicts = done.conflicts.len() as u64;
                progress(&step);
            }
            if page.len() < PAGE {
                break;
            }
            after = page.last().cloned();
        }
    }
    Ok(done)
}

/// How many aggregates of `named` the store holds, of every tenant.
async fn count(store: &dyn EventStore, named: &NamedAggregate) -> Result<u64, EventStoreError> {
    let (mut total, mut after) = (0_u64, None::<AggregateId>);
    loop {
        let page = store
            .scan_aggregate_ids(named, after.as_ref(), PAGE)
            .await?;
        total += page.len() as u64;
        if page.len() < PAGE {
            return Ok(total);
        }
        after = page.last().cloned();
    }
}

/// Folds `aggregate_id` and claims the keys its state holds, counting what happened in `done`.
async fn claim_one(
    runtime: &dyn AggregateRuntime,
    store: &dyn EventStore,
    snapshots: Option<&dyn SnapshotStore>,
    aggregate_id: &AggregateId,
    done: &mut KeyBackfill,
) -> Result<(), KeyBackfillError> {
    let state = load_aggregate(runtime, store, snapshots, aggregate_id)
        .await
        .map_err(|source| KeyBackfillError::Load {
            aggregate_id: aggregate_id.clone(),
            source,
        })?;
    let keys = runtime
        .held_keys(&state)
        .map_err(|message| KeyBackfillError::Keys {
            aggregate_id: aggregate_id.clone(),
            message,
        })?;
    if keys.is_empty() || state.version() == 0 {
        return Ok(());
    }
    let claims = store
        .claim_keys(KeysToClaim {
            aggregate_id,
            version: state.version(),
            keys: &keys,
        })
        .await?;
    for (key, claim) in keys.into_iter().zip(claims) {
        match claim {
            KeyClaim::Claimed => done.claimed += 1,
            KeyClaim::Held => done.held += 1,
            KeyClaim::Taken(holder) => {
                tracing::warn!(%aggregate_id, holder = %holder.aggregate_id, %key, "a declared key is held by another aggregate");
                done.conflicts.push(KeyConflict {
                    key,
                    claimant: aggregate_id.clone(),
                    holder: holder.aggregate_id,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use wow_core::eventsourcing::History;

    use wow_core::aggregate::{Aggregate, AggregateRegistry};
    use wow_core::eventsourcing::InMemoryEventStore;
    use wow_core::testing_example::{Counter, Handle, Member, MemberEvent};
    use wow_core::{DomainEvent, DomainEventStream};

    use super::*;

    /// A member's first stream, as a build before `unique_keys` wrote it: no key claimed.
    fn registered(id: &str, handle: &str) -> DomainEventStream {
        let event = MemberEvent::HandleTaken(Handle {
            handle: handle.to_owned(),
        });
        DomainEventStream {
            id: wow_core::id::new_id(),
            request_id: format!("register-{id}"),
            command_id: wow_core::id::new_id(),
            aggregate_id: Member::named_aggregate().aggregate_id(id.to_owned(), "t".to_owned()),
            version: 1,
            create_time: 1,
            fingerprint: String::new(),
            header: Default::default(),
            body: vec![DomainEvent::of(&event).expect("the event encodes")],
        }
    }

    #[tokio::test]
    async fn claims_each_aggregates_keys_reports_conflicts_and_changes_nothing_when_run_again() {
        let store = InMemoryEventStore::new();
        for (id, handle) in [("ann", "a"), ("bob", "b"), ("cy", "a")] {
            store.append(&registered(id, handle)).await.unwrap();
        }
        let mut registry = AggregateRegistry::new();
        registry.register::<Member>().unwrap();
        registry.register::<Counter>().unwrap();
        let runtimes: Vec<&dyn AggregateRuntime> = registry.iter().map(|r| r.as_ref()).collect();
        let steps = Arc::new(Mutex::new(Vec::new()));
        let seen = steps.clone();
        let progress = move |step: &KeyBackfillProgress| seen.lock().unwrap().push(step.clone());

        let first = claim_declared_keys(&runtimes, &store, None, &progress)
            .await
            .unwrap();
        assert_eq!((first.aggregates, first.claimed, first.held), (3, 2, 0));
        let member =
            |id: &str| Member::named_aggregate().aggregate_id(id.to_owned(), "t".to_owned());
        assert_eq!(
            first.conflicts,
            vec![KeyConflict {
                key: UniqueKey::new("handle", "a"),
                claimant: member("cy"),
                holder: member("ann"),
            }]
        );
        let last = steps.lock().unwrap().last().cloned().unwrap();
        assert_eq!((last.aggregates_total, last.aggregates_done), (3, 3));
        assert_eq!(last.aggregate, Member::named_aggregate());

        let second = claim_declared_keys(&runtimes, &store, None, &|_| {})
            .await
            .unwrap();
        assert_eq!((second.claimed, second.held), (0, 2));
        assert_eq!(second.conflicts, first.conflicts);
    }
}
