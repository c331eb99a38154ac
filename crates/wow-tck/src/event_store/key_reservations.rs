//! Key reservations and the backfill of keys (SPEC DM-1): a claim with a time holds its key
//! until then and frees it after, judged by the store's clock; a confirmation (a claim without
//! a time) keeps it for good, unless another aggregate took the lapsed key first; and
//! `KeyIndex::claim_keys` claims keys outside an append, only where they are free or
//! already the aggregate's.

use std::time::Duration;

use wow_core::eventsourcing::{EventStoreError, KeysToClaim};
use wow_core::unique_key::{KeyChange, KeyClaim, UniqueKey};
use wow_core::AggregateId;

use super::keys::{append_keys, fresh, KeySpace};
use super::{load_all, Store};
use crate::fixtures::aggregate;

/// How long a case waits at most for a reservation to lapse by the store's clock.
const LAPSE_WAIT: Duration = Duration::from_secs(10);

const NAME: KeySpace = KeySpace("username");

/// The process's clock, in milliseconds since the Unix epoch.
fn now() -> i64 {
    wow_core::id::exact_now_millis()
}

/// Waits until `value` is free in `tenant` by the store's clock, up to [`LAPSE_WAIT`].
async fn until_free(store: &Store, tenant: &str, value: &str) {
    let deadline = tokio::time::Instant::now() + LAPSE_WAIT;
    while NAME.holder(store, tenant, value).await.is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a lapsed reservation of {value} must free it"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A claim with a time holds the key until then: another aggregate's claim is refused
/// `DuplicateKey` naming the holder, and the holder's key carries its reservation time.
pub async fn a_reservation_holds_its_key_until_its_time(store: Store) {
    let (first, second) = (aggregate(), aggregate());
    let value = fresh("ann");
    let reserved = NAME.key(&value).reserved_until(now() + 600_000);
    append_keys(&store, &first, 1, vec![KeyChange::Claim(reserved.clone())])
        .await
        .expect("a free key is reserved");
    let held = NAME
        .holder(&store, &first.tenant_id, &value)
        .await
        .expect("a reserved key is held");
    assert_eq!(
        (held.aggregate_id, held.key, held.version),
        (first.clone(), reserved, 1)
    );
    match append_keys(&store, &second, 1, vec![KeyChange::Claim(NAME.key(&value))]).await {
        Err(EventStoreError::DuplicateKey(taken)) => {
            assert_eq!(taken.holder.aggregate_id, first);
        }
        other => panic!("a reserved key must refuse another claim, got {other:?}"),
    }
    assert!(load_all(&store, &second).await.is_empty());
}

/// A reservation lapses by itself: after its time the key is free (not found, and another
/// aggregate's claim takes it), and the first holder's confirmation is then refused
/// `DuplicateKey` naming the new holder, appending nothing.
pub async fn a_lapsed_reservation_frees_its_key_and_a_late_confirmation_is_refused(store: Store) {
    let (first, second) = (aggregate(), aggregate());
    let value = fresh("bob");
    let reserved = NAME.key(&value).reserved_until(now() + 300);
    append_keys(&store, &first, 1, vec![KeyChange::Claim(reserved)])
        .await
        .expect("a free key is reserved");
    until_free(&store, &first.tenant_id, &value).await;
    append_keys(&store, &second, 1, vec![KeyChange::Claim(NAME.key(&value))])
        .await
        .expect("a lapsed reservation holds nothing: another aggregate takes the key");
    match append_keys(&store, &first, 2, vec![KeyChange::Claim(NAME.key(&value))]).await {
        Err(EventStoreError::DuplicateKey(taken)) => {
            assert_eq!(taken.holder.aggregate_id, second);
            assert_eq!(taken.holder.key, NAME.key(&value));
        }
        other => panic!("a late confirmation must be refused DuplicateKey, got {other:?}"),
    }
    assert_eq!(load_all(&store, &first).await.len(), 1, "nothing appended");
    assert_eq!(
        NAME.holder(&store, &first.tenant_id, &value)
            .await
            .map(|held| (held.aggregate_id, held.version)),
        Some((second, 1))
    );
}

/// A confirmation (a claim without a time by the holder) keeps the key for good, at the
/// version that first claimed it; a reservation that lapsed with no one taking the key is
/// confirmed too; and a holder may move its reservation's time.
pub async fn a_confirmed_reservation_holds_its_key_for_good(store: Store) {
    let (first, second) = (aggregate(), aggregate());
    let (value, late) = (fresh("cy"), fresh("dee"));
    append_keys(
        &store,
        &first,
        1,
        vec![
            KeyChange::Claim(NAME.key(&value).reserved_until(now() + 600_000)),
            KeyChange::Claim(NAME.key(&late).reserved_until(now() - 1_000)),
        ],
    )
    .await
    .expect("free keys are reserved");
    assert!(
        NAME.holder(&store, &first.tenant_id, &late).await.is_none(),
        "a reservation whose time is past holds nothing"
    );
    let moved = NAME.key(&value).reserved_until(now() + 900_000);
    append_keys(&store, &first, 2, vec![KeyChange::Claim(moved.clone())])
        .await
        .expect("the holder moves its reservation's time");
    assert_eq!(
        NAME.holder(&store, &first.tenant_id, &value)
            .await
            .map(|held| held.key),
        Some(moved)
    );
    append_keys(
        &store,
        &first,
        3,
        vec![
            KeyChange::Claim(NAME.key(&value)),
            KeyChange::Claim(NAME.key(&late)),
        ],
    )
    .await
    .expect("the holder confirms its reservations");
    for confirmed in [&value, &late] {
        let held = NAME
            .holder(&store, &first.tenant_id, confirmed)
            .await
            .expect("a confirmed key is held");
        assert_eq!(held.aggregate_id, first);
        assert_eq!(held.key, NAME.key(confirmed), "held for good");
    }
    assert_eq!(
        NAME.holder(&store, &first.tenant_id, &value)
            .await
            .map(|held| held.version),
        Some(1),
        "the key keeps the version that claimed it"
    );
    let refused = append_keys(&store, &second, 1, vec![KeyChange::Claim(NAME.key(&value))]).await;
    assert!(
        matches!(refused, Err(EventStoreError::DuplicateKey(_))),
        "{refused:?}"
    );
    append_keys(
        &store,
        &first,
        4,
        vec![KeyChange::Release(NAME.key(&value))],
    )
    .await
    .expect("a confirmed key is released like any");
    assert!(NAME
        .holder(&store, &first.tenant_id, &value)
        .await
        .is_none());
}

/// `claim_keys` claims the keys that are free (a lapsed reservation included) at the version
/// given, leaves the aggregate's own keys alone and reports another holder's without changing
/// it; a second run claims nothing more.
pub async fn claim_keys_takes_free_keys_and_reports_held_ones(store: Store) {
    let (holder_of_taken, backfilled) = (aggregate(), aggregate());
    let (taken, free, lapsed) = (fresh("taken"), fresh("free"), fresh("lapsed"));
    append_keys(
        &store,
        &holder_of_taken,
        1,
        vec![
            KeyChange::Claim(NAME.key(&taken)),
            KeyChange::Claim(NAME.key(&lapsed).reserved_until(now() - 1_000)),
        ],
    )
    .await
    .unwrap();
    let keys = [NAME.key(&taken), NAME.key(&free), NAME.key(&lapsed)];
    let first = store
        .claim_keys(claim(&backfilled, 7, &keys))
        .await
        .expect("keys are claimed");
    let Some(KeyClaim::Taken(held)) = first.first() else {
        panic!("a held key is reported with its holder, got {first:?}");
    };
    assert_eq!(held.aggregate_id, holder_of_taken);
    assert_eq!(&first[1..], &[KeyClaim::Claimed, KeyClaim::Claimed]);
    for value in [&free, &lapsed] {
        assert_eq!(
            NAME.holder(&store, &backfilled.tenant_id, value)
                .await
                .map(|held| (held.aggregate_id, held.version)),
            Some((backfilled.clone(), 7))
        );
    }
    let second = store
        .claim_keys(claim(&backfilled, 8, &keys))
        .await
        .expect("keys are claimed again");
    assert!(matches!(second[0], KeyClaim::Taken(_)), "{second:?}");
    assert_eq!(&second[1..], &[KeyClaim::Held, KeyClaim::Held]);
    assert_eq!(
        NAME.holder(&store, &backfilled.tenant_id, &free)
            .await
            .map(|held| held.version),
        Some(7),
        "a second run changes nothing"
    );
    assert_eq!(
        NAME.holder_id(&store, &holder_of_taken.tenant_id, &taken)
            .await,
        Some(holder_of_taken)
    );
    let reserved = NAME.key(&fresh("later")).reserved_until(now() + 600_000);
    assert_eq!(
        store
            .claim_keys(claim(&backfilled, 8, std::slice::from_ref(&reserved)))
            .await
            .unwrap(),
        vec![KeyClaim::Claimed]
    );
    assert_eq!(
        store
            .find_key(&backfilled.tenant_id, &reserved)
            .await
            .unwrap()
            .map(|held| held.key),
        Some(reserved),
        "a backfilled key keeps its reservation time"
    );
    for (version, key) in [(0, NAME.key("x")), (1, UniqueKey::new("Bad Space", "x"))] {
        let refused = store.claim_keys(claim(&backfilled, version, &[key])).await;
        assert!(
            matches!(refused, Err(EventStoreError::IllegalArgument(_))),
            "{refused:?}"
        );
    }
}

/// The claim of `keys` for `aggregate_id` at `version`.
fn claim<'a>(
    aggregate_id: &'a AggregateId,
    version: u64,
    keys: &'a [UniqueKey],
) -> KeysToClaim<'a> {
    KeysToClaim {
        aggregate_id,
        version,
        keys,
    }
}

