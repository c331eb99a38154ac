//! The safe-retry sequence of SPEC TO-2 against a real server: it never makes one intent two.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;
use wow_core::eventsourcing::{EventStore, GatedEventStore, History, InMemoryEventStore};

use async_trait::async_trait;
use serde_json::json;
use wow_client::{CommandRequest, Lookup, Outcome, RetryPolicy, WowClient};
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::{AggregateId, CommandStage, DomainEventStream};
use wow_http::{router, HttpConfig, HttpState};
use wow_runtime::pipeline::LocalPipeline;

async fn serve(pipeline: &LocalPipeline) -> String {
    let app = router(HttpState::new(pipeline, None, HttpConfig::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

fn open(id: &str) -> CommandRequest {
    CommandRequest::new("account", id, "open", json!({"name": "Ann", "balance": 10}))
        .request_id(format!("open-{id}"))
}

async fn streams_holding(store: &dyn EventStore, id: &str, request_id: &str) -> usize {
    let aggregate = AggregateId::new("bank", "account", id, "(0)");
    store
        .load(&aggregate, 1, u64::MAX)
        .await
        .unwrap()
        .iter()
        .filter(|s| s.request_id == request_id)
        .count()
}

fn quick() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        backoff: Duration::from_millis(10),
        in_flight_wait: Duration::from_millis(300),
    }
}

#[tokio::test]
async fn a_plain_success_completes() {
    let pipeline = LocalPipeline::builder(
        wow_example_bank::registry().unwrap(),
        Arc::new(InMemoryEventStore::new()),
    )
    .build();
    let client = WowClient::new(serve(&pipeline).await).unwrap();
    match client.send_safely(&open("a-1")).await {
        Outcome::Completed(result) => assert_eq!(result.aggregate_version, Some(1)),
        other => panic!("expected Completed, got {other:?}"),
    }
    let rejected =
        CommandRequest::new("account", "a-1", "withdraw", json!({"amount": 100})).request_id("w-1");
    assert!(
        matches!(client.send_safely(&rejected).await, Outcome::Rejected { error_code, .. } if error_code.as_str() == "InsufficientBalance")
    );
}

#[tokio::test]
async fn resending_an_applied_intent_reports_it_applied() {
    let pipeline = LocalPipeline::builder(
        wow_example_bank::registry().unwrap(),
        Arc::new(InMemoryEventStore::new()),
    )
    .build();
    let client = WowClient::new(serve(&pipeline).await).unwrap();
    let first = client.send_safely(&open("a-2")).await;
    let Outcome::Completed(first) = first else {
        panic!("{first:?}")
    };
    match client.send_safely(&open("a-2")).await {
        Outcome::AlreadyApplied {
            version,
            command_id,
            ..
        } => {
            assert_eq!(version, 1);
            assert_eq!(command_id, first.command_id);
        }
        other => panic!("expected AlreadyApplied, got {other:?}"),
    }
    assert_eq!(
        streams_holding(pipeline.store().as_ref(), "a-2", "open-a-2").await,
        1
    );
}

/// A projection that never finishes: waits for PROJECTED can only expire.
#[derive(Debug)]
struct Stuck;

#[async_trait]
impl EventConsumer for Stuck {
    fn name(&self) -> &str {
        "stuck"
    }

    async fn handle(&self, _stream: &DomainEventStream) -> Result<(), ConsumerError> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_timeout_after_the_append_is_resolved_by_the_look_up_without_a_resend() {
    let pipeline = LocalPipeline::builder(
        wow_example_bank::registry().unwrap(),
        Arc::new(InMemoryEventStore::new()),
    )
    .projection(Arc::new(Stuck))
    .build();
    let client = WowClient::new(serve(&pipeline).await)
        .unwrap()
        .retry(quick());
    let request = open("a-3").wait(CommandStage::Projected, Duration::from_millis(200));
    match client.send_safely(&request).await {
        Outcome::AlreadyApplied {
            version, result, ..
        } => {
            assert_eq!(version, 1);
            assert!(
                result.is_none(),
                "known from the look-up, not from a resend"
            );
        }
        other => panic!("expected AlreadyApplied, got {other:?}"),
    }
    assert_eq!(
        streams_holding(pipeline.store().as_ref(), "a-3", "open-a-3").await,
        1
    );
    assert_eq!(
        pipeline.metrics.snapshot().handler_runs,
        1,
        "it was never resent"
    );
}

#[tokio::test]
async fn an_intent_still_in_flight_is_awaited_not_resent_and_lands_once() {
    let store = Arc::new(GatedEventStore::new(Arc::new(InMemoryEventStore::new())));
    let pipeline =
        LocalPipeline::builder(wow_example_bank::registry().unwrap(), store.clone()).build();
    let base = serve(&pipeline).await;
    let client = WowClient::new(&base).unwrap().retry(quick());
    let request = open("a-4").wait(CommandStage::Processed, Duration::from_millis(100));
    match client.send_safely(&request).await {
        Outcome::NoDecisionYet {
            request_id,
            in_flight,
            reason,
        } => {
            assert_eq!(request_id, "open-a-4");
            assert!(in_flight, "the service still holds it: {reason}");
        }
        other => panic!("expected NoDecisionYet, got {other:?}"),
    }
    assert_eq!(
        client.lookup("account", "a-4", "open-a-4", None).await,
        Lookup::InFlight
    );
    // The store comes back: the first attempt lands, every resend is a duplicate.
    store.release(10);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Lookup::Appended { version, .. } =
            client.lookup("account", "a-4", "open-a-4", None).await
        {
            assert_eq!(version, 1);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the intent never landed"
        );
        tokio::task::yield_now().await;
    }
    assert_eq!(
        streams_holding(store.as_ref(), "a-4", "open-a-4").await,
        1,
        "one intent, one stream"
    );
}

#[tokio::test]
async fn an_unreachable_service_leaves_the_outcome_unknown() {
    let client = WowClient::new("http://127.0.0.1:9").unwrap().retry(quick());
    match client.send_safely(&open("a-5")).await {
        Outcome::Unknown { request_id, .. } => assert_eq!(request_id, "open-a-5"),
        other => panic!("expected Unknown, got {other:?}"),
    }
}

/// A service scripted to answer a withdrawal 503 then 422, and the look-up NONE then
/// `second_lookup`: the situation wow-sim found, where an earlier send of the intent is
/// appended after a resend was rejected (an at-least-once bus delivered both).
async fn scripted(second_lookup: &'static str) -> String {
    use axum::extract::Path;
    use axum::http::StatusCode;
    use axum::routing::{get, post};
    use std::sync::atomic::{AtomicU32, Ordering};
    let sends = Arc::new(AtomicU32::new(0));
    let lookups = Arc::new(AtomicU32::new(0));
    let answer = |code: wow_core::ErrorCode| {
        let id = AggregateId::new("bank", "account", "s-1", "(0)");
        let result = wow_core::CommandResult::for_ids(
            &id,
            "cmd",
            "withdraw-s-1",
            CommandStage::Processed,
            code,
            "scripted".to_owned(),
        );
        serde_json::to_value(result).unwrap()
    };
    let app = axum::Router::new()
        .route(
            "/account/{id}/withdraw",
            post(move |Path(_id): Path<String>| {
                let sends = sends.clone();
                async move {
                    if sends.fetch_add(1, Ordering::SeqCst) == 0 {
                        let body = answer(wow_core::ErrorCode::ServiceUnavailable);
                        (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body))
                    } else {
                        let body = answer(wow_core::ErrorCode::domain("InsufficientBalance"));
                        (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(body))
                    }
                }
            }),
        )
        .route(
            "/account/{id}/requests/{request_id}",
            get(move || {
                let lookups = lookups.clone();
                async move {
                    if lookups.fetch_add(1, Ordering::SeqCst) == 0 || second_lookup == "NONE" {
                        (StatusCode::NOT_FOUND, axum::Json(json!({"status": "NONE"})))
                    } else {
                        (
                            StatusCode::OK,
                            axum::Json(json!({"status": "APPENDED", "version": 2, "commandId": "cmd-first"})),
                        )
                    }
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

fn withdraw() -> CommandRequest {
    CommandRequest::new("account", "s-1", "withdraw", json!({"amount": 10}))
        .request_id("withdraw-s-1")
}

#[tokio::test]
async fn a_rejected_resend_is_confirmed_in_history_before_it_is_reported() {
    let client = WowClient::new(&scripted("APPENDED").await)
        .unwrap()
        .retry(quick());
    match client.send_safely(&withdraw()).await {
        Outcome::AlreadyApplied {
            version,
            command_id,
            ..
        } => assert_eq!((version, command_id.as_str()), (2, "cmd-first")),
        other => panic!("history has it: expected AlreadyApplied, got {other:?}"),
    }
    let client = WowClient::new(&scripted("NONE").await)
        .unwrap()
        .retry(quick());
    match client.send_safely(&withdraw()).await {
        Outcome::Rejected { error_code, .. } => {
            assert_eq!(error_code.as_str(), "InsufficientBalance")
        }
        other => panic!("history has no trace: expected Rejected, got {other:?}"),
    }
}

async fn bank() -> (LocalPipeline, WowClient) {
    let pipeline = LocalPipeline::builder(
        wow_example_bank::registry().unwrap(),
        Arc::new(InMemoryEventStore::new()),
    )
    .build();
    let client = WowClient::new(serve(&pipeline).await)
        .unwrap()
        .retry(quick());
    (pipeline, client)
}

#[tokio::test]
async fn a_rejected_intent_resent_is_reported_rejected_with_its_original_code() {
    let (_pipeline, client) = bank().await;
    assert!(matches!(
        client.send_safely(&open("r-1")).await,
        Outcome::Completed(_)
    ));
    let withdraw = CommandRequest::new("account", "r-1", "withdraw", json!({"amount": 500}))
        .request_id("w-r-1");
    let Outcome::Rejected {
        error_code,
        command_id: first,
        ..
    } = client.send_safely(&withdraw).await
    else {
        panic!("a business rule refuses it")
    };
    assert_eq!(error_code.as_str(), "InsufficientBalance");
    let deposit = CommandRequest::new("account", "r-1", "deposit", json!({"amount": 1000}))
        .request_id("d-r-1");
    assert!(matches!(
        client.send_safely(&deposit).await,
        Outcome::Completed(_)
    ));
    match client.send_safely(&withdraw).await {
        Outcome::Rejected {
            error_code,
            command_id,
            version,
            result,
            ..
        } => {
            assert_eq!(
                error_code.as_str(),
                "InsufficientBalance",
                "final: not run again"
            );
            assert_eq!(command_id, first, "the original command");
            assert_eq!(version, Some(1), "decided on version 1");
            assert_eq!(result.unwrap().result["replayed"], true);
        }
        other => panic!("expected the recorded rejection, got {other:?}"),
    }
    match client.lookup("account", "r-1", "w-r-1", None).await {
        Lookup::Rejected {
            error_code,
            command_id,
            version,
            ..
        } => {
            assert_eq!(error_code.as_str(), "InsufficientBalance");
            assert_eq!((command_id, version), (first, 1));
        }
        other => panic!("expected REJECTED, got {other:?}"),
    }
    assert_eq!(
        client.lookup("account", "r-1", "never-sent", None).await,
        Lookup::None
    );
}

#[tokio::test]
async fn a_request_id_with_a_slash_round_trips_through_the_client() {
    let (_pipeline, client) = bank().await;
    assert!(matches!(
        client.send_safely(&open("s-2")).await,
        Outcome::Completed(_)
    ));
    // A saga's request id: `{event id}/{index}`, plus characters a URL gives meaning to.
    let request_id = "0192a0b1-0000-7000-8000-000000000001/0 ?#%";
    let deposit = CommandRequest::new("account", "s-2", "deposit", json!({"amount": 1}))
        .request_id(request_id);
    let Outcome::Completed(sent) = client.send_safely(&deposit).await else {
        panic!("the deposit completes")
    };
    match client.lookup("account", "s-2", request_id, None).await {
        Lookup::Appended {
            version,
            command_id,
            stream,
            ..
        } => {
            assert_eq!((version, command_id), (2, sent.command_id));
            assert_eq!(stream.unwrap().request_id, request_id);
        }
        other => panic!("expected APPENDED, got {other:?}"),
    }
    assert_eq!(
        client
            .lookup(
                "account",
                "s-2",
                "0192a0b1-0000-7000-8000-000000000001/1",
                None
            )
            .await,
        Lookup::None
    );
}

/// A service that answers each send and each look-up from a script, in order (the last
/// answer repeats), and records the request id of every send.
struct Scripted {
    base: String,
    request_ids: Arc<std::sync::Mutex<Vec<String>>>,
}

async fn scripted_service(
    sends: Vec<(u16, serde_json::Value)>,
    lookups: Vec<(u16, serde_json::Value)>,
) -> Scripted {
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::{get, post};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let request_ids = Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = request_ids.clone();
    let next = |script: Vec<(u16, serde_json::Value)>| {
        let at = Arc::new(AtomicUsize::new(0));
        move || {
            let i = at.fetch_add(1, Ordering::SeqCst).min(script.len() - 1);
            let (status, body) = script[i].clone();
            (StatusCode::from_u16(status).unwrap(), axum::Json(body))
        }
    };
    let send = next(sends);
    let lookup = next(lookups);
    let app = axum::Router::new()
        .route(
            "/account/{id}/{command}",
            post(move |headers: HeaderMap| {
                let answer = send();
                let request_id = headers["command-request-id"].to_str().unwrap().to_owned();
                recorded.lock().unwrap().push(request_id);
                async move { answer }
            }),
        )
        .route(
            "/account/{id}/requests/{request_id}",
            get(move || {
                let answer = lookup();
                async move { answer }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Scripted {
        base: format!("http://{address}"),
        request_ids,
    }
}

fn result_of(code: wow_core::ErrorCode) -> serde_json::Value {
    let id = AggregateId::new("bank", "account", "s-1", "(0)");
    let result = wow_core::CommandResult::for_ids(
        &id,
        "cmd-now",
        "withdraw-s-1",
        CommandStage::Processed,
        code,
        "scripted".to_owned(),
    );
    serde_json::to_value(result).unwrap()
}

#[tokio::test]
async fn a_500_is_unknown_never_rejected() {
    let service = scripted_service(
        vec![(500, result_of(wow_core::ErrorCode::InternalServerError))],
        vec![(503, json!({"status": "UNKNOWN", "errorMsg": "store down"}))],
    )
    .await;
    let client = WowClient::new(&service.base).unwrap().retry(quick());
    match client.send_safely(&withdraw()).await {
        Outcome::Unknown { request_id, reason } => {
            assert_eq!(request_id, "withdraw-s-1");
            assert!(reason.contains("500"), "{reason}");
        }
        other => panic!("a 500 says nothing of the intent: expected Unknown, got {other:?}"),
    }
    // A look-up that itself fails with a 500 is no answer either.
    let service = scripted_service(
        vec![(500, result_of(wow_core::ErrorCode::InternalServerError))],
        vec![(500, json!({"status": "NONE"}))],
    )
    .await;
    let client = WowClient::new(&service.base).unwrap().retry(quick());
    assert!(matches!(
        client.send_safely(&withdraw()).await,
        Outcome::Unknown { .. }
    ));
    assert!(matches!(
        client.lookup("account", "s-1", "withdraw-s-1", None).await,
        Lookup::Unknown(_)
    ));
}

#[tokio::test]
async fn a_rejection_found_by_the_look_up_is_final() {
    let service = scripted_service(
        vec![(503, result_of(wow_core::ErrorCode::ServiceUnavailable))],
        vec![
            (202, json!({"status": "IN_FLIGHT"})),
            (
                200,
                json!({"status": "REJECTED", "errorCode": "InsufficientBalance", "errorMsg": "balance 3", "commandId": "cmd-first", "createTime": 1, "version": 4}),
            ),
        ],
    )
    .await;
    let client = WowClient::new(&service.base).unwrap().retry(quick());
    match client.send_safely(&withdraw()).await {
        Outcome::Rejected {
            error_code,
            error_msg,
            command_id,
            version,
            result,
        } => {
            assert_eq!(error_code.as_str(), "InsufficientBalance");
            assert_eq!(
                (error_msg.as_str(), command_id.as_str(), version),
                ("balance 3", "cmd-first", Some(4))
            );
            assert!(result.is_none(), "known from the look-up");
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert_eq!(service.request_ids.lock().unwrap().len(), 1, "never resent");
}

#[tokio::test]
async fn no_decision_recorded_is_resent_with_the_same_request_id() {
    let ok = result_of(wow_core::ErrorCode::Ok);
    let service = scripted_service(
        vec![
            (503, result_of(wow_core::ErrorCode::ServiceUnavailable)),
            (200, ok),
        ],
        vec![(404, json!({"status": "NONE"}))],
    )
    .await;
    let client = WowClient::new(&service.base).unwrap().retry(quick());
    assert!(matches!(
        client.send_safely(&withdraw()).await,
        Outcome::Completed(_)
    ));
    assert_eq!(
        *service.request_ids.lock().unwrap(),
        ["withdraw-s-1", "withdraw-s-1"]
    );
}

/// SPEC DM-1 and ID-6: a `DuplicateKey` refusal is a decision, final for its request id. The
/// helper reports it as it came, and never resends: not when it is the first answer, and not
/// when the look-up after an unknown answer finds it recorded.
#[tokio::test]
async fn a_duplicate_key_refusal_is_final_and_never_resent() {
    let service = scripted_service(
        vec![(409, result_of(wow_core::ErrorCode::DuplicateKey))],
        vec![(404, json!({"status": "NONE"}))],
    )
    .await;
    let client = WowClient::new(&service.base).unwrap().retry(quick());
    match client.send_safely(&withdraw()).await {
        Outcome::Rejected { error_code, .. } => {
            assert_eq!(error_code, wow_core::ErrorCode::DuplicateKey)
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert_eq!(
        *service.request_ids.lock().unwrap(),
        ["withdraw-s-1"],
        "sent once"
    );

    let service = scripted_service(
        vec![(503, result_of(wow_core::ErrorCode::ServiceUnavailable))],
        vec![(
            200,
            json!({"status": "REJECTED", "errorCode": "DuplicateKey", "errorMsg": "sku `A` is held by another aggregate", "commandId": "cmd-first", "createTime": 1, "version": 0}),
        )],
    )
    .await;
    let client = WowClient::new(&service.base).unwrap().retry(quick());
    match client.send_safely(&withdraw()).await {
        Outcome::Rejected { error_code, .. } => {
            assert_eq!(error_code, wow_core::ErrorCode::DuplicateKey)
        }
        other => panic!("the recorded refusal is final: expected Rejected, got {other:?}"),
    }
    assert_eq!(service.request_ids.lock().unwrap().len(), 1, "never resent");
}

/// Against a real server: a member whose handle another member holds is `Rejected`
/// `DuplicateKey` (a message naming the handle, not its holder), and sending the same intent
/// again is the same recorded refusal, with nothing appended.
#[tokio::test]
async fn a_taken_unique_key_is_rejected_for_good_through_the_helper() {
    use wow_core::testing_example::Member;
    let store = Arc::new(InMemoryEventStore::new());
    let mut registry = wow_core::aggregate::AggregateRegistry::new();
    registry.register::<Member>().unwrap();
    let pipeline = LocalPipeline::builder(registry, store.clone()).build();
    let client = WowClient::new(serve(&pipeline).await)
        .unwrap()
        .retry(quick());
    let register = |id: &str, request_id: &str| {
        CommandRequest::new("member", id, "register", json!({"handle": "h-1"}))
            .request_id(request_id)
    };
    assert!(matches!(
        client.send_safely(&register("m-first", "r-first")).await,
        Outcome::Completed(_)
    ));
    for attempt in ["sent", "sent again"] {
        match client.send_safely(&register("m-second", "r-second")).await {
            Outcome::Rejected {
                error_code,
                error_msg,
                ..
            } => {
                assert_eq!(error_code, wow_core::ErrorCode::DuplicateKey, "{attempt}");
                assert!(
                    error_msg.contains("h-1") && !error_msg.contains("m-first"),
                    "{attempt}: {error_msg}"
                );
            }
            other => panic!("{attempt}: expected Rejected, got {other:?}"),
        }
    }
    let second = AggregateId::new("demo", "member", "m-second", "(0)");
    assert!(store.load(&second, 1, u64::MAX).await.unwrap().is_empty());
}
