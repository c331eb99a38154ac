//! Who may delete and recover an aggregate over HTTP (SPEC DM-6), by its domain's
//! `Aggregate::LIFECYCLE`: `Public` any caller, `Operator` an operator's bearer token only (401
//! without, 403 with a tenant's), `Internal` no caller (404, as an internal command) while
//! in-process senders may, `Disabled` no one (405 `LifecycleDisabled`, from any sender, with
//! nothing recorded); `/openapi.json` lists the routes a caller may use. And the delete frees
//! the booking's slot, the recover takes it back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use reqwest::{Client, RequestBuilder, StatusCode};
use serde_json::{json, Value};
use wow_core::aggregate::{
    Aggregate, AggregateRegistry, CommandContext, Lifecycle, DELETE_AGGREGATE, RECOVER_AGGREGATE,
};
use wow_core::command::{CommandKind, JsonCommand};
use wow_core::deadline::Deadline;
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::testing_example::{
    Booking, BookingCommand, BookingError, BookingEvent, BookingState,
};
use wow_core::unique_key::UniqueKey;
use wow_core::{AggregateId, CommandMessage, ErrorCode};
use wow_http::{router, HttpConfig, HttpState, TokenBinding};
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::LocalPipeline;

use support::{error_code, listen};

/// The booking under another name and lifecycle policy.
macro_rules! booking_with {
    ($name:ident, $aggregate:literal, $lifecycle:expr) => {
        #[derive(Debug)]
        struct $name;

        impl Aggregate for $name {
            const CONTEXT_NAME: &'static str = "demo";
            const AGGREGATE_NAME: &'static str = $aggregate;
            const LIFECYCLE: Lifecycle = $lifecycle;
            type State = BookingState;
            type Command = BookingCommand;
            type Event = BookingEvent;
            type Error = BookingError;

            fn handle(
                state: &BookingState,
                command: BookingCommand,
                ctx: &CommandContext<'_>,
            ) -> Result<Vec<BookingEvent>, BookingError> {
                Booking::handle(state, command, ctx)
            }

            fn apply(state: &mut BookingState, event: &BookingEvent) {
                Booking::apply(state, event);
            }

            fn unique_keys(state: &BookingState) -> Option<Vec<UniqueKey>> {
                Booking::unique_keys(state)
            }

            fn deadlines(state: &BookingState) -> Option<Vec<Deadline<BookingCommand>>> {
                Booking::deadlines(state)
            }
        }
    };
}

booking_with!(OperatorBooking, "operator_booking", Lifecycle::Operator);
booking_with!(InternalBooking, "internal_booking", Lifecycle::Internal);
booking_with!(DisabledBooking, "disabled_booking", Lifecycle::Disabled);

struct Server {
    base: String,
    client: Client,
    pipeline: LocalPipeline,
    store: Arc<dyn EventStore>,
}

/// Tenant-a's token `ta` and the operator's `op`.
fn with_auth() -> HttpConfig {
    HttpConfig {
        auth_tokens: HashMap::from([("ta".to_owned(), TokenBinding::tenant("tenant-a"))]),
        operator_tokens: HashSet::from(["op".to_owned()]),
        ..HttpConfig::default()
    }
}

