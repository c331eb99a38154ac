//! The cases of one decision per request id (SPEC ID-6): recorded rejections share the key
//! of appended streams, and the store's own constraint decides between them.

use std::sync::Arc;

use wow_core::eventsourcing::{EventStoreError, RejectionRecord, RequestDecision};
use wow_core::{id, AggregateId, DomainEventStream, ErrorCode, NamedAggregate};

use super::{append_ok, load_all, Store};
use crate::fixtures::{aggregate, stream, stream_at, AGGREGATE, CONTEXT};

/// A rejection with `code`, decided on `version`, made now by a command of its own.
pub(crate) fn rejection(code: ErrorCode, version: u64) -> RejectionRecord {
    RejectionRecord {
        command_id: id::new_id(),
        fingerprint: format!("fp-{}", id::new_id()),
        error_msg: format!("{code}: the rule said no ✗"),
        error_code: code,
        version,
        create_time: id::now_millis(),
    }
}

async fn reject_ok(
    store: &Store,
    aggregate: &AggregateId,
    request_id: &str,
    rejection: &RejectionRecord,
) {
    if let Err(error) = store
        .record_rejection(aggregate, request_id, rejection)
        .await
    {
        panic!("recording the rejection of {request_id} failed: {error:?}");
    }
}

async fn decision(
    store: &Store,
    aggregate: &AggregateId,
    request_id: &str,
) -> Option<RequestDecision> {
    store
        .find_decision(aggregate, request_id)
        .await
        .expect("the decision look-up succeeds")
}

/// The decision a store holds for an appended stream.
fn appended(stream: &DomainEventStream) -> RequestDecision {
    RequestDecision::Appended(wow_core::eventsourcing::RequestRecord {
        stream_id: stream.id.clone(),
        version: stream.version,
        command_id: stream.command_id.clone(),
        create_time: stream.create_time,
        fingerprint: stream.fingerprint.clone(),
    })
}

/// A recorded rejection comes back whole from `find_decision` (code, message, version,
/// command id, fingerprint, time), beside the appended streams of the same aggregate; it is
/// not a stream, so `find_request` does not see it (SPEC ID-6, TO-1).
pub async fn records_a_rejection_and_finds_it(store: Store) {
    let (order, fresh) = (aggregate(), aggregate());
    let first = stream_at(&order, 1, "r-1", 1_700_000_000_321);
    append_ok(&store, &first).await;
    let rule = rejection(ErrorCode::domain("InsufficientBalance"), 1);
    reject_ok(&store, &order, "r-2", &rule).await;
    let missing = rejection(ErrorCode::NotFound, 0);
    reject_ok(&store, &fresh, "r-1", &missing).await;

    assert_eq!(
        decision(&store, &order, "r-2").await,
        Some(RequestDecision::Rejected(rule.clone()))
    );
    assert_eq!(
        decision(&store, &fresh, "r-1").await,
        Some(RequestDecision::Rejected(missing))
    );
    assert_eq!(
        decision(&store, &order, "r-1").await,
        Some(appended(&first))
    );
    assert_eq!(decision(&store, &order, "never-sent").await, None);
    assert!(
        store.find_request(&order, "r-2").await.unwrap().is_none(),
        "a rejection is not an appended stream"
    );
    assert_eq!(
        load_all(&store, &order).await,
        vec![first],
        "a rejection writes no stream"
    );
}

/// After a rejection, a stream with its request id is `DuplicateRequestId` (also at a taken
/// version, SPEC ES-4) and leaves nothing behind; the rejection stands, and streams with
/// other request ids append as before.
pub async fn a_rejection_blocks_a_later_append_of_its_request_id(store: Store) {
    let order = aggregate();
    let rule = rejection(ErrorCode::NotFound, 0);
    reject_ok(&store, &order, "r-1", &rule).await;
    let late = stream(&order, 1, "r-1");
    match store.append(&late).await {
        Err(EventStoreError::DuplicateRequestId(rejected)) => {
            assert_eq!(rejected.stream_id, late.id);
            assert_eq!(rejected.command_id, late.command_id);
            assert_eq!(rejected.request_id, "r-1");
            assert_eq!(rejected.version, 1);
            assert_eq!(rejected.aggregate_id, order);
        }
        other => panic!("expected DuplicateRequestId, got {other:?}"),
    }
    assert!(load_all(&store, &order).await.is_empty());
    let created = stream(&order, 1, "r-2");
    append_ok(&store, &created).await;
    let rule_at_1 = rejection(ErrorCode::domain("Closed"), 1);
    reject_ok(&store, &order, "r-3", &rule_at_1).await;
    assert!(
        matches!(
            store.append(&stream(&order, 1, "r-3")).await,
            Err(EventStoreError::DuplicateRequestId(_))
        ),
        "a rejected request id at a taken version is reported as the request id"
    );
    assert!(matches!(
        store.append(&stream(&order, 2, "r-3")).await,
        Err(EventStoreError::DuplicateRequestId(_))
    ));
    assert_eq!(load_all(&store, &order).await, vec![created]);
    assert_eq!(
        decision(&store, &order, "r-1").await,
        Some(RequestDecision::Rejected(rule))
    );
    assert_eq!(
        decision(&store, &order, "r-3").await,
        Some(RequestDecision::Rejected(rule_at_1))
    );
}

