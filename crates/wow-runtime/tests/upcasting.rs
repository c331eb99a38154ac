//! Events stored in older shapes are read in today's through the aggregate's upcasters: by the
//! node deciding on a command, and by a view, with history never written back; one that
//! cannot be read even after upcasting quarantines its aggregate with an error naming the
//! event and the revision it was stored at.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use wow_core::aggregate::{Aggregate, AggregateRegistry, CommandContext};
use wow_core::command::CommandResultError;
use wow_core::event::{EventShape, UpcastError, Upcasters};
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::{
    AggregateId, Command, CommandMessage, CommandResult, DomainError, DomainEvent,
    DomainEventStream, ErrorCode, Event,
};
use wow_runtime::command::{WaitPlan, QUARANTINED};
use wow_runtime::pipeline::LocalPipeline;

/// A wallet whose credits were first stored as `credit {sum}` (revision 1), then
/// `credit {amount}` (revision 2), and are today `credited {amount, currency}` (revision 3);
/// an `adjusted {out, in}` event was later split into a debit and a credit, and `audited`
/// events no longer mean anything.
#[derive(Debug)]
struct Wallet;

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct WalletState {
    balance: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, validator::Validate, schemars::JsonSchema)]
struct Spend {
    amount: u64,
}

#[derive(Debug, Clone, Command)]
enum WalletCommand {
    #[command(create)]
    Open,
    Spend(Spend),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Credited {
    amount: u64,
    currency: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Debited {
    amount: u64,
}

#[derive(Debug, Clone, PartialEq, Event)]
enum WalletEvent {
    #[event(name = "opened")]
    Opened,
    #[event(name = "credited", revision = "3")]
    Credited(Credited),
    #[event(name = "debited")]
    Debited(Debited),
}

#[derive(Debug, thiserror::Error, DomainError)]
enum WalletError {
    #[error("not enough money")]
    NotEnough,
}

impl Aggregate for Wallet {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "wallet";
    type State = WalletState;
    type Command = WalletCommand;
    type Event = WalletEvent;
    type Error = WalletError;

    fn handle(
        state: &WalletState,
        command: WalletCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<WalletEvent>, WalletError> {
        match command {
            WalletCommand::Open => Ok(vec![WalletEvent::Opened]),
            WalletCommand::Spend(spend) if spend.amount <= state.balance => {
                Ok(vec![WalletEvent::Debited(Debited {
                    amount: spend.amount,
                })])
            }
            WalletCommand::Spend(_) => Err(WalletError::NotEnough),
        }
    }

    fn apply(state: &mut WalletState, event: &WalletEvent) {
        match event {
            WalletEvent::Opened => {}
            WalletEvent::Credited(credited) => state.balance += credited.amount,
            WalletEvent::Debited(debited) => state.balance -= debited.amount,
        }
    }

    fn upcasters() -> Upcasters {
        let whole = |body: &Value, field: &str| {
            body[field]
                .as_u64()
                .ok_or_else(|| UpcastError::new(format!("`{field}` is not a whole number")))
        };
        Upcasters::new()
            // 1 → 2: `sum` was renamed `amount`.
            .upcast("credit", "1", move |body| {
                Ok(vec![EventShape::new(
                    "credit",
                    "2",
                    json!({"amount": whole(&body, "sum")?}),
                )])
            })
            // 2 → 3: a currency, EUR for everything before it existed.
            .upcast("credit", "2", |mut body| {
                body["currency"] = json!("EUR");
                Ok(vec![EventShape::new("credit", "3", body)])
            })
            // The event type was renamed in code.
            .rename_event("credit", "credited")
            // One event became two.
            .upcast("adjusted", "1", move |body| {
                Ok(vec![
                    EventShape::new("debited", "0.0.1", json!({"amount": whole(&body, "out")?})),
                    EventShape::new(
                        "credited",
                        "3",
                        json!({"amount": whole(&body, "in")?, "currency": "EUR"}),
                    ),
                ])
            })
            .drop_event("audited")
    }
}

fn wallet(id: &str) -> AggregateId {
    AggregateId::new("demo", "wallet", id, "tenant-a")
}

/// A stream as an earlier build of the wallet stored it.
fn stored(id: &AggregateId, version: u64, events: &[(&str, &str, Value)]) -> DomainEventStream {
    DomainEventStream {
        id: format!("s-{}-{version}", id.id),
        request_id: format!("r-{}-{version}", id.id),
        command_id: format!("c-{}-{version}", id.id),
        aggregate_id: id.clone(),
        version,
        create_time: 1_700_000_000_000 + version as i64,
        fingerprint: String::new(),
        header: BTreeMap::new(),
        body: events
            .iter()
            .enumerate()
            .map(|(n, (name, revision, body))| DomainEvent {
                id: format!("e-{}-{version}-{n}", id.id),
                name: (*name).to_owned(),
                revision: (*revision).to_owned(),
                body: body.clone(),
            })
            .collect(),
    }
}

/// Years of history: every kind of old shape, and one stream in today's.
fn old_history(id: &AggregateId) -> Vec<DomainEventStream> {
    vec![
        stored(id, 1, &[("opened", "0.0.1", json!(null))]),
        stored(id, 2, &[("credit", "1", json!({"sum": 10}))]),
        stored(id, 3, &[("credit", "2", json!({"amount": 5}))]),
        stored(
            id,
            4,
            &[
                ("audited", "1", json!({"by": "ops"})),
                ("credit", "1", json!({"sum": 1})),
            ],
        ),
        stored(id, 5, &[("adjusted", "1", json!({"out": 3, "in": 1}))]),
        stored(
            id,
            6,
            &[("credited", "3", json!({"amount": 2, "currency": "EUR"}))],
        ),
    ]
}

fn registry() -> AggregateRegistry {
    let mut registry = AggregateRegistry::new();
    registry.register::<Wallet>().unwrap();
    registry
}

fn spend(id: &AggregateId, amount: u64) -> wow_core::command::JsonCommand {
    CommandMessage::of(id.clone(), WalletCommand::Spend(Spend { amount }))
        .into_json()
        .unwrap()
}

async fn processed(
    pipeline: &LocalPipeline,
    command: wow_core::command::JsonCommand,
) -> CommandResult {
    match pipeline
        .gateway
        .send_and_wait(command, WaitPlan::processed())
        .await
    {
        Ok(result) => result,
        Err(CommandResultError::Failed(result)) => *result,
        Err(other) => panic!("no result: {other:?}"),
    }
}

#[tokio::test]
async fn the_node_decides_on_history_stored_in_every_old_shape() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let id = wallet("w-1");
    for stream in old_history(&id) {
        store.append(&stream).await.unwrap();
    }
    let pipeline = LocalPipeline::builder(registry(), store.clone()).build();

    // 10 + 5 + 1 (revisions 1 and 2, renamed) − 3 + 1 (split) + 2 (today's) = 16; the
    // audited event is dropped. Spending 17 is refused, 16 is taken at version 7.
    let refused = processed(&pipeline, spend(&id, 17)).await;
    assert_eq!(
        refused.error_code,
        "NotEnough".parse::<ErrorCode>().unwrap(),
        "{refused:?}"
    );
    let spent = processed(&pipeline, spend(&id, 16)).await;
    assert!(spent.succeeded, "{spent:?}");
    assert_eq!(spent.aggregate_version, Some(7));

    // History is never written back: the old shapes are still what the store holds.
    let history = store.load(&id, 1, 6).await.unwrap();
    assert_eq!(history, old_history(&id));
}

#[tokio::test]
async fn an_event_that_cannot_be_upcast_quarantines_its_aggregate_naming_the_event_and_revision() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let broken = wallet("w-broken");
    store
        .append(&stored(&broken, 1, &[("opened", "0.0.1", json!(null))]))
        .await
        .unwrap();
    store
        .append(&stored(
            &broken,
            2,
            &[("credit", "1", json!({"sum": "ten"}))],
        ))
        .await
        .unwrap();
    let fine = wallet("w-fine");
    for stream in old_history(&fine) {
        store.append(&stream).await.unwrap();
    }
    let pipeline = LocalPipeline::builder(registry(), store.clone()).build();

    let failed = processed(&pipeline, spend(&broken, 1)).await;
    assert!(!failed.succeeded);
    assert!(
        failed.result.contains_key(QUARANTINED),
        "quarantined: {failed:?}"
    );
    for named in [
        "w-broken",
        "credit",
        "revision 1",
        "`sum` is not a whole number",
    ] {
        assert!(
            failed.error_msg.contains(named),
            "{named} in {}",
            failed.error_msg
        );
    }
    assert_eq!(pipeline.quarantine.list().len(), 1);
    // The rest of the service runs on.
    let spent = processed(&pipeline, spend(&fine, 16)).await;
    assert!(spent.succeeded, "{spent:?}");
}

#[test]
fn the_registry_shows_history_in_todays_shape_and_what_it_was_stored_as() {
    let registry = registry();
    let runtime = registry.find("wallet").unwrap();
    let id = wallet("w-2");
    let history = old_history(&id);
    let shapes: Vec<Vec<(usize, EventShape)>> = history
        .iter()
        .map(|stream| runtime.upcast(stream).unwrap())
        .collect();
    assert_eq!(
        shapes[1],
        vec![(
            0,
            EventShape::new("credited", "3", json!({"amount": 10, "currency": "EUR"}))
        )]
    );
    assert_eq!(
        shapes[3],
        vec![(
            1,
            EventShape::new("credited", "3", json!({"amount": 1, "currency": "EUR"}))
        )],
        "the audited event is dropped"
    );
    assert_eq!(
        shapes[4],
        vec![
            (0, EventShape::new("debited", "0.0.1", json!({"amount": 3}))),
            (
                0,
                EventShape::new("credited", "3", json!({"amount": 1, "currency": "EUR"}))
            ),
        ]
    );
    assert_eq!(
        shapes[5],
        vec![(
            0,
            EventShape::new("credited", "3", json!({"amount": 2, "currency": "EUR"}))
        )]
    );
}

#[tokio::test]
async fn a_snapshot_of_an_older_state_shape_is_ignored_and_the_state_rebuilt_from_history() {
    use wow_core::eventsourcing::{InMemorySnapshotStore, Snapshot, SnapshotStore};
    use wow_runtime::eventsourcing::SnapshotStrategy;

    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let snapshots: Arc<dyn SnapshotStore> = Arc::new(InMemorySnapshotStore::new());
    let id = wallet("w-snap");
    for stream in old_history(&id) {
        store.append(&stream).await.unwrap();
    }
    // Taken by an earlier build whose state had another shape (state version 0): its JSON
    // happens to decode into today's state, with a balance that is not today's meaning.
    snapshots
        .save(&Snapshot {
            aggregate_id: id.clone(),
            version: 6,
            state: json!({"balance": 1_000}),
            snapshot_time: 1,
            state_version: 0,
        })
        .await
        .unwrap();
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .snapshots(snapshots.clone(), SnapshotStrategy::Every(1))
        .build();

    // Today's balance is 16, from history: the snapshot's 1,000 is not used.
    let refused = processed(&pipeline, spend(&id, 17)).await;
    assert_eq!(
        refused.error_code,
        "NotEnough".parse::<ErrorCode>().unwrap(),
        "{refused:?}"
    );
    let spent = processed(&pipeline, spend(&id, 16)).await;
    assert!(spent.succeeded, "{spent:?}");
}

/// Each wallet's credits in euros, as a view.
struct CreditTotal;

impl wow_core::view::View for CreditTotal {
    type Aggregate = Wallet;
    type State = u64;
    const NAME: &'static str = "credit_total";

    fn apply(total: &mut u64, event: &WalletEvent) {
        if let WalletEvent::Credited(credited) = event {
            *total += credited.amount;
        }
    }
}

#[tokio::test]
async fn a_view_caught_up_from_old_history_folds_todays_shapes() {
    use wow_core::view::view;
    use wow_core::view::{InMemoryViewStore, ViewStore};
    use wow_runtime::view::ViewProjection;

    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let id = wallet("w-view");
    for stream in old_history(&id) {
        store.append(&stream).await.unwrap();
    }
    let views: Arc<dyn ViewStore> = Arc::new(InMemoryViewStore::default());
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .projection(Arc::new(ViewProjection::<CreditTotal>::new(views.clone())))
        .build();
    pipeline
        .catch_up(&[Wallet::named_aggregate()], &mut |_, _| {})
        .await
        .unwrap();
    // Credits 10 (revision 1) + 5 (revision 2) + 1 (revision 1, beside a dropped event)
    // + 1 (the split's credit) + 2 (today's) = 19, at the last version.
    let (total, version) = view::<CreditTotal>(views.as_ref(), "tenant-a", "w-view")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((total, version), (19, 6));
}
