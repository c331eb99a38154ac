//! Any [`View`] as a projection over any [`ViewStore`].

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;

use super::{View, ViewKey, ViewRow, ViewStore, ViewStoreError, ViewUpdate};
use crate::aggregate::{typed_events, Aggregate};
use crate::event::{ConsumerError, EventConsumer, ProcessError};
use crate::eventsourcing::BoxError;
use crate::id::{Clock, SystemClock};
use crate::{DomainEventStream, ErrorCode};

/// Why a stream cannot be folded into a view row yet: an earlier stream of the aggregate has
/// not been applied (it failed and waits for its retry), so applying this one would skip it.
/// The projection fails with it; compensation retries the stream after the one before it.
#[derive(Debug, thiserror::Error)]
#[error("view {view}: aggregate {aggregate_id} is at version {at}; version {got} must wait for the versions before it")]
pub struct ViewOutOfOrder {
    /// The view.
    pub view: &'static str,
    /// The aggregate (its id within its tenant).
    pub aggregate_id: String,
    /// The version the row holds.
    pub at: u64,
    /// The version of the stream that came.
    pub got: u64,
}

/// Runs the view `V` as a projection (stage `PROJECTED`, consumer name [`View::NAME`]): each
/// stream of `V::Aggregate` is decoded once into typed events and folded into its row, in one
/// transaction with its processed-message record (SPEC DS-2).
///
/// Version order per aggregate: a stream at or below the row's version is already in (the
/// stream is recorded, the row unchanged); the next version is folded; a later one is a gap,
/// which fails with [`ViewOutOfOrder`] and is retried later. Streams of other aggregates are
/// ignored.
pub struct ViewProjection<V: View> {
    store: Arc<dyn ViewStore>,
    clock: Arc<dyn Clock>,
    view: PhantomData<fn() -> V>,
}

impl<V: View> fmt::Debug for ViewProjection<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ViewProjection")
            .field("view", &V::NAME)
            .field("store", &self.store)
            .finish()
    }
}

impl<V: View> ViewProjection<V> {
    /// The projection of `V` into `store`, stamping rows with the system clock.
    pub fn new(store: Arc<dyn ViewStore>) -> Self {
        Self {
            store,
            clock: Arc::new(SystemClock),
            view: PhantomData,
        }
    }

    /// Stamps rows' `updated_at` with `clock` instead.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The store the rows live in.
    pub fn store(&self) -> &Arc<dyn ViewStore> {
        &self.store
    }

    fn update(&self, stream: &DomainEventStream) -> Result<(ViewKey, ViewUpdate), ConsumerError> {
        let events = typed_events::<V::Aggregate>(stream).map_err(|error| {
            ConsumerError::new(
                ErrorCode::IllegalState,
                format!(
                    "view {}: stream {} does not decode: {error}",
                    V::NAME,
                    stream.id
                ),
            )
        })?;
        let key = ViewKey::new(
            V::NAME,
            stream.aggregate_id.tenant_id.clone(),
            stream.aggregate_id.id.clone(),
        );
        let (version, now, row_key) = (stream.version, self.clock.now_millis(), key.clone());
        let work: ViewUpdate = Box::new(move |current| {
            let (mut state, at) = match current {
                Some(row) => (serde_json::from_value::<V::State>(row.state)?, row.version),
                None => (V::State::default(), 0),
            };
            if version <= at {
                return Ok(None);
            }
            if version != at + 1 {
                return Err(Box::new(ViewOutOfOrder {
                    view: V::NAME,
                    aggregate_id: row_key.aggregate_id,
                    at,
                    got: version,
                }) as BoxError);
            }
            fold::<V>(&mut state, &events)?;
            Ok(Some(ViewRow {
                key: row_key,
                version,
                state: serde_json::to_value(&state)?,
                updated_at: now,
            }))
        });
        Ok((key, work))
    }
}

/// Folds `events` into `state`; a panicking `apply` is a failure of this stream, not of the
/// process (SPEC PX-1).
fn fold<V: View>(
    state: &mut V::State,
    events: &[<V::Aggregate as Aggregate>::Event],
) -> Result<(), BoxError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for event in events {
            V::apply(state, event);
        }
    }))
    .map_err(|_| format!("view {}: apply panicked", V::NAME).into())
}

#[async_trait]
impl<V: View> EventConsumer for ViewProjection<V> {
    fn name(&self) -> &str {
        V::NAME
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        let named = V::Aggregate::named_aggregate();
        if stream.aggregate_id.aggregate_name != named.aggregate_name
            || stream.aggregate_id.context_name != named.context_name
        {
            return Ok(());
        }
        let (key, work) = self.update(stream)?;
        match self.store.update(&key, &stream.id, work).await {
            Ok(_) => Ok(()),
            Err(error @ ProcessError::Store(_)) => Err(ConsumerError::new(
                ErrorCode::ServiceUnavailable,
                error.to_string(),
            )),
            Err(error) => Err(ConsumerError::new(
                ErrorCode::IllegalState,
                error.to_string(),
            )),
        }
    }
}