impl Server {
    async fn start(config: HttpConfig) -> Self {
        let mut registry = AggregateRegistry::new();
        registry.register::<Booking>().unwrap();
        registry.register::<OperatorBooking>().unwrap();
        registry.register::<InternalBooking>().unwrap();
        registry.register::<DisabledBooking>().unwrap();
        let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
        let pipeline = LocalPipeline::builder(registry, store.clone()).build();
        let app = router(HttpState::new(&pipeline, None, config));
        Self {
            base: listen(app).await,
            client: Client::new(),
            pipeline,
            store,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Holds `slot` for the booking `aggregate`/`id`, as tenant-a (its token, or its header).
    async fn hold(&self, aggregate: &str, id: &str, slot: &str) {
        let response = self
            .client
            .post(self.url(&format!("/{aggregate}/{id}/hold")))
            .header("Authorization", "Bearer ta")
            .header("Command-Tenant-Id", "tenant-a")
            .json(&json!({"slot": slot, "minutes": 15}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "hold {aggregate}/{id}");
    }

    fn delete(&self, aggregate: &str, id: &str) -> RequestBuilder {
        self.client.delete(self.url(&format!("/{aggregate}/{id}")))
    }

    fn recover(&self, aggregate: &str, id: &str) -> RequestBuilder {
        self.client
            .put(self.url(&format!("/{aggregate}/{id}/recover")))
    }

    async fn versions(&self, aggregate: &str, id: &str, tenant: &str) -> usize {
        let id = AggregateId::new("demo", aggregate, id, tenant);
        self.store.load(&id, 1, u64::MAX).await.unwrap().len()
    }

    /// Sends the built-in `name` to `aggregate`/`id` in process, as a saga or the service's
    /// own code does.
    async fn in_process(&self, aggregate: &str, id: &str, name: &str) -> wow_core::CommandResult {
        let command: JsonCommand = CommandMessage::new(
            AggregateId::new("demo", aggregate, id, "tenant-a"),
            name,
            CommandKind::Normal,
            json!({}),
        );
        match self
            .pipeline
            .gateway
            .send_and_wait(command, WaitPlan::processed())
            .await
        {
            Ok(result) => result,
            Err(error) => error.result().clone(),
        }
    }
}

async fn status_and_code(request: RequestBuilder) -> (StatusCode, String) {
    let response = request.send().await.unwrap();
    (response.status(), error_code(&response))
}

#[tokio::test]
async fn a_public_aggregates_delete_frees_its_key_and_its_recover_takes_it_back() {
    let server = Server::start(HttpConfig::default()).await;
    server.hold("booking", "b-1", "s-1").await;
    let holder = |server: &Server| {
        server
            .client
            .get(server.url("/unique-key/slot/s-1"))
            .header("Command-Tenant-Id", "tenant-a")
    };
    assert_eq!(
        holder(&server).send().await.unwrap().status(),
        StatusCode::OK
    );

    let deleted = server
        .delete("booking", "b-1")
        .header("Command-Tenant-Id", "tenant-a");
    assert_eq!(
        status_and_code(deleted).await,
        (StatusCode::OK, "Ok".into())
    );
    assert_eq!(
        holder(&server).send().await.unwrap().status(),
        StatusCode::NOT_FOUND,
        "a deleted booking holds no slot"
    );
    let recovered = server
        .recover("booking", "b-1")
        .header("Command-Tenant-Id", "tenant-a");
    assert_eq!(
        status_and_code(recovered).await,
        (StatusCode::OK, "Ok".into())
    );
    let held: Value = holder(&server).send().await.unwrap().json().await.unwrap();
    assert_eq!(held["aggregateId"]["aggregateId"], "b-1");
    assert_eq!(held["version"], 3);
}

#[tokio::test]
async fn a_recover_whose_key_was_taken_meanwhile_is_409_duplicate_key_and_replayed() {
    let server = Server::start(HttpConfig::default()).await;
    server.hold("booking", "b-1", "s-1").await;
    let tenant = |request: RequestBuilder| request.header("Command-Tenant-Id", "tenant-a");
    status_and_code(tenant(server.delete("booking", "b-1"))).await;
    server.hold("booking", "b-2", "s-1").await;
    let recover = || tenant(server.recover("booking", "b-1")).header("Command-Request-Id", "r-1");
    assert_eq!(
        status_and_code(recover()).await,
        (StatusCode::CONFLICT, "DuplicateKey".into())
    );
    let replayed = recover().send().await.unwrap();
    assert_eq!(replayed.status(), StatusCode::CONFLICT);
    assert_eq!(replayed.headers()["wow-replayed"], "true");
    assert_eq!(server.versions("booking", "b-1", "tenant-a").await, 2);
}

#[tokio::test]
async fn a_disabled_aggregate_refuses_delete_and_recover_from_every_sender_with_405() {
    let server = Server::start(HttpConfig::default()).await;
    server.hold("disabled_booking", "d-1", "s-1").await;
    let tenant = |request: RequestBuilder| request.header("Command-Tenant-Id", "tenant-a");
    let response = tenant(server.delete("disabled_booking", "d-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(error_code(&response), "LifecycleDisabled");
    assert!(response.headers().contains_key("allow"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["errorCode"], "LifecycleDisabled");
    assert_eq!(
        status_and_code(tenant(server.recover("disabled_booking", "d-1"))).await,
        (StatusCode::METHOD_NOT_ALLOWED, "LifecycleDisabled".into())
    );

    // A saga or the service's own code is refused alike, and nothing is recorded.
    let id = AggregateId::new("demo", "disabled_booking", "d-1", "tenant-a");
    for name in [DELETE_AGGREGATE, RECOVER_AGGREGATE] {
        let refused = server.in_process("disabled_booking", "d-1", name).await;
        assert_eq!(refused.error_code, ErrorCode::LifecycleDisabled, "{name}");
        let decision = server
            .store
            .find_decision(&id, &refused.request_id)
            .await
            .unwrap();
        assert!(decision.is_none(), "{name}: the refusal is no decision");
    }
    assert_eq!(
        server.versions("disabled_booking", "d-1", "tenant-a").await,
        1
    );
}

#[tokio::test]
async fn an_operator_aggregate_is_deleted_and_recovered_only_with_an_operator_token() {
    let server = Server::start(with_auth()).await;
    server.hold("operator_booking", "o-1", "s-1").await;
    let delete = || server.delete("operator_booking", "o-1");
    assert_eq!(
        status_and_code(delete()).await,
        (StatusCode::UNAUTHORIZED, "Unauthorized".into())
    );
    assert_eq!(
        status_and_code(delete().header("Authorization", "Bearer ta")).await,
        (StatusCode::FORBIDDEN, "Forbidden".into()),
        "a tenant's token is not an operator's"
    );
    assert_eq!(
        status_and_code(delete().header("Cookie", "wow-operator=op")).await,
        (StatusCode::UNAUTHORIZED, "Unauthorized".into()),
        "the operations page's cookie sends no command"
    );
    assert_eq!(
        server.versions("operator_booking", "o-1", "tenant-a").await,
        1
    );

    let by_operator = delete()
        .header("Authorization", "Bearer op")
        .header("Command-Tenant-Id", "tenant-a");
    assert_eq!(
        status_and_code(by_operator).await,
        (StatusCode::OK, "Ok".into()),
        "an operator deletes in the tenant it names"
    );
    let confirm = server
        .client
        .post(server.url("/operator_booking/o-1/confirm"))
        .header("Authorization", "Bearer ta")
        .json(&json!({}));
    assert_eq!(
        status_and_code(confirm).await,
        (StatusCode::GONE, "IllegalAccessDeletedAggregate".into())
    );

    let recover = || server.recover("operator_booking", "o-1");
    assert_eq!(
        status_and_code(recover().header("Authorization", "Bearer ta")).await,
        (StatusCode::FORBIDDEN, "Forbidden".into())
    );
    let by_operator = recover()
        .header("Authorization", "Bearer op")
        .header("Command-Tenant-Id", "tenant-a");
    assert_eq!(
        status_and_code(by_operator).await,
        (StatusCode::OK, "Ok".into())
    );
    assert_eq!(
        server.versions("operator_booking", "o-1", "tenant-a").await,
        3
    );

    // Another tenant's operator request names its own tenant: no such booking there.
    let elsewhere = delete()
        .header("Authorization", "Bearer op")
        .header("Command-Tenant-Id", "tenant-b");
    assert_eq!(
        status_and_code(elsewhere).await,
        (StatusCode::NOT_FOUND, "NotFound".into())
    );
}

#[tokio::test]
async fn an_internal_aggregate_refuses_delete_and_recover_at_the_edge_and_in_process_senders_may() {
    let server = Server::start(HttpConfig::default()).await;
    server.hold("internal_booking", "i-1", "s-1").await;
    let tenant = |request: RequestBuilder| request.header("Command-Tenant-Id", "tenant-a");
    assert_eq!(
        status_and_code(tenant(server.delete("internal_booking", "i-1"))).await,
        (StatusCode::NOT_FOUND, "NotFound".into())
    );
    assert_eq!(
        server.versions("internal_booking", "i-1", "tenant-a").await,
        1
    );

    let deleted = server
        .in_process("internal_booking", "i-1", DELETE_AGGREGATE)
        .await;
    assert!(deleted.succeeded, "{deleted:?}");
    assert_eq!(
        status_and_code(tenant(server.recover("internal_booking", "i-1"))).await,
        (StatusCode::NOT_FOUND, "NotFound".into())
    );
    let recovered = server
        .in_process("internal_booking", "i-1", RECOVER_AGGREGATE)
        .await;
    assert!(recovered.succeeded, "{recovered:?}");
    assert_eq!(
        server.versions("internal_booking", "i-1", "tenant-a").await,
        3
    );
}

#[tokio::test]
async fn the_document_lists_delete_and_recover_only_where_a_caller_may_send_them() {
    let server = Server::start(with_auth()).await;
    let document: Value = server
        .client
        .get(server.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths = &document["paths"];
    assert!(paths["/booking/{id}"]["delete"].is_object());
    assert!(paths["/booking/{id}/recover"]["put"].is_object());
    assert_eq!(
        paths["/booking/{id}"]["delete"]["security"],
        json!([{"bearer": []}])
    );
    for aggregate in ["internal_booking", "disabled_booking"] {
        assert!(
            paths[format!("/{aggregate}/{{id}}")].is_null(),
            "{aggregate}"
        );
        assert!(
            paths[format!("/{aggregate}/{{id}}/recover")].is_null(),
            "{aggregate}"
        );
    }
    for path in ["/operator_booking/{id}", "/operator_booking/{id}/recover"] {
        let operation = paths[path]
            .as_object()
            .and_then(|item| item.values().next())
            .unwrap();
        assert_eq!(operation["security"], json!([{"operator": []}]), "{path}");
        assert!(operation["responses"]["401"].is_object(), "{path}");
        assert!(operation["responses"]["403"].is_object(), "{path}");
        let names_tenant = operation["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|parameter| parameter["name"] == "Command-Tenant-Id");
        assert!(names_tenant, "an operator names the tenant: {path}");
    }
}
