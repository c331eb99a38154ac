//! Conflicts are not decisions (SPEC ES-3, ID-6), and a message is never a duplicate of
//! itself: the cases run a processing node of the crate's counter example on the store under
//! test, since what is recorded is the node's choice and the store's constraint together.

use wow_core::aggregate::AggregateRegistry;
use wow_core::command::JsonCommand;
use wow_core::testing_example::{Add, Counter, CounterCommand};
use wow_core::{id, AggregateId, CommandMessage, CommandResult, ErrorCode};
use wow_runtime::command::{look_up_request, RequestOutcome, WaitPlan};
use wow_runtime::pipeline::LocalPipeline;

use super::Store;

/// A process of its own over `store`: new filters, an empty cache (a restart, or a second
/// machine on the same store).
fn process(store: &Store) -> LocalPipeline {
    let mut registry = AggregateRegistry::new();
    registry
        .register::<Counter>()
        .expect("the counter registers once");
    LocalPipeline::builder(registry, store.clone()).build()
}

fn counter() -> AggregateId {
    AggregateId::new("demo", "counter", id::new_id(), "tck")
}

fn command(aggregate: &AggregateId, body: CounterCommand) -> JsonCommand {
    CommandMessage::of(aggregate.clone(), body)
        .into_json()
        .expect("counter commands encode")
}

fn add(aggregate: &AggregateId, by: u64, request_id: &str) -> JsonCommand {
    command(aggregate, CounterCommand::Add(Add { by })).with_request_id(request_id)
}

async fn send(pipeline: &LocalPipeline, command: JsonCommand) -> CommandResult {
    match pipeline
        .gateway
        .send_and_wait(command, WaitPlan::processed())
        .await
    {
        Ok(result) => result,
        Err(error) => error.result().clone(),
    }
}

async fn started(pipeline: &LocalPipeline) -> AggregateId {
    let aggregate = counter();
    let result = send(pipeline, command(&aggregate, CounterCommand::Start)).await;
    assert!(result.succeeded, "the counter starts: {result:?}");
    aggregate
}

/// A command whose expected version history has passed is answered
/// `CommandExpectVersionConflict` and records nothing: the store holds no decision, the
/// look-up answers NONE, and the retry with the same request id and the fresh version is
/// decided afresh, also on another process (the expected version is not in the fingerprint).
pub async fn an_expected_version_conflict_records_nothing(store: Store) {
    let first = process(&store);
    let aggregate = started(&first).await;
    let stale = add(&aggregate, 2, "r-pinned").with_expected_version(0);
    let conflict = send(&first, stale).await;
    assert_eq!(conflict.error_code, ErrorCode::CommandExpectVersionConflict);
    assert!(
        store
            .find_decision(&aggregate, "r-pinned")
            .await
            .expect("the look-up succeeds")
            .is_none(),
        "a conflict is not a decision"
    );
    let outcome = look_up_request(&first.gateway, store.as_ref(), &aggregate, "r-pinned").await;
    assert!(
        matches!(outcome, RequestOutcome::None),
        "no decision: {outcome:?}"
    );
    let fresh = add(&aggregate, 2, "r-pinned").with_expected_version(1);
    let decided = send(&first, fresh).await;
    assert!(decided.succeeded, "decided afresh: {decided:?}");
    assert_eq!(decided.aggregate_version, Some(2));
    // Appended now: on another process a further retry is its duplicate, never a conflict.
    let again = add(&aggregate, 2, "r-pinned").with_expected_version(2);
    let duplicate = send(&process(&store), again).await;
    assert_eq!(duplicate.error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(duplicate.aggregate_version, Some(2));
    assert!(matches!(
        look_up_request(&first.gateway, store.as_ref(), &aggregate, "r-pinned").await,
        RequestOutcome::Appended(record) if record.version == 2
    ));
}

/// A pinned command that loses the race on the append (its process decided on a cached state
/// that another process has passed) is answered as a conflict, records nothing, and its retry
/// at the fresh version appends.
pub async fn a_lost_race_on_the_append_records_nothing(store: Store) {
    let stale = process(&store);
    let aggregate = started(&stale).await; // `stale` caches version 1
    let other = process(&store);
    assert!(send(&other, add(&aggregate, 1, "r-other")).await.succeeded); // history: version 2

    let pinned = add(&aggregate, 5, "r-race").with_expected_version(1);
    let lost = send(&stale, pinned).await;
    assert_eq!(lost.error_code, ErrorCode::CommandExpectVersionConflict);
    assert_eq!(lost.aggregate_version, Some(2), "the version history is at");
    assert!(store
        .find_decision(&aggregate, "r-race")
        .await
        .expect("the look-up succeeds")
        .is_none());

    let retried = send(
        &stale,
        add(&aggregate, 5, "r-race").with_expected_version(2),
    )
    .await;
    assert!(retried.succeeded, "decided afresh: {retried:?}");
    assert_eq!(retried.aggregate_version, Some(3));
    let history = store
        .load(&aggregate, 1, u64::MAX)
        .await
        .expect("history loads");
    assert_eq!(history.len(), 3, "one append per intent");
}

/// A message of an intent already appended, pinned to a version history has passed, on a
/// process whose filters never saw the request id (a restart, another node): the answer is
/// the intent's original decision (its duplicate, with the version it was appended at),
/// never a conflict that would tell its caller nothing happened.
pub async fn a_stale_pin_of_an_appended_intent_is_its_duplicate(store: Store) {
    let first = process(&store);
    let aggregate = started(&first).await;
    let intent = add(&aggregate, 4, "r-applied").with_expected_version(1);
    let appended = send(&first, intent.clone()).await;
    assert_eq!(appended.aggregate_version, Some(2));
    assert!(send(&first, add(&aggregate, 1, "r-later")).await.succeeded); // history: 3

    let mut again = intent.clone();
    again.id = id::new_id();
    let answer = send(&process(&store), again).await;
    assert_eq!(
        answer.error_code,
        ErrorCode::DuplicateRequestId,
        "the intent was appended: {answer:?}"
    );
    assert_eq!(
        answer.aggregate_version,
        Some(2),
        "the version it was appended at"
    );
}

/// The same message handled again after its append (a redelivery before the acknowledgement,
/// or a partition's new owner) is answered as the success it was, at its version; another
/// message with the same request id is still `DuplicateRequestId`.
pub async fn a_redelivered_message_is_its_own_success(store: Store) {
    let first = process(&store);
    let aggregate = started(&first).await;
    let message = add(&aggregate, 3, "r-once");
    let appended = send(&first, message.clone()).await;
    assert!(appended.succeeded);

    // Delivered again to the node (the bus redelivers a message whose acknowledgement was
    // lost), and to a fresh node (a partition's new owner).
    for node in [first.restart_node(), process(&store).restart_node()] {
        let again = node.process(&message).await;
        assert!(again.succeeded, "its own append is its success: {again:?}");
        assert_eq!(again.error_code, ErrorCode::Ok);
        assert_eq!(again.aggregate_version, appended.aggregate_version);
        assert_eq!(again.command_id, message.id);
    }
    let mut other = message.clone();
    other.id = id::new_id();
    let duplicate = send(&process(&store), other).await;
    assert_eq!(duplicate.error_code, ErrorCode::DuplicateRequestId);
    let history = store
        .load(&aggregate, 1, u64::MAX)
        .await
        .expect("history loads");
    assert_eq!(history.len(), 2, "appended once");
}