/// The state of `V` for `aggregate_id` of `tenant_id` and the last version folded into it,
/// if the view holds a row for it. Another tenant's aggregate of the same id is not it.
///
/// Fails as [`ViewStore::load`] does, and with [`ViewStoreError::Internal`] when the stored
/// state does not decode as `V::State`.
pub async fn view<V: View>(
    store: &dyn ViewStore,
    tenant_id: &str,
    aggregate_id: &str,
) -> Result<Option<(V::State, u64)>, ViewStoreError> {
    let key = ViewKey::new(V::NAME, tenant_id, aggregate_id);
    let Some(row) = store.load(&key).await? else {
        return Ok(None);
    };
    let state = serde_json::from_value::<V::State>(row.state)
        .map_err(|error| ViewStoreError::Internal(Box::new(error)))?;
    Ok(Some((state, row.version)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::aggregate::testing_example::{Added, Counter, CounterEvent};
    use crate::view::InMemoryViewStore;
    use crate::{AggregateId, DomainEvent};

    #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
    struct Total {
        additions: u64,
        sum: u64,
    }

    #[derive(Debug)]
    struct CounterTotal;

    impl View for CounterTotal {
        type Aggregate = Counter;
        type State = Total;
        const NAME: &'static str = "counter_total";

        fn apply(state: &mut Total, event: &CounterEvent) {
            if let CounterEvent::Added(added) = event {
                state.additions += 1;
                state.sum += added.by;
            }
        }
    }

    fn counter(id: &str, tenant: &str) -> AggregateId {
        Counter::named_aggregate().aggregate_id(id, tenant)
    }

    fn stream(aggregate: &AggregateId, version: u64, events: &[CounterEvent]) -> DomainEventStream {
        DomainEventStream {
            id: crate::id::new_id(),
            request_id: crate::id::new_id(),
            command_id: crate::id::new_id(),
            aggregate_id: aggregate.clone(),
            version,
            create_time: 0,
            fingerprint: String::new(),
            header: Default::default(),
            body: events.iter().map(|e| DomainEvent::of(e).unwrap()).collect(),
        }
    }

    fn add(by: u64) -> CounterEvent {
        CounterEvent::Added(Added { by })
    }

    fn projection() -> (Arc<dyn ViewStore>, ViewProjection<CounterTotal>) {
        let store: Arc<dyn ViewStore> = Arc::new(InMemoryViewStore::new());
        (store.clone(), ViewProjection::new(store))
    }

    #[tokio::test]
    async fn folds_streams_in_version_order_into_a_typed_row() {
        let (store, projection) = projection();
        let c = counter("c-1", "t");
        assert_eq!(projection.name(), "counter_total");
        assert!(view::<CounterTotal>(&*store, "t", "c-1")
            .await
            .unwrap()
            .is_none());
        projection
            .handle(&stream(&c, 1, &[CounterEvent::Started]))
            .await
            .unwrap();
        projection
            .handle(&stream(&c, 2, &[add(2), add(3)]))
            .await
            .unwrap();
        assert_eq!(
            view::<CounterTotal>(&*store, "t", "c-1").await.unwrap(),
            Some((
                Total {
                    additions: 2,
                    sum: 5
                },
                2
            ))
        );
    }

    #[tokio::test]
    async fn a_redelivered_or_older_stream_changes_nothing() {
        let (store, projection) = projection();
        let c = counter("c-1", "t");
        let first = stream(&c, 1, &[add(1)]);
        projection.handle(&first).await.unwrap();
        projection.handle(&first).await.unwrap();
        // Another stream at a version already in (a replay after positions were lost).
        projection
            .handle(&stream(&c, 1, &[add(100)]))
            .await
            .unwrap();
        assert_eq!(
            view::<CounterTotal>(&*store, "t", "c-1").await.unwrap(),
            Some((
                Total {
                    additions: 1,
                    sum: 1
                },
                1
            ))
        );
    }

    #[tokio::test]
    async fn a_gap_must_wait_and_applies_once_the_missing_stream_is_in() {
        let (store, projection) = projection();
        let c = counter("c-1", "t");
        let third = stream(&c, 3, &[add(30)]);
        projection.handle(&stream(&c, 1, &[add(1)])).await.unwrap();
        let error = projection.handle(&third).await.unwrap_err();
        assert_eq!(error.code, ErrorCode::IllegalState);
        assert!(error.message.contains("must wait"), "{error}");
        assert_eq!(
            view::<CounterTotal>(&*store, "t", "c-1")
                .await
                .unwrap()
                .unwrap()
                .1,
            1
        );
        projection.handle(&stream(&c, 2, &[add(2)])).await.unwrap();
        projection.handle(&third).await.unwrap();
        assert_eq!(
            view::<CounterTotal>(&*store, "t", "c-1").await.unwrap(),
            Some((
                Total {
                    additions: 3,
                    sum: 33
                },
                3
            ))
        );
    }

    #[tokio::test]
    async fn tenants_have_their_own_rows_and_other_aggregates_are_ignored() {
        let (store, projection) = projection();
        projection
            .handle(&stream(&counter("c-1", "a"), 1, &[add(1)]))
            .await
            .unwrap();
        projection
            .handle(&stream(&counter("c-1", "b"), 1, &[add(7)]))
            .await
            .unwrap();
        let elsewhere = AggregateId::new("demo", "other", "c-1", "a");
        projection
            .handle(&stream(&elsewhere, 2, &[add(9)]))
            .await
            .unwrap();
        assert_eq!(
            view::<CounterTotal>(&*store, "a", "c-1")
                .await
                .unwrap()
                .unwrap()
                .0
                .sum,
            1
        );
        assert_eq!(
            view::<CounterTotal>(&*store, "b", "c-1")
                .await
                .unwrap()
                .unwrap()
                .0
                .sum,
            7
        );
    }

    #[tokio::test]
    async fn a_stream_that_does_not_decode_fails_and_writes_nothing() {
        let (store, projection) = projection();
        let c = counter("c-1", "t");
        let mut bad = stream(&c, 1, &[add(1)]);
        bad.body[0].name = "Renamed".to_owned();
        let error = projection.handle(&bad).await.unwrap_err();
        assert_eq!(error.code, ErrorCode::IllegalState);
        assert!(view::<CounterTotal>(&*store, "t", "c-1")
            .await
            .unwrap()
            .is_none());
    }
}