/// After an append, a rejection of its request id is `DuplicateRequestId` carrying the
/// rejection's ids, and the appended decision stands.
pub async fn an_append_blocks_a_later_rejection_of_its_request_id(store: Store) {
    let order = aggregate();
    let first = stream(&order, 1, "r-1");
    append_ok(&store, &first).await;
    let late = rejection(ErrorCode::domain("TooLate"), 1);
    match store.record_rejection(&order, "r-1", &late).await {
        Err(EventStoreError::DuplicateRequestId(rejected)) => {
            assert_eq!(rejected.request_id, "r-1");
            assert_eq!(rejected.command_id, late.command_id);
            assert_eq!(rejected.aggregate_id, order);
        }
        other => panic!("expected DuplicateRequestId, got {other:?}"),
    }
    assert_eq!(
        decision(&store, &order, "r-1").await,
        Some(appended(&first))
    );
    assert_eq!(load_all(&store, &order).await, vec![first]);
}

/// A second rejection of a request id is `DuplicateRequestId`; the first one stands.
pub async fn a_second_rejection_of_a_request_id_is_a_duplicate(store: Store) {
    let order = aggregate();
    let first = rejection(ErrorCode::domain("Frozen"), 0);
    reject_ok(&store, &order, "r-1", &first).await;
    let second = rejection(ErrorCode::NotFound, 0);
    match store.record_rejection(&order, "r-1", &second).await {
        Err(EventStoreError::DuplicateRequestId(rejected)) => {
            assert_eq!(rejected.request_id, "r-1");
            assert_eq!(rejected.command_id, second.command_id);
        }
        other => panic!("expected DuplicateRequestId, got {other:?}"),
    }
    assert!(
        matches!(
            store.record_rejection(&order, "r-1", &first).await,
            Err(EventStoreError::DuplicateRequestId(_))
        ),
        "even the same rejection again is a duplicate"
    );
    assert_eq!(
        decision(&store, &order, "r-1").await,
        Some(RequestDecision::Rejected(first))
    );
}

/// A rejection belongs to its aggregate (SPEC ID-3): the same request id on another
/// aggregate, or on an aggregate of another type with the same id, is decided on its own. An
/// aggregate that has only rejections has no history: it is not listed, has no last stream
/// and loads as empty.
pub async fn rejections_are_per_aggregate(store: Store) {
    let (a, b, c) = (aggregate(), aggregate(), aggregate());
    let on_a = rejection(ErrorCode::domain("Refused"), 0);
    reject_ok(&store, &a, "shared", &on_a).await;
    let on_b = stream(&b, 1, "shared");
    append_ok(&store, &on_b).await;
    let on_c = rejection(ErrorCode::NotFound, 0);
    reject_ok(&store, &c, "shared", &on_c).await;
    let mut other_type = aggregate();
    other_type.aggregate_name = "invoice".to_owned();
    other_type.id = a.id.clone();
    let on_other_type = stream(&other_type, 1, "shared");
    append_ok(&store, &on_other_type).await;

    assert_eq!(
        decision(&store, &a, "shared").await,
        Some(RequestDecision::Rejected(on_a))
    );
    assert_eq!(decision(&store, &b, "shared").await, Some(appended(&on_b)));
    assert_eq!(
        decision(&store, &c, "shared").await,
        Some(RequestDecision::Rejected(on_c))
    );
    assert_eq!(
        decision(&store, &other_type, "shared").await,
        Some(appended(&on_other_type))
    );
    assert_eq!(decision(&store, &aggregate(), "shared").await, None);

    for only_rejected in [&a, &c] {
        assert!(load_all(&store, only_rejected).await.is_empty());
        assert!(store.last(only_rejected).await.unwrap().is_none());
        assert!(store
            .load_by_time(only_rejected, i64::MIN, i64::MAX)
            .await
            .unwrap()
            .is_empty());
    }
    let listed = store
        .scan_aggregate_ids(&NamedAggregate::new(CONTEXT, AGGREGATE), None, 100)
        .await
        .unwrap();
    assert_eq!(
        listed,
        vec![b],
        "only the aggregate with a stream is listed"
    );
}

