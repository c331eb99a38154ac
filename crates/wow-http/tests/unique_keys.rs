//! Unique keys over HTTP (SPEC DM-1): a second claimant is 409 `DuplicateKey`, its resend is
//! the same recorded answer, and `GET /unique-key/{space}/{value}` says whether a key is
//! taken in the caller's tenant only. A caller bound to an owner learns who holds a key only
//! when the holder is its own owner's (SPEC TN-2), and no refusal names the holder; an
//! operator frees a key with `DELETE /unique-key/{space}/{value}`. The owner and release
//! cases run on the in-memory store, SQLite and PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use reqwest::{Client, RequestBuilder, StatusCode};
use serde_json::{json, Value};
use wow_core::aggregate::AggregateRegistry;
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::testing_example::Member;
use wow_http::{router, HttpConfig, HttpState, TokenBinding};
use wow_runtime::pipeline::LocalPipeline;

use support::{error_code, listen};

struct Server {
    base: String,
    client: Client,
    _pipeline: LocalPipeline,
}

impl Server {
    async fn start() -> Self {
        let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
        Self::on(store, HttpConfig::default()).await
    }

    /// The member service over `store`, answering with `config`.
    async fn on(store: Arc<dyn EventStore>, config: HttpConfig) -> Self {
        let mut registry = AggregateRegistry::new();
        registry.register::<Member>().unwrap();
        let pipeline = LocalPipeline::builder(registry, store).build();
        let app = router(HttpState::new(&pipeline, None, config));
        Self {
            base: listen(app).await,
            client: Client::new(),
            _pipeline: pipeline,
        }
    }

    /// Sends `command` with `handle` to the member `id` under `request_id`, in `tenant`: the
    /// status, `Wow-Error-Code`, whether it was replayed, and the body.
    async fn send(
        &self,
        id: &str,
        command: &str,
        handle: &str,
        request_id: &str,
        tenant: &str,
    ) -> (StatusCode, String, bool, Value) {
        let response = self
            .client
            .post(format!("{}/member/{id}/{command}", self.base))
            .header("Command-Request-Id", request_id)
            .header("Command-Tenant-Id", tenant)
            .json(&json!({"handle": handle}))
            .send()
            .await
            .unwrap();
        let (status, code) = (response.status(), error_code(&response));
        let replayed = response.headers().contains_key("wow-replayed");
        (status, code, replayed, response.json().await.unwrap())
    }

    async fn holder(&self, space: &str, value: &str, tenant: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(format!("{}/unique-key/{space}/{value}", self.base))
            .header("Command-Tenant-Id", tenant)
            .send()
            .await
            .unwrap();
        (response.status(), response.json().await.unwrap())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_claimant_is_409_duplicate_key_and_its_resend_is_the_same_answer() {
    let server = Server::start().await;
    let (status, _, _, _) = server.send("ann", "register", "ann", "r-ann", "t1").await;
    assert_eq!(status, StatusCode::OK);

    let (status, code, replayed, body) = server.send("bob", "register", "ann", "r-bob", "t1").await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "DuplicateKey")
    );
    assert!(!replayed);
    let message = body["errorMsg"].as_str().unwrap();
    assert_eq!(
        message, "handle `ann` is held by another aggregate",
        "the key, never its holder"
    );

    let (status, code, replayed, _) = server.send("bob", "register", "ann", "r-bob", "t1").await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "DuplicateKey")
    );
    assert!(
        replayed,
        "the resend is answered from the recorded decision"
    );

    let (status, code, _, _) = server.send("bob", "register", "bob", "r-bob", "t1").await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "RequestIdReused"),
        "the request id was decided; another body under it is not a new intent"
    );
    let (status, _, _, _) = server.send("bob", "register", "bob", "r-bob-2", "t1").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a free handle is taken by a new request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holder_of_a_key_is_looked_up_in_the_callers_tenant() {
    let server = Server::start().await;
    server.send("ann", "register", "ann", "r-1", "t1").await;
    let (status, body) = server.holder("handle", "ann", "t1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["space"], "handle");
    assert_eq!(body["value"], "ann");
    assert_eq!(body["taken"], true);
    assert_eq!(body["version"], 1);
    assert_eq!(body["aggregateId"]["aggregateName"], "member");
    assert_eq!(body["aggregateId"]["aggregateId"], "ann");
    assert_eq!(body["aggregateId"]["tenantId"], "t1");

    let (status, body) = server.holder("handle", "ann", "t2").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another tenant's key is not seen: {body}"
    );
    assert_eq!(body["errorCode"], "NotFound");
    let (status, _) = server.holder("handle", "nobody", "t1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = server.holder("Not%20A%20Space", "ann", "t1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["errorCode"], "IllegalArgument");

    server
        .send("ann", "change_handle", "anna", "r-2", "t1")
        .await;
    assert_eq!(
        server.holder("handle", "ann", "t1").await.0,
        StatusCode::NOT_FOUND
    );
    let (status, body) = server.holder("handle", "anna", "t1").await;
    assert_eq!(
        (status, body["version"].clone()),
        (StatusCode::OK, json!(2))
    );
}