/// Sends `body` to the sign-up `id` through `node` and waits until it is processed.
async fn send_sign_up(
    node: &wow_runtime::pipeline::LocalPipeline,
    id: &AggregateId,
    body: wow_core::testing_example::SignUpCommand,
) -> wow_core::CommandResult {
    let command = wow_core::CommandMessage::of(id.clone(), body)
        .into_json()
        .expect("sign-up commands encode");
    match node
        .gateway
        .send_and_wait(command, wow_runtime::command::WaitPlan::processed())
        .await
    {
        Ok(result) => result,
        Err(error) => error.result().clone(),
    }
}

/// Through a processing node, the `SignUp` example: a sign-up reserves its name for a while;
/// another sign-up is refused `DuplicateKey` until the reservation lapses, then takes the
/// name, and the first sign-up's late confirmation is refused `DuplicateKey` (recorded as its
/// decision). A sign-up confirmed in time holds its name for good.
pub async fn a_sign_up_confirmed_late_loses_its_name_to_a_later_one(store: Store) {
    use wow_core::testing_example::{Nothing, SignUp, SignUpCommand, StartSignUp};
    use wow_core::ErrorCode;

    let mut registry = wow_core::aggregate::AggregateRegistry::new();
    registry
        .register::<SignUp>()
        .expect("the sign-up registers once");
    let node = wow_runtime::pipeline::LocalPipeline::builder(registry, store.clone()).build();
    let sign_up = || AggregateId::new("demo", "sign-up", wow_core::id::new_id(), "tck");
    let start = |value: &str, hold_ms: i64| {
        SignUpCommand::Start(StartSignUp {
            name: value.to_owned(),
            hold_ms,
        })
    };
    let value = fresh("eve");
    let (late, prompt, later) = (sign_up(), sign_up(), sign_up());
    assert!(
        send_sign_up(&node, &late, start(&value, 300))
            .await
            .succeeded
    );
    let refused = send_sign_up(&node, &prompt, start(&value, 600_000)).await;
    assert_eq!(refused.error_code, ErrorCode::DuplicateKey, "{refused:?}");
    until_free(&store, "tck", &value).await;
    assert!(
        send_sign_up(&node, &later, start(&value, 600_000))
            .await
            .succeeded
    );
    let confirmation = send_sign_up(&node, &late, SignUpCommand::Confirm(Nothing {})).await;
    assert_eq!(
        confirmation.error_code,
        ErrorCode::DuplicateKey,
        "{confirmation:?}"
    );
    assert_eq!(load_all(&store, &late).await.len(), 1, "nothing appended");
    assert!(
        send_sign_up(&node, &later, SignUpCommand::Confirm(Nothing {}))
            .await
            .succeeded
    );
    let held = NAME
        .holder(&store, "tck", &value)
        .await
        .expect("the confirmed name is held");
    assert_eq!((held.aggregate_id, held.key), (later, NAME.key(&value)));
}

