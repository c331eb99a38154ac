//! Unique keys across aggregates (SPEC DM-1): a claim is written in the same atomic write as
//! the stream that makes it, the store's constraint decides between claimants, and a refused
//! append changes no key.

use wow_core::eventsourcing::AppendChanges;
use wow_core::eventsourcing::EventStoreError;
use wow_core::unique_key::{KeyChange, UniqueKey};
use wow_core::AggregateId;

use super::keys::{append_keys, fresh, KeySpace};
use super::{load_all, Store};
use crate::fixtures::{aggregate, stream};

const SKU: KeySpace = KeySpace("sku");

fn claim(value: &str) -> KeyChange {
    KeyChange::Claim(SKU.key(value))
}

fn release(value: &str) -> KeyChange {
    KeyChange::Release(SKU.key(value))
}

/// A claim is written with its stream: the key is held by the aggregate at the version of the
/// stream that claimed it, in the aggregate's tenant only.
pub async fn a_claim_is_written_with_its_stream(store: Store) {
    let product = aggregate();
    let value = fresh("a");
    append_keys(&store, &product, 1, vec![claim(&value)])
        .await
        .expect("a free key is claimed");
    let held = SKU
        .holder(&store, &product.tenant_id, &value)
        .await
        .expect("the key is held");
    assert_eq!(held.aggregate_id, product);
    assert_eq!((held.key, held.version), (SKU.key(&value), 1));
    assert_eq!(load_all(&store, &product).await.len(), 1);
    assert!(SKU.holder(&store, "another-tenant", &value).await.is_none());
}

/// A claim of a key another aggregate holds refuses the whole append: `DuplicateKey` names
/// the holder, the stream is not appended, and the append's other claims are not taken.
pub async fn a_key_another_aggregate_holds_refuses_the_whole_append(store: Store) {
    let (first, second) = (aggregate(), aggregate());
    let (taken, free) = (fresh("taken"), fresh("free"));
    append_keys(&store, &first, 1, vec![claim(&taken)])
        .await
        .unwrap();
    let refused = append_keys(&store, &second, 1, vec![claim(&free), claim(&taken)]).await;
    match refused {
        Err(EventStoreError::DuplicateKey(key_taken)) => {
            assert_eq!(key_taken.holder.aggregate_id, first);
            assert_eq!(key_taken.holder.key, SKU.key(&taken));
            assert_eq!(key_taken.stream.aggregate_id, second);
        }
        other => panic!("a held key must refuse the append with DuplicateKey, got {other:?}"),
    }
    assert!(
        load_all(&store, &second).await.is_empty(),
        "nothing appended"
    );
    assert!(
        SKU.holder(&store, &second.tenant_id, &free).await.is_none(),
        "all or nothing: the free key of the refused append is not taken"
    );
    assert_eq!(
        SKU.holder_id(&store, &first.tenant_id, &taken).await,
        Some(first)
    );
}

/// A release frees a key for another aggregate; a move (release one, claim another, in one
/// append) holds the new key at the stream's version.
pub async fn a_release_frees_a_key_and_a_move_takes_the_new_one(store: Store) {
    let (first, second) = (aggregate(), aggregate());
    let (old, new) = (fresh("old"), fresh("new"));
    append_keys(&store, &first, 1, vec![claim(&old)])
        .await
        .unwrap();
    append_keys(&store, &first, 2, vec![release(&old), claim(&new)])
        .await
        .expect("a move is appended");
    assert!(SKU.holder(&store, &first.tenant_id, &old).await.is_none());
    let held = SKU.holder(&store, &first.tenant_id, &new).await.unwrap();
    assert_eq!((held.aggregate_id, held.version), (first.clone(), 2));
    append_keys(&store, &second, 1, vec![claim(&old)])
        .await
        .expect("a released key is free for another aggregate");
    assert_eq!(
        SKU.holder_id(&store, &second.tenant_id, &old).await,
        Some(second)
    );
}

/// A claim of a key the aggregate holds already changes nothing (the claim keeps its first
/// version); a release of a key the aggregate does not hold leaves its holder alone.
pub async fn claiming_a_key_held_and_releasing_one_not_held_change_nothing(store: Store) {
    let (first, second) = (aggregate(), aggregate());
    let value = fresh("kept");
    append_keys(&store, &first, 1, vec![claim(&value)])
        .await
        .unwrap();
    append_keys(&store, &first, 2, vec![claim(&value)])
        .await
        .expect("the holder may claim its key again");
    append_keys(&store, &second, 1, vec![release(&value)])
        .await
        .expect("releasing a key one does not hold appends the stream");
    let held = SKU.holder(&store, &first.tenant_id, &value).await.unwrap();
    assert_eq!((held.aggregate_id, held.version), (first, 1));
    assert_eq!(load_all(&store, &second).await.len(), 1);
}

