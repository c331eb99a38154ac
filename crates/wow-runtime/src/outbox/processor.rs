//! Any [`Outbox`] as an event processor over any [`ViewStore`], and the typed read of its
//! rows.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;

use wow_core::aggregate::typed_events;
use wow_core::aggregate::{Aggregate, LifecycleEvent};
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::event::{DomainEvent, DomainEventStream};
use wow_core::id::{Clock, SystemClock};
use wow_core::outbox::{row_id, EventMeta, Outbox, OutboxEntry};
use wow_core::view::{ViewKey, ViewRow};
use wow_core::view::{ViewStore, ViewStoreError, ViewUpdate};
use wow_core::ErrorCode;

use crate::view::consumed::{of_aggregate, undecodable, update_failed};

/// Runs the outbox `O` as an event processor (consumer name [`Outbox::NAME`]): each stream of
/// `O::Aggregate` is decoded once into typed events, and each row [`Outbox::rows`] gives is
/// stored once (and each row [`Outbox::lifecycle_rows`] gives for a delete or recover, SPEC
/// DM-6), with its processed-message record in the same transaction (SPEC DS-2),
/// under the key (`O::NAME`, tenant, [`row_id`]) and the message id [`row_id`].
///
/// A redelivered stream stores nothing twice; a stream cut off between two of its rows
/// stores the missing ones when delivered again. Streams of other aggregates are ignored.
pub struct OutboxProcessor<O: Outbox> {
    store: Arc<dyn ViewStore>,
    clock: Arc<dyn Clock>,
    outbox: PhantomData<fn() -> O>,
}

impl<O: Outbox> fmt::Debug for OutboxProcessor<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboxProcessor")
            .field("outbox", &O::NAME)
            .field("store", &self.store)
            .finish()
    }
}

impl<O: Outbox> OutboxProcessor<O> {
    /// The processor of `O` storing into `store`, stamping rows with the system clock.
    pub fn new(store: Arc<dyn ViewStore>) -> Self {
        Self {
            store,
            clock: Arc::new(SystemClock),
            outbox: PhantomData,
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

    /// Every row stored so far, across tenants, in (tenant, row id) order.
    ///
    /// Fails as [`outbox_rows`] does.
    pub async fn rows(&self) -> Result<Vec<OutboxEntry<O::Row>>, ViewStoreError> {
        outbox_rows::<O>(self.store.as_ref()).await
    }

    /// The rows of `stream`, each with its key, in order.
    fn rows_of(
        &self,
        stream: &DomainEventStream,
    ) -> Result<Vec<(ViewKey, ViewRow)>, ConsumerError> {
        // SPEC DM-6: a delete or recover owes what `lifecycle_rows` says, the node writes it
        // alone in its stream.
        let owed: Vec<(&DomainEvent, Owed<O>)> = match LifecycleEvent::of_stream(stream) {
            Some(_) => stream
                .body
                .iter()
                .filter_map(|raw| {
                    LifecycleEvent::of_event(&raw.name).map(|event| (raw, Owed::Lifecycle(event)))
                })
                .collect(),
            None => typed_events::<O::Aggregate>(stream)
                .map_err(|error| undecodable(format_args!("outbox {}", O::NAME), stream, error))?
                .into_iter()
                .zip(&stream.body)
                .map(|(event, raw)| (raw, Owed::Event(event)))
                .collect(),
        };
        let (tenant, now) = (&stream.aggregate_id.tenant_id, self.clock.now_millis());
        let mut stored = Vec::new();
        for (raw, owed) in &owed {
            let meta = EventMeta {
                event_id: &raw.id,
                tenant_id: tenant,
                aggregate_id: &stream.aggregate_id.id,
                version: stream.version,
            };
            let rows = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match owed {
                Owed::Event(event) => O::rows(event, &meta),
                Owed::Lifecycle(event) => O::lifecycle_rows(*event, &meta),
            }))
            .map_err(|_| illegal(format!("outbox {}: rows panicked", O::NAME)))?;
            for (index, row) in rows.iter().enumerate() {
                let state = serde_json::to_value(row).map_err(|error| {
                    illegal(format!(
                        "outbox {}: a row does not encode: {error}",
                        O::NAME
                    ))
                })?;
                let key = ViewKey::new(O::NAME, tenant.clone(), row_id(&raw.id, index));
                let row = ViewRow {
                    key: key.clone(),
                    version: stream.version,
                    state,
                    updated_at: now,
                };
                stored.push((key, row));
            }
        }
        Ok(stored)
    }
}

/// What one event of a stream owes rows for: a typed event, or the aggregate's soft delete or
/// recover.
enum Owed<O: Outbox> {
    Event(<O::Aggregate as Aggregate>::Event),
    Lifecycle(LifecycleEvent),
}

fn illegal(message: String) -> ConsumerError {
    ConsumerError::new(ErrorCode::IllegalState, message)
}

#[async_trait]
impl<O: Outbox> EventConsumer for OutboxProcessor<O> {
    fn name(&self) -> &str {
        O::NAME
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        if !of_aggregate::<O::Aggregate>(stream) {
            return Ok(());
        }
        for (key, row) in self.rows_of(stream)? {
            // A row already there (stored with another record, as by a copy from an older
            // store) is kept as it is.
            let work: ViewUpdate = Box::new(move |current| Ok(current.is_none().then_some(row)));
            self.store
                .update(&key, &key.aggregate_id, work)
                .await
                .map_err(update_failed)?;
        }
        Ok(())
    }
}

/// Up to `limit` stored rows of `O` across tenants, in (tenant, row id) order, after the row
/// `after` (its tenant and id; from the first when `None`).
///
/// Fails as [`ViewStore::scan`] does, and with [`ViewStoreError::Internal`] when a stored
/// row does not decode as `O::Row`.
pub async fn outbox_page<O: Outbox>(
    store: &dyn ViewStore,
    after: Option<(&str, &str)>,
    limit: usize,
) -> Result<Vec<OutboxEntry<O::Row>>, ViewStoreError> {
    let after = after.map(|(tenant, id)| ViewKey::new(O::NAME, tenant, id));
    store
        .scan(O::NAME, after.as_ref(), limit)
        .await?
        .into_iter()
        .map(|stored| {
            let row = serde_json::from_value::<O::Row>(stored.state)
                .map_err(|error| ViewStoreError::Internal(Box::new(error)))?;
            Ok(OutboxEntry {
                tenant_id: stored.key.tenant_id,
                id: stored.key.aggregate_id,
                version: stored.version,
                row,
            })
        })
        .collect()
}

/// Every stored row of `O`, across tenants, in (tenant, row id) order, read in pages.
///
/// Fails as [`outbox_page`] does.
pub async fn outbox_rows<O: Outbox>(
    store: &dyn ViewStore,
) -> Result<Vec<OutboxEntry<O::Row>>, ViewStoreError> {
    const PAGE: usize = 500;
    let mut all: Vec<OutboxEntry<O::Row>> = Vec::new();
    loop {
        let after = all
            .last()
            .map(|last| (last.tenant_id.clone(), last.id.clone()));
        let page = outbox_page::<O>(
            store,
            after.as_ref().map(|(t, i)| (t.as_str(), i.as_str())),
            PAGE,
        )
        .await?;
        let done = page.len() < PAGE;
        all.extend(page);
        if done {
            return Ok(all);
        }
    }
}