/// A decision is seen only under the tenant that made it (SPEC TN-1): another tenant asking
/// for the same aggregate id and request id finds none, so no answer tells it what the
/// first tenant did.
pub async fn decisions_are_seen_only_by_their_tenant(store: Store) {
    let (a, b) = (aggregate(), aggregate());
    let refused = rejection(ErrorCode::domain("Refused"), 0);
    reject_ok(&store, &a, "mine", &refused).await;
    let appended_stream = stream(&b, 1, "mine");
    append_ok(&store, &appended_stream).await;
    for own in [&a, &b] {
        let mut elsewhere = own.clone();
        elsewhere.tenant_id = format!("{}-other", own.tenant_id);
        assert_eq!(decision(&store, &elsewhere, "mine").await, None);
        assert!(store
            .find_request(&elsewhere, "mine")
            .await
            .unwrap()
            .is_none());
    }
    assert_eq!(
        decision(&store, &a, "mine").await,
        Some(RequestDecision::Rejected(refused))
    );
    assert_eq!(
        decision(&store, &b, "mine").await,
        Some(appended(&appended_stream))
    );
}

/// A rejection with an empty request id is `IllegalArgument`, and nothing is recorded.
pub async fn rejects_a_rejection_with_an_empty_request_id(store: Store) {
    let order = aggregate();
    assert!(matches!(
        store
            .record_rejection(&order, "", &rejection(ErrorCode::NotFound, 0))
            .await,
        Err(EventStoreError::IllegalArgument(_))
    ));
    assert_eq!(decision(&store, &order, "").await, None);
    assert!(store.last(&order).await.unwrap().is_none());
    let created = stream(&order, 1, "r-1");
    append_ok(&store, &created).await;
    assert_eq!(load_all(&store, &order).await, vec![created]);
}

/// What one racer of [`rejection_and_append_race_has_exactly_one_decision`] tried and got.
enum Attempt {
    Append(DomainEventStream, Result<(), EventStoreError>),
    Reject(RejectionRecord, Result<(), EventStoreError>),
}

impl Attempt {
    fn won(&self) -> bool {
        match self {
            Attempt::Append(_, outcome) | Attempt::Reject(_, outcome) => outcome.is_ok(),
        }
    }

    /// The decision a store holds when this attempt won.
    fn decision(&self) -> RequestDecision {
        match self {
            Attempt::Append(stream, _) => appended(stream),
            Attempt::Reject(rejection, _) => RequestDecision::Rejected(rejection.clone()),
        }
    }

    /// Panics unless a lost attempt failed as a duplicate (or, for an append, as the version
    /// conflict that a competing append at its version may cause first).
    fn check_lost(&self) {
        match self {
            Attempt::Append(
                _,
                Err(
                    EventStoreError::DuplicateRequestId(_)
                    | EventStoreError::EventVersionConflict(_),
                ),
            )
            | Attempt::Reject(_, Err(EventStoreError::DuplicateRequestId(_))) => {}
            Attempt::Append(_, outcome) => {
                panic!("a losing append must get DuplicateRequestId, got {outcome:?}")
            }
            Attempt::Reject(_, outcome) => {
                panic!("a losing rejection must get DuplicateRequestId, got {outcome:?}")
            }
        }
    }
}

/// Runs every attempt of `attempts` at once, all released together: with a stream, its
/// append; without, a rejection of the request id on the aggregate.
async fn race(
    store: &Store,
    attempts: Vec<(AggregateId, String, Option<DomainEventStream>)>,
) -> Vec<(AggregateId, String, Attempt)> {
    let gate = Arc::new(tokio::sync::Barrier::new(attempts.len()));
    let tasks: Vec<_> = attempts
        .into_iter()
        .map(|(aggregate, request_id, stream)| {
            let (store, gate) = (store.clone(), gate.clone());
            tokio::spawn(async move {
                gate.wait().await;
                let attempt = match stream {
                    Some(stream) => {
                        let outcome = store.append(&stream).await;
                        Attempt::Append(stream, outcome)
                    }
                    None => {
                        let rejection = rejection(ErrorCode::domain("Raced"), 1);
                        let outcome = store
                            .record_rejection(&aggregate, &request_id, &rejection)
                            .await;
                        Attempt::Reject(rejection, outcome)
                    }
                };
                (aggregate, request_id, attempt)
            })
        })
        .collect();
    let mut done = Vec::new();
    for task in tasks {
        done.push(task.await.expect("task runs"));
    }
    done
}