/// Keys are per tenant and per key space: another tenant, or another space, holds the same
/// value apart.
pub async fn keys_are_per_tenant_and_per_space(store: Store) {
    let here = aggregate();
    let mut elsewhere = aggregate();
    elsewhere.tenant_id = "tenant-b".to_owned();
    let other_space = aggregate();
    let value = fresh("shared");
    append_keys(&store, &here, 1, vec![claim(&value)])
        .await
        .unwrap();
    append_keys(&store, &elsewhere, 1, vec![claim(&value)])
        .await
        .expect("another tenant holds its own keys");
    store
        .append_with(
            &stream(&other_space, 1, "r-email"),
            &AppendChanges::keys(vec![KeyChange::Claim(UniqueKey::new(
                "email",
                value.clone(),
            ))]),
        )
        .await
        .expect("another key space holds its own values");
    assert_eq!(
        SKU.holder_id(&store, "tenant-b", &value).await,
        Some(elsewhere)
    );
    assert_eq!(
        SKU.holder_id(&store, &here.tenant_id, &value).await,
        Some(here.clone())
    );
    let email = store
        .find_key(&here.tenant_id, &UniqueKey::new("email", value))
        .await
        .unwrap()
        .map(|held| held.aggregate_id);
    assert_eq!(email, Some(other_space));
}

/// An operator's release (`release_key`) frees a key whoever holds it and answers that
/// holder; the same value in another tenant stays held; a free key answers `None`; another
/// aggregate may then claim it, and the former holder's later release of it leaves the new
/// holder alone. An illegal key is `IllegalArgument`.
pub async fn an_operator_release_frees_a_key_whoever_holds_it(store: Store) {
    let (first, second) = (aggregate(), aggregate());
    let mut elsewhere = aggregate();
    elsewhere.tenant_id = "tenant-b".to_owned();
    let value = fresh("released");
    append_keys(&store, &first, 1, vec![claim(&value)])
        .await
        .unwrap();
    append_keys(&store, &elsewhere, 1, vec![claim(&value)])
        .await
        .unwrap();

    let released = store
        .release_key(&first.tenant_id, &SKU.key(&value))
        .await
        .expect("a held key is released");
    let released = released.expect("the release names the holder it had");
    assert_eq!(
        (released.aggregate_id, released.key, released.version),
        (first.clone(), SKU.key(&value), 1)
    );
    assert!(SKU.holder(&store, &first.tenant_id, &value).await.is_none());
    assert_eq!(
        SKU.holder_id(&store, "tenant-b", &value).await,
        Some(elsewhere),
        "another tenant's holder of the value is not released"
    );
    assert_eq!(
        store
            .release_key(&first.tenant_id, &SKU.key(&value))
            .await
            .expect("a free key can be released"),
        None,
        "a free key: nothing released"
    );

    append_keys(&store, &second, 1, vec![claim(&value)])
        .await
        .expect("a released key is free for another aggregate");
    append_keys(&store, &first, 2, vec![release(&value)])
        .await
        .expect("the former holder's release appends");
    assert_eq!(
        SKU.holder_id(&store, &second.tenant_id, &value).await,
        Some(second),
        "the former holder's release leaves the new holder alone"
    );
    for bad in [UniqueKey::new("Bad Space", "x"), UniqueKey::new("sku", "")] {
        let refused = store.release_key(&first.tenant_id, &bad).await;
        assert!(
            matches!(refused, Err(EventStoreError::IllegalArgument(_))),
            "an illegal key is IllegalArgument: {refused:?}"
        );
    }
}

/// A release racing 16 claimants of a held key: the release finds the holder (no claim can
/// take a held key), at most one claimant wins, every other is `DuplicateKey` naming the
/// first holder or the winner, and the key ends the winner's or free.
pub async fn a_release_racing_claims_frees_the_key_once(store: Store) {
    let first = aggregate();
    let value = fresh("contended");
    append_keys(&store, &first, 1, vec![claim(&value)])
        .await
        .unwrap();
    let claims: Vec<_> = (0..16)
        .map(|_| {
            let (store, value) = (store.clone(), value.clone());
            tokio::spawn(async move {
                let product = aggregate();
                let outcome = append_keys(&store, &product, 1, vec![claim(&value)]).await;
                (product, outcome)
            })
        })
        .collect();
    let released = store
        .release_key(&first.tenant_id, &SKU.key(&value))
        .await
        .expect("the release is answered");
    assert_eq!(
        released.map(|held| held.aggregate_id),
        Some(first.clone()),
        "no claim takes a held key, so the release finds its first holder"
    );
    let (mut winners, mut named) = (Vec::new(), Vec::new());
    for task in claims {
        match task.await.expect("the task runs") {
            (product, Ok(())) => winners.push(product),
            (_, Err(EventStoreError::DuplicateKey(taken))) => named.push(taken.holder.aggregate_id),
            (_, Err(other)) => panic!("a losing claimant must get DuplicateKey, got {other:?}"),
        }
    }
    assert!(winners.len() <= 1, "at most one claimant wins: {winners:?}");
    for holder in &named {
        assert!(
            *holder == first || winners.contains(holder),
            "a refusal names the first holder or the winner: {holder}"
        );
    }
    assert_eq!(
        SKU.holder_id(&store, &first.tenant_id, &value).await,
        winners.first().cloned()
    );
}