/// The tokens of the owner cases: two owners of tenant `t1`, the whole tenant, and the
/// operator.
fn owners_config() -> HttpConfig {
    HttpConfig {
        auth_tokens: HashMap::from([
            (
                "alice".to_owned(),
                TokenBinding::tenant("t1").with_owner("alice"),
            ),
            (
                "bob".to_owned(),
                TokenBinding::tenant("t1").with_owner("bob"),
            ),
            ("tenant".to_owned(), TokenBinding::tenant("t1")),
        ]),
        operator_tokens: HashSet::from(["op".to_owned()]),
        ..HttpConfig::default()
    }
}

/// A store of each kind, each with what keeps it alive: the in-memory store, SQLite on a file
/// of its own, and PostgreSQL in a schema of its own (dropped after; skipped, loudly, when
/// PostgreSQL is down and not required).
async fn stores() -> Vec<(&'static str, Arc<dyn EventStore>, Option<Schema>)> {
    let mut stores: Vec<(&'static str, Arc<dyn EventStore>, Option<Schema>)> =
        vec![("memory", Arc::new(InMemoryEventStore::new()), None)];
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("wow-http-unique-keys")
        .join(format!("{}.db", uuid::Uuid::now_v7()));
    let sqlite = wow_sqlite::SqliteStore::open(wow_sqlite::SqliteOptions::new(&path))
        .await
        .expect("a SQLite file opens");
    stores.push(("sqlite", Arc::new(sqlite), None));
    if let Some((store, schema)) = postgres().await {
        stores.push(("postgres", Arc::new(store), Some(schema)));
    }
    stores
}

/// The PostgreSQL server of the tests: `WOW_TEST_POSTGRES_URL`, or the local one.
fn postgres_url() -> String {
    std::env::var("WOW_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A schema of a test's own, dropped when this is.
struct Schema(String);

impl Drop for Schema {
    fn drop(&mut self) {
        let (schema, url) = (self.0.clone(), postgres_url());
        // From a thread of its own: the test's runtime may be gone.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .ok()?;
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await
                    .ok()
            })
        });
        let _ = dropped.join();
    }
}

async fn postgres() -> Option<(wow_postgres::PostgresStore, Schema)> {
    let schema = format!("wow_http_keys_{}", uuid::Uuid::now_v7().simple());
    let options = postgres_url()
        .parse::<wow_postgres::PostgresOptions>()
        .expect("a postgres:// URL")
        .schema(&schema)
        .max_connections(4);
    match wow_postgres::PostgresStore::open(options).await {
        Ok(store) => Some((store, Schema(schema))),
        Err(error) => {
            wow_tck::skip::unavailable(
                wow_tck::skip::Requirement::Backends,
                &format!("no PostgreSQL at {} ({error})", postgres_url()),
            );
            None
        }
    }
}