/// 16 aggregates claim one key whose reservation lapsed, at once: exactly one takes it over,
/// every other is refused `DuplicateKey` naming the winner, and the first holder's
/// confirmation is refused too.
pub async fn claims_of_a_lapsed_reservation_have_exactly_one_winner(store: Store) {
    let first = aggregate();
    let value = fresh("race");
    append_keys(
        &store,
        &first,
        1,
        vec![KeyChange::Claim(
            NAME.key(&value).reserved_until(now() - 1_000),
        )],
    )
    .await
    .unwrap();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (store, value) = (store.clone(), value.clone());
            tokio::spawn(async move {
                let claimant = aggregate();
                let outcome = append_keys(
                    &store,
                    &claimant,
                    1,
                    vec![KeyChange::Claim(NAME.key(&value))],
                )
                .await;
                (claimant, outcome)
            })
        })
        .collect();
    let (mut winners, mut named) = (Vec::new(), Vec::new());
    for task in tasks {
        match task.await.expect("the task runs") {
            (claimant, Ok(())) => winners.push(claimant),
            (_, Err(EventStoreError::DuplicateKey(taken))) => named.push(taken.holder.aggregate_id),
            (_, Err(other)) => panic!("a losing claimant must get DuplicateKey, got {other:?}"),
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "exactly one claimant takes the lapsed key"
    );
    assert!(named.iter().all(|holder| *holder == winners[0]));
    let late = append_keys(&store, &first, 2, vec![KeyChange::Claim(NAME.key(&value))]).await;
    assert!(
        matches!(late, Err(EventStoreError::DuplicateKey(_))),
        "{late:?}"
    );
    assert_eq!(
        NAME.holder_id(&store, &first.tenant_id, &value).await,
        Some(winners[0].clone())
    );
}