/// An append refused for its request id or its version changes no key, and neither does an
/// illegal key, which is `IllegalArgument` with nothing written.
pub async fn a_refused_append_changes_no_key(store: Store) {
    let product = aggregate();
    let (first, by_conflict, by_duplicate) = (fresh("first"), fresh("conflict"), fresh("dup"));
    store
        .append_with(
            &stream(&product, 1, "r-1"),
            &AppendChanges::keys(vec![claim(&first)]),
        )
        .await
        .unwrap();
    let conflict = append_keys(&store, &product, 1, vec![claim(&by_conflict)]).await;
    assert!(
        matches!(
            conflict,
            Err(EventStoreError::DuplicateAggregateId(_) | EventStoreError::EventVersionConflict(_))
        ),
        "a taken version is a conflict: {conflict:?}"
    );
    let duplicate = store
        .append_with(
            &stream(&product, 2, "r-1"),
            &AppendChanges::keys(vec![claim(&by_duplicate)]),
        )
        .await;
    assert!(
        matches!(duplicate, Err(EventStoreError::DuplicateRequestId(_))),
        "a held request id is its duplicate: {duplicate:?}"
    );
    for value in [&by_conflict, &by_duplicate] {
        assert!(SKU
            .holder(&store, &product.tenant_id, value)
            .await
            .is_none());
    }
    for bad in [UniqueKey::new("Bad Space", "x"), UniqueKey::new("sku", "")] {
        let refused = store
            .append_with(
                &stream(&product, 2, "r-bad"),
                &AppendChanges::keys(vec![KeyChange::Claim(bad)]),
            )
            .await;
        assert!(
            matches!(refused, Err(EventStoreError::IllegalArgument(_))),
            "an illegal key is IllegalArgument: {refused:?}"
        );
    }
    assert_eq!(
        load_all(&store, &product).await.len(),
        1,
        "nothing appended"
    );
}