impl Server {
    fn with_token(&self, request: RequestBuilder, token: Option<&str>) -> RequestBuilder {
        match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Registers member `id` with `handle` under `request_id`, as `token`: the status, the
    /// code and the body.
    async fn register_as(
        &self,
        token: &str,
        id: &str,
        handle: &str,
        request_id: &str,
    ) -> (StatusCode, String, Value) {
        let response = self
            .client
            .post(format!("{}/member/{id}/register", self.base))
            .bearer_auth(token)
            .header("Command-Request-Id", request_id)
            .json(&json!({"handle": handle}))
            .send()
            .await
            .unwrap();
        let (status, code) = (response.status(), error_code(&response));
        (status, code, response.json().await.unwrap())
    }

    /// `GET /unique-key/handle/{handle}` as `token`.
    async fn look_up_as(&self, token: &str, handle: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(format!("{}/unique-key/handle/{handle}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        (response.status(), response.json().await.unwrap())
    }

    /// `DELETE /unique-key/{space}/{value}` as `token` (none: no `Authorization`), in
    /// `tenant` when named: the status, the code, `WWW-Authenticate` and the body.
    async fn release_as(
        &self,
        token: Option<&str>,
        space: &str,
        value: &str,
        tenant: Option<&str>,
    ) -> (StatusCode, String, Option<String>, Value) {
        let mut request = self
            .client
            .delete(format!("{}/unique-key/{space}/{value}", self.base));
        if let Some(tenant) = tenant {
            request = request.header("Command-Tenant-Id", tenant);
        }
        let response = self.with_token(request, token).send().await.unwrap();
        let (status, code) = (response.status(), error_code(&response));
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|value| value.to_str().unwrap().to_owned());
        (status, code, challenge, response.json().await.unwrap())
    }
}

/// SPEC TN-2 over DM-1, on every store: a caller bound to another owner than the holder's is
/// refused the key `DuplicateKey` with a message that names the key and not the holder (so
/// is its resend), and its look-up says only that the key is taken; the holder's owner and a
/// token of the whole tenant see the holder and its version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_learns_only_that_another_owners_key_is_taken() {
    for (backend, store, _schema) in stores().await {
        let server = Server::on(store, owners_config()).await;
        let (status, _, body) = server
            .register_as("alice", "m-alice", "h-shared", "r-alice")
            .await;
        assert_eq!(status, StatusCode::OK, "{backend}: {body}");

        for attempt in ["first", "resend"] {
            let (status, code, body) = server
                .register_as("bob", "m-bob", "h-shared", "r-bob")
                .await;
            assert_eq!(
                (status, code.as_str()),
                (StatusCode::CONFLICT, "DuplicateKey"),
                "{backend} {attempt}: {body}"
            );
            let message = body["errorMsg"].as_str().unwrap();
            assert!(
                message.contains("h-shared") && !message.contains("m-alice"),
                "{backend} {attempt}: the key, never its holder: {message}"
            );
            assert!(
                !body.to_string().contains("m-alice"),
                "{backend} {attempt}: nothing of the holder anywhere: {body}"
            );
        }

        let (status, body) = server.look_up_as("bob", "h-shared").await;
        assert_eq!(status, StatusCode::OK, "{backend}: {body}");
        assert_eq!(
            body,
            json!({"space": "handle", "value": "h-shared", "taken": true}),
            "{backend}: another owner's key is taken, and that is all"
        );
        for token in ["alice", "tenant"] {
            let (status, body) = server.look_up_as(token, "h-shared").await;
            assert_eq!(status, StatusCode::OK, "{backend} {token}: {body}");
            assert_eq!(body["taken"], true);
            assert_eq!(
                body["aggregateId"]["aggregateId"], "m-alice",
                "{backend} {token}"
            );
            assert_eq!(body["version"], 1, "{backend} {token}");
        }
        let (status, body) = server.look_up_as("bob", "h-free").await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "{backend}: a free key: {body}"
        );
    }
}

/// The operator's release, on every store: refused without an operator token (401 with the
/// challenge) and with a tenant's (403); with it, 200 naming the holder it had, and the key is
/// free: another owner's new request takes it; a second release is 404, and an illegal key
/// 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_releases_a_key_and_another_owner_then_takes_it() {
    for (backend, store, _schema) in stores().await {
        let server = Server::on(store, owners_config()).await;
        server
            .register_as("alice", "m-alice", "h-stuck", "r-alice")
            .await;
        let refused = server
            .register_as("bob", "m-bob", "h-stuck", "r-bob-1")
            .await;
        assert_eq!(refused.1, "DuplicateKey", "{backend}: {refused:?}");
        a_release_without_an_operators_token_is_refused(&server, backend).await;
        the_operators_release_names_the_holder_and_frees_the_key(&server, backend).await;

        // The refusal of `r-bob-1` is final (SPEC ID-6); a new request takes the freed key.
        let replayed = server
            .register_as("bob", "m-bob", "h-stuck", "r-bob-1")
            .await;
        assert_eq!(replayed.1, "DuplicateKey", "{backend}: {replayed:?}");
        let (status, _, body) = server
            .register_as("bob", "m-bob", "h-stuck", "r-bob-2")
            .await;
        assert_eq!(status, StatusCode::OK, "{backend}: {body}");
        let (status, body) = server.look_up_as("bob", "h-stuck").await;
        assert_eq!(status, StatusCode::OK, "{backend}: {body}");
        assert_eq!(body["aggregateId"]["aggregateId"], "m-bob", "{backend}");
    }
}

