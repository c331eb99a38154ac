//! The forwarding base of deadline store decorators, made as the event store's is (its module
//! doc, [`EventStoreDecorator`](crate::eventsourcing::EventStoreDecorator), says why): a
//! wrapper states the methods whose behaviour it changes, and every other one reaches the
//! deadline store it wraps.

use async_trait::async_trait;

use crate::deadline::DeadlineStore;
use crate::eventsourcing::EventStoreError;
use wow_model::aggregate_id::AggregateId;
use wow_model::deadline::{
    DeadlineBacklog, DueQuery, FailedFiring, PartitionFilter, PendingDeadline, ScheduledCommand,
};

/// Writes the decorator trait and its blanket impl from one table of the deadline store's
/// methods.
macro_rules! forwarding_base {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ok:ty;)*) => {
        /// A wrapper that adds one concern to the [`DeadlineStore`] it wraps: every type that
        /// implements it is a [`DeadlineStore`] whose methods are these, each forwarding to
        /// [`inner`](Self::inner) unless the wrapper states it. [`due`](Self::due) and
        /// [`scheduled_for`](Self::scheduled_for) are derived from the wrapper's own
        /// [`due_rows`](Self::due_rows) and [`pending_for`](Self::pending_for), as the store
        /// trait derives them. Each method's contract is that of the [`DeadlineStore`] method
        /// of its name.
        #[async_trait]
        pub trait DeadlineStoreDecorator: Send + Sync + std::fmt::Debug {
            /// The store this wrapper adds its concern to: every method it does not state is
            /// this store's.
            fn inner(&self) -> &dyn DeadlineStore;

            $(
                #[doc = concat!("[`DeadlineStore::", stringify!($name), "`]; by default the inner store's.")]
                async fn $name(&self, $($arg: $ty),*) -> Result<$ok, EventStoreError> {
                    let this = self;
                    forwarded!(this, $name($($arg),*))
                }
            )*
        }

        /// Every deadline store decorator is a deadline store: each method is the
        /// decorator's own.
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<T: DeadlineStoreDecorator> DeadlineStore for T {
            $(
                async fn $name(&self, $($arg: $ty),*) -> Result<$ok, EventStoreError> {
                    DeadlineStoreDecorator::$name(self, $($arg),*).await
                }
            )*
        }
    };
}

/// What a decorator's method does unless the wrapper states it: the two derived methods are
/// derived from the wrapper's own reads; every other method is the inner store's.
macro_rules! forwarded {
    ($this:ident, due($now:ident, $limit:ident)) => {{
        let rows = $this.due_rows(&DueQuery::at($now, $limit)).await?;
        Ok(rows.into_iter().map(|row| row.schedule).collect())
    }};
    ($this:ident, scheduled_for($owner:ident)) => {{
        let rows = $this.pending_for($owner).await?;
        Ok(rows.into_iter().map(|row| row.schedule).collect())
    }};
    ($this:ident, $name:ident($($arg:ident),*)) => {
        $this.inner().$name($($arg),*).await
    };
}

forwarding_base! {
    due_rows(query: &DueQuery) -> Vec<PendingDeadline>;
    next_fire_at(partitions: Option<&PartitionFilter>) -> Option<i64>;
    due(now: i64, limit: usize) -> Vec<ScheduledCommand>;
    now() -> i64;
    retry_later(failure: FailedFiring<'_>) -> Option<u32>;
    fire_now(owner: &AggregateId, name: &str) -> bool;
    pending_for(owner: &AggregateId) -> Vec<PendingDeadline>;
    cancel_named(tenant: &str, name: &str) -> u64;
    fired(schedule: &ScheduledCommand) -> bool;
    scheduled_for(owner: &AggregateId) -> Vec<ScheduledCommand>;
    schedule(row: &ScheduledCommand) -> ();
    cancel(owner: &AggregateId, name: &str) -> bool;
    backlog() -> DeadlineBacklog;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::eventsourcing::InMemoryEventStore;

    /// States nothing: every method is the inner store's.
    #[derive(Debug)]
    struct Plain(Arc<InMemoryEventStore>);

    impl DeadlineStoreDecorator for Plain {
        fn inner(&self) -> &dyn DeadlineStore {
            &*self.0
        }
    }

    fn row(owner: &AggregateId, name: &str, due_at: i64) -> ScheduledCommand {
        ScheduledCommand {
            owner: owner.clone(),
            name: name.to_owned(),
            due_at,
            target: owner.clone(),
            command: "expire".to_owned(),
            body: serde_json::json!({}),
            request_id: format!("{name}-1"),
            held_to: None,
        }
    }

    #[tokio::test]
    async fn every_deadline_store_method_of_a_decorator_that_states_none_reaches_the_inner_store() {
        let inner = Arc::new(InMemoryEventStore::new());
        let plain = Plain(inner.clone());
        let owner = AggregateId::new("shop", "order", "o-1", "tenant");
        let other = AggregateId::new("shop", "order", "o-2", "tenant");
        DeadlineStore::schedule(&plain, &row(&owner, "expire", 10))
            .await
            .unwrap();
        DeadlineStore::schedule(&plain, &row(&other, "expire", 20))
            .await
            .unwrap();
        assert_eq!(inner.pending_for(&owner).await.unwrap().len(), 1);
        assert_eq!(DeadlineStore::backlog(&plain).await.unwrap().pending, 2);
        assert_eq!(DeadlineStore::due(&plain, 15, 10).await.unwrap().len(), 1);
        assert_eq!(
            DeadlineStore::due_rows(&plain, &DueQuery::at(25, 10))
                .await
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            DeadlineStore::scheduled_for(&plain, &owner)
                .await
                .unwrap()
                .len(),
            1
        );
        assert!(DeadlineStore::now(&plain).await.unwrap() > 0);
        assert_eq!(
            DeadlineStore::retry_later(
                &plain,
                FailedFiring {
                    owner: &owner,
                    name: "expire",
                    request_id: "expire-1",
                    after: Some(Duration::from_secs(1)),
                    from: Some(10),
                }
            )
            .await
            .unwrap(),
            Some(1)
        );
        assert!(DeadlineStore::fire_now(&plain, &owner, "expire")
            .await
            .unwrap());
        assert!(DeadlineStore::fired(&plain, &row(&owner, "expire", 10))
            .await
            .unwrap());
        assert!(inner.pending_for(&owner).await.unwrap().is_empty());
        assert!(DeadlineStore::cancel(&plain, &other, "expire")
            .await
            .unwrap());
        DeadlineStore::schedule(&plain, &row(&other, "expire", 20))
            .await
            .unwrap();
        assert_eq!(
            DeadlineStore::cancel_named(&plain, "tenant", "expire")
                .await
                .unwrap(),
            1
        );
        assert_eq!(
            DeadlineStore::pending_for(&plain, &other)
                .await
                .unwrap()
                .len(),
            0
        );
    }
}
