//! The `account_balance` projection: each account's balance, hold and last applied version.
//!
//! Applies each stream once: a stream at or below the last applied version is a redelivery
//! and is skipped. It lives in memory and catches up from the event store at start; keeping
//! it in the store's database with a processed-message record in the same transaction comes
//! with the downstream work (SPEC DS-2).

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::Serialize;
use wow_core::aggregate::typed_events;
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::eventsourcing::{EventStore, EventStoreError};
use wow_core::{DomainEventStream, ErrorCode, NamedAggregate};

use wow_core::aggregate::Aggregate;

use crate::account::{Account, AccountState};

/// One account as the read model shows it (`GET /account/{id}/view`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AccountView {
    /// The account id.
    pub id: String,
    /// The holder's name.
    pub name: String,
    /// The available balance.
    pub balance: i64,
    /// The amount held by transfers in flight.
    pub held: i64,
    /// The last event version applied.
    pub version: u64,
}

/// The projection: the account's state folded from its events, with the last version.
#[derive(Debug, Default)]
pub struct AccountBalanceProjection {
    accounts: Mutex<HashMap<String, (AccountState, u64)>>,
}

impl AccountBalanceProjection {
    /// The view of account `id`, if it exists.
    pub fn view(&self, id: &str) -> Option<AccountView> {
        let accounts = self.accounts.lock().unwrap_or_else(|p| p.into_inner());
        accounts.get(id).map(|(state, version)| AccountView {
            id: id.to_owned(),
            name: state.name.clone(),
            balance: state.balance,
            held: state.held,
            version: *version,
        })
    }

    fn apply(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        if stream.aggregate_id.aggregate_name != "account" {
            return Ok(());
        }
        let events = typed_events::<Account>(stream)
            .map_err(|e| ConsumerError::new(ErrorCode::InternalServerError, e.to_string()))?;
        let mut accounts = self.accounts.lock().unwrap_or_else(|p| p.into_inner());
        let (state, version) = accounts.entry(stream.aggregate_id.id.clone()).or_default();
        if stream.version <= *version {
            return Ok(()); // a redelivery: applied before
        }
        for event in &events {
            Account::apply(state, event);
        }
        *version = stream.version;
        Ok(())
    }

    /// Applies every account stream already in `store`.
    pub async fn catch_up(&self, store: &dyn EventStore) -> Result<(), EventStoreError> {
        for_each_stream(store, |stream| {
            let _ = self.apply(stream);
        })
        .await
    }
}

/// Calls `each` with every `account` stream in `store`, aggregate by aggregate, in version
/// order.
pub(crate) async fn for_each_stream(
    store: &dyn EventStore,
    mut each: impl FnMut(&DomainEventStream),
) -> Result<(), EventStoreError> {
    let named = NamedAggregate::new(crate::CONTEXT, "account");
    let mut after: Option<String> = None;
    loop {
        let page = store
            .scan_aggregate_ids(&named, after.as_deref(), 500)
            .await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = Some(last.id.clone());
        for aggregate in &page {
            for stream in store.load(aggregate, 1, u64::MAX).await? {
                each(&stream);
            }
        }
    }
}

#[async_trait]
impl EventConsumer for AccountBalanceProjection {
    fn name(&self) -> &str {
        "account_balance"
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        self.apply(stream)
    }
}