/// One intent never ends both rejected and appended (SPEC ID-6): 50 request ids, each
/// appended and rejected at the same moment, end with exactly one winner each, the loser told
/// `DuplicateRequestId` and `find_decision` naming the winner; and a storm of 32 rejections
/// and 32 appends of one request id has exactly one winner.
pub async fn rejection_and_append_race_has_exactly_one_decision(store: Store) {
    pairs_have_one_decision_each(&store).await;
    storm_has_one_decision(&store).await;
}

/// 50 request ids, each on an aggregate of its own, appended and rejected at the same
/// moment: each ends with exactly one winner (see [`check_one_winner`]).
async fn pairs_have_one_decision_each(store: &Store) {
    let attempts = racing_pairs(store).await;
    let mut by_request: std::collections::HashMap<String, Vec<(AggregateId, Attempt)>> =
        std::collections::HashMap::new();
    for (aggregate, request_id, attempt) in race(store, attempts).await {
        by_request
            .entry(request_id)
            .or_default()
            .push((aggregate, attempt));
    }
    assert_eq!(by_request.len(), 50);
    for (request_id, pair) in by_request {
        check_one_winner(store, &request_id, &pair).await;
    }
}

/// 50 pairs of attempts, each on a fresh aggregate at version 1: the append of `race-<n>`
/// at version 2 and a rejection of it; half the pairs start with the append, half with the
/// rejection.
async fn racing_pairs(store: &Store) -> Vec<(AggregateId, String, Option<DomainEventStream>)> {
    let mut attempts = Vec::new();
    for index in 0..50 {
        let order = aggregate();
        append_ok(store, &stream(&order, 1, "r-0")).await;
        let request_id = format!("race-{index}");
        let pair = [
            (
                order.clone(),
                request_id.clone(),
                Some(stream(&order, 2, &request_id)),
            ),
            (order.clone(), request_id.clone(), None),
        ];
        if index % 2 == 0 {
            attempts.extend(pair);
        } else {
            attempts.extend(pair.into_iter().rev());
        }
    }
    attempts
}

/// Of the two attempts `pair` on `request_id`, exactly one won, the other lost as a loser
/// must, the store holds the winner's decision, and history holds the stream exactly when
/// the append won.
async fn check_one_winner(store: &Store, request_id: &str, pair: &[(AggregateId, Attempt)]) {
    let winners: Vec<_> = pair.iter().filter(|(_, a)| a.won()).collect();
    assert_eq!(winners.len(), 1, "{request_id}: exactly one decision wins");
    let (order, winner) = winners[0];
    for (_, loser) in pair.iter().filter(|(_, a)| !a.won()) {
        loser.check_lost();
    }
    assert_eq!(
        decision(store, order, request_id).await,
        Some(winner.decision()),
        "{request_id}: the store holds the winner's decision"
    );
    let holding = load_all(store, order)
        .await
        .into_iter()
        .filter(|s| s.request_id == request_id)
        .count();
    if let Attempt::Append(..) = winner {
        assert_eq!(
            holding, 1,
            "{request_id}: the appended stream is in history"
        );
    } else {
        assert_eq!(holding, 0, "{request_id}: a rejected intent has no stream");
    }
}

/// The storm: one request id, 32 rejections and 32 appends (half at the next version,
/// half at later ones), all at once; exactly one wins, and a stream exists exactly when
/// the append won.
async fn storm_has_one_decision(store: &Store) {
    let order = aggregate();
    append_ok(store, &stream(&order, 1, "r-0")).await;
    let attempts = (0..64u64)
        .map(|index| {
            let version = if index % 4 == 0 { 2 } else { 2 + index };
            let stream = (index % 2 == 0).then(|| stream(&order, version, "storm"));
            (order.clone(), "storm".to_owned(), stream)
        })
        .collect();
    let storm = race(store, attempts).await;
    let winners: Vec<_> = storm.iter().filter(|(_, _, a)| a.won()).collect();
    assert_eq!(winners.len(), 1, "exactly one decision wins the storm");
    for (_, _, loser) in storm.iter().filter(|(_, _, a)| !a.won()) {
        loser.check_lost();
    }
    let winner = &winners[0].2;
    assert_eq!(
        decision(store, &order, "storm").await,
        Some(winner.decision())
    );
    let holding = load_all(store, &order)
        .await
        .into_iter()
        .filter(|s| s.request_id == "storm")
        .count();
    let expected = usize::from(matches!(winner, Attempt::Append(..)));
    assert_eq!(
        holding, expected,
        "a stream exists exactly when the append won"
    );
}