/// 32 aggregates claim one value at once: exactly one wins, every other gets `DuplicateKey`
/// naming the winner, and the key is the winner's.
pub async fn concurrent_claims_of_one_value_have_exactly_one_winner(store: Store) {
    let value = fresh("race");
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let (store, value) = (store.clone(), value.clone());
            tokio::spawn(async move {
                let product = aggregate();
                let outcome = append_keys(&store, &product, 1, vec![claim(&value)]).await;
                (product, outcome)
            })
        })
        .collect();
    let (mut winners, mut losers) = (Vec::new(), Vec::new());
    for task in tasks {
        match task.await.expect("the task runs") {
            (product, Ok(())) => winners.push(product),
            (product, Err(EventStoreError::DuplicateKey(taken))) => {
                losers.push((product, taken.holder.aggregate_id))
            }
            (_, Err(other)) => panic!("a losing claimant must get DuplicateKey, got {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one claimant wins");
    let winner = &winners[0];
    for (loser, named) in &losers {
        assert_eq!(named, winner, "DuplicateKey names the winner");
        assert!(load_all(&store, loser).await.is_empty());
    }
    assert_eq!(
        SKU.holder_id(&store, &winner.tenant_id, &value).await,
        Some(winner.clone())
    );
}

/// A process of its own over `store` running the crate's `Member` example, whose handle is
/// a unique key.
fn members(store: &Store) -> wow_runtime::pipeline::LocalPipeline {
    let mut registry = wow_core::aggregate::AggregateRegistry::new();
    registry
        .register::<wow_core::testing_example::Member>()
        .expect("the member registers once");
    wow_runtime::pipeline::LocalPipeline::builder(registry, store.clone()).build()
}

fn member() -> AggregateId {
    AggregateId::new("demo", "member", wow_core::id::new_id(), "tck")
}

/// The member command `body` for `member`, as the gateway takes it.
fn member_command(
    member: &AggregateId,
    body: wow_core::testing_example::MemberCommand,
) -> wow_core::command::JsonCommand {
    wow_core::CommandMessage::of(member.clone(), body)
        .into_json()
        .expect("member commands encode")
}

fn handle(handle: &str) -> wow_core::testing_example::Handle {
    wow_core::testing_example::Handle {
        handle: handle.to_owned(),
    }
}

fn register(member: &AggregateId, name: &str) -> wow_core::command::JsonCommand {
    member_command(
        member,
        wow_core::testing_example::MemberCommand::Register(handle(name)),
    )
}

fn change_handle(member: &AggregateId, name: &str) -> wow_core::command::JsonCommand {
    member_command(
        member,
        wow_core::testing_example::MemberCommand::ChangeHandle(handle(name)),
    )
}

/// Sends `command` through `pipeline` and waits until it is processed: its result, a failed
/// wait's included.
pub(super) async fn send(
    pipeline: &wow_runtime::pipeline::LocalPipeline,
    command: wow_core::command::JsonCommand,
) -> wow_core::CommandResult {
    match pipeline
        .gateway
        .send_and_wait(command, wow_runtime::command::WaitPlan::processed())
        .await
    {
        Ok(result) => result,
        Err(error) => error.result().clone(),
    }
}

async fn handle_holder(store: &Store, handle: &str) -> Option<AggregateId> {
    store
        .find_key("tck", &UniqueKey::new("handle", handle))
        .await
        .expect("a key can be looked up")
        .map(|held| held.aggregate_id)
}

/// Through a processing node: the aggregate's state claims its handle with the stream; a
/// second member's claim is refused `DuplicateKey` and recorded as its decision, so its
/// resend (a new message, the same request id, on another process) is answered the same
/// and still appends nothing; a rejected command claims nothing; a changed handle frees the
/// old one for a new request.
pub async fn a_second_claimant_is_refused_and_its_resend_replays_the_refusal(store: Store) {
    use wow_core::ErrorCode;
    let (ann, bob) = (member(), member());
    let (handle, other) = (fresh("ann"), fresh("anna"));
    let node = members(&store);
    assert!(send(&node, register(&ann, &handle)).await.succeeded);
    assert_eq!(handle_holder(&store, &handle).await, Some(ann.clone()));

    let refused_command = register(&bob, &handle).with_request_id("bob-register");
    let refused = send(&node, refused_command.clone()).await;
    assert_eq!(refused.error_code, ErrorCode::DuplicateKey, "{refused:?}");
    assert!(
        refused.error_msg.contains(&handle) && !refused.error_msg.contains(&ann.id),
        "the refusal names the handle, never its holder (SPEC TN-2): {}",
        refused.error_msg
    );
    assert!(load_all(&store, &bob).await.is_empty());
    let mut resend = refused_command;
    resend.id = wow_core::id::new_id();
    let replayed = send(&members(&store), resend).await;
    assert_eq!(replayed.error_code, ErrorCode::DuplicateKey, "{replayed:?}");
    assert_eq!(
        replayed.error_msg, refused.error_msg,
        "the recorded message"
    );
    assert!(
        load_all(&store, &bob).await.is_empty(),
        "the resend appends nothing"
    );
    let decision = store
        .find_decision(&bob, "bob-register")
        .await
        .unwrap()
        .expect("the refusal is the recorded decision");
    assert!(matches!(
        decision,
        wow_core::eventsourcing::RequestDecision::Rejected(ref record)
            if record.error_code == ErrorCode::DuplicateKey
    ));

    let reserved = send(&node, register(&member(), "admin")).await;
    assert_eq!(reserved.error_code, ErrorCode::domain("Reserved"));
    assert!(handle_holder(&store, "admin").await.is_none());

    assert!(send(&node, change_handle(&ann, &other)).await.succeeded);
    assert_eq!(handle_holder(&store, &other).await, Some(ann));
    let again = send(&node, register(&bob, &handle)).await;
    assert!(
        again.succeeded,
        "a freed handle is taken by a new request: {again:?}"
    );
    assert_eq!(handle_holder(&store, &handle).await, Some(bob));
}

/// 16 members on two processes over one store register one handle at once: exactly one
/// succeeds, every other is `DuplicateKey`, and the handle is the winner's.
pub async fn claims_through_two_processes_have_exactly_one_winner(store: Store) {
    use wow_core::ErrorCode;
    let handle = fresh("race");
    let nodes = [
        std::sync::Arc::new(members(&store)),
        std::sync::Arc::new(members(&store)),
    ];
    let tasks: Vec<_> = (0..16)
        .map(|index| {
            let (node, handle) = (nodes[index % 2].clone(), handle.clone());
            tokio::spawn(async move {
                let id = member();
                let result = send(&node, register(&id, &handle)).await;
                (id, result)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        let (id, result) = task.await.expect("the task runs");
        if result.succeeded {
            winners.push(id);
        } else {
            assert_eq!(result.error_code, ErrorCode::DuplicateKey, "{result:?}");
        }
    }
    assert_eq!(winners.len(), 1, "exactly one member takes the handle");
    assert_eq!(
        handle_holder(&store, &handle).await,
        Some(winners[0].clone())
    );
}