/// Without a token: 401 with the challenge; with a tenant's: 403; nothing released.
async fn a_release_without_an_operators_token_is_refused(server: &Server, backend: &str) {
    let (status, _, challenge, _) = server
        .release_as(None, "handle", "h-stuck", Some("t1"))
        .await;
    assert_eq!(
        (status, challenge.as_deref()),
        (StatusCode::UNAUTHORIZED, Some("Bearer")),
        "{backend}: no token"
    );
    for tenant_token in ["alice", "bob", "tenant"] {
        let (status, code, _, _) = server
            .release_as(Some(tenant_token), "handle", "h-stuck", Some("t1"))
            .await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::FORBIDDEN, "Forbidden"),
            "{backend}: a tenant's token ({tenant_token}) is not an operator's"
        );
    }
    assert_eq!(
        server.look_up_as("tenant", "h-stuck").await.0,
        StatusCode::OK,
        "{backend}: nothing released by a refused request"
    );
}

/// With the operator's token: 200 naming the holder it had, and the key is free; a second
/// release is 404, and an illegal key 400.
async fn the_operators_release_names_the_holder_and_frees_the_key(server: &Server, backend: &str) {
    let (status, _, _, body) = server
        .release_as(Some("op"), "handle", "h-stuck", Some("t1"))
        .await;
    assert_eq!(status, StatusCode::OK, "{backend}: {body}");
    assert_eq!(body["space"], "handle");
    assert_eq!(body["value"], "h-stuck");
    assert_eq!(body["aggregateId"]["aggregateId"], "m-alice", "{backend}");
    assert_eq!(body["aggregateId"]["tenantId"], "t1", "{backend}");
    assert_eq!(body["version"], 1, "{backend}");
    assert_eq!(
        server.look_up_as("tenant", "h-stuck").await.0,
        StatusCode::NOT_FOUND,
        "{backend}: the key is free"
    );

    let (status, code, _, body) = server
        .release_as(Some("op"), "handle", "h-stuck", Some("t1"))
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "NotFound"),
        "{backend}: nothing left to release: {body}"
    );
    let (status, code, _, _) = server
        .release_as(Some("op"), "Not%20A%20Space", "h", Some("t1"))
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "IllegalArgument"),
        "{backend}"
    );
}

/// A `MakeWriter` into a shared buffer: what the test's subscriber logged.
#[derive(Clone, Default)]
struct Logged(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logged {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logged {
    type Writer = Logged;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The release is audited: one `wow::audit` event with the SHA-256 fingerprint of the
/// operator's token (never the token), the tenant, the key, the holder and the time.
#[tokio::test]
async fn a_release_is_audited_with_the_fingerprint_of_the_token_never_the_token() {
    use tower::ServiceExt;
    let logged = Logged::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logged.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    // This test's runtime has one thread: the router's handlers run on it, under this
    // subscriber.
    let _default = tracing::subscriber::set_default(subscriber);
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let mut registry = AggregateRegistry::new();
    registry.register::<Member>().unwrap();
    let pipeline = LocalPipeline::builder(registry, store).build();
    let mut config = owners_config();
    config.operator_tokens = HashSet::from(["op-secret-token".to_owned()]);
    let app = router(HttpState::new(&pipeline, None, config));
    let request = |method: &str, uri: &str, token: &str, body: &str| {
        axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .header("command-tenant-id", "t1")
            .body(axum::body::Body::from(body.to_owned()))
            .unwrap()
    };
    let created = app
        .clone()
        .oneshot(request(
            "POST",
            "/member/m-audit/register",
            "alice",
            r#"{"handle": "h-audit"}"#,
        ))
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::OK);
    let released = app
        .oneshot(request(
            "DELETE",
            "/unique-key/handle/h-audit",
            "op-secret-token",
            "",
        ))
        .await
        .unwrap();
    assert_eq!(released.status(), StatusCode::OK);

    let text = String::from_utf8(logged.0.lock().unwrap().clone()).unwrap();
    let audit: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("wow::audit"))
        .collect();
    assert_eq!(audit.len(), 1, "one audit record: {text}");
    let line = audit[0];
    use sha2::Digest;
    let fingerprint: String = sha2::Sha256::digest(b"op-secret-token")
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    for field in [
        format!("operator=\"{fingerprint}\""),
        "tenant=t1".to_owned(),
        "space=handle".to_owned(),
        "value=h-audit".to_owned(),
        "holder=\"demo.member/m-audit@t1\"".to_owned(),
        "at=".to_owned(),
    ] {
        assert!(line.contains(&field), "{field} in {line}");
    }
    assert!(
        !text.contains("op-secret-token"),
        "the token is never logged: {text}"
    );
}
