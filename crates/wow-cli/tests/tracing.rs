//! SPEC OB-1 across real processes: `wow serve --role gateway` and `--role processor` over
//! NATS on PostgreSQL, each exporting its spans over OTLP/HTTP (JSON) to a receiver the test
//! runs. A command sent with a W3C `traceparent` is one trace in both processes, and the
//! processor's node span is a child of the gateway process's span.
//!
//! Needs PostgreSQL (`WOW_TEST_POSTGRES_URL`) and NATS with JetStream (`WOW_TEST_NATS_URL`);
//! skipped with a `SKIPPED` line on stderr when either is down, failed under
//! `WOW_REQUIRE_BACKENDS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use support::Served;

const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT_ID: &str = "b7ad6b7169203331";

/// What the receiver was sent: one OTLP `ExportTraceServiceRequest` (JSON) per export.
type Received = Arc<Mutex<Vec<Value>>>;

/// An OTLP/HTTP receiver on a free port of 127.0.0.1: `POST /v1/traces` with a JSON body
/// is kept. Its address, and what it keeps.
async fn receiver() -> (String, Received) {
    let received = Received::default();
    let app = Router::new()
        .route(
            "/v1/traces",
            post(
                |State(received): State<Received>, Json(body): Json<Value>| async move {
                    received.lock().unwrap().push(body);
                    Json(json!({}))
                },
            ),
        )
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), received)
}

/// One exported span: the process it came from, and its ids and name.
#[derive(Debug, Clone)]
struct Span {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
}

/// Every span in `received`, with its resource's `service.name`.
fn spans(received: &Received) -> Vec<Span> {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let mut spans = Vec::new();
    for export in received.lock().unwrap().iter() {
        for resource in export["resourceSpans"].as_array().into_iter().flatten() {
            let service = resource["resource"]["attributes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|kv| kv["key"] == "service.name")
                .map(|kv| text(&kv["value"]["stringValue"]))
                .unwrap_or_default();
            for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                for span in scope["spans"].as_array().into_iter().flatten() {
                    spans.push(Span {
                        service: service.clone(),
                        name: text(&span["name"]),
                        trace_id: text(&span["traceId"]),
                        span_id: text(&span["spanId"]),
                        parent_span_id: text(&span["parentSpanId"]),
                    });
                }
            }
        }
    }
    spans
}

/// A deployment of the test's own: the PostgreSQL server's URL, a schema name, and the
/// environment naming a NATS namespace.
struct Deployment {
    postgres: String,
    schema: String,
    env: Vec<(String, String)>,
}

/// The test's deployment; `None` when PostgreSQL or NATS is down and no backend is required.
fn deployment() -> Option<Deployment> {
    let (postgres, schema) = support::postgres_schema("trace")?;
    let nats =
        std::env::var("WOW_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    if let Err(error) = std::net::TcpStream::connect_timeout(
        &"127.0.0.1:4222".parse().unwrap(),
        Duration::from_secs(2),
    ) {
        wow_tck::skip::unavailable(
            wow_tck::skip::Requirement::Backends,
            &format!("no NATS at 127.0.0.1:4222 ({error})"),
        );
        return None;
    }
    let namespace = schema.replace('_', "");
    let env = vec![
        ("WOW_NATS_URL".to_owned(), nats),
        ("WOW_NATS_NAMESPACE".to_owned(), namespace),
        ("WOW_NATS_PARTITIONS".to_owned(), "4".to_owned()),
        ("WOW_NATS_STORAGE".to_owned(), "memory".to_owned()),
        ("WOW_NATS_LEASE_TTL_MS".to_owned(), "2000".to_owned()),
    ];
    Some(Deployment {
        postgres,
        schema,
        env,
    })
}

/// Removes the deployment's command stream and lease buckets.
async fn clean_nats(env: &[(String, String)]) {
    let setting = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let (Some(url), Some(namespace)) = (setting("WOW_NATS_URL"), setting("WOW_NATS_NAMESPACE"))
    else {
        return;
    };
    if let Ok(client) = async_nats::connect(url).await {
        let jetstream = async_nats::jetstream::new(client);
        let upper = namespace.to_uppercase();
        let _ = jetstream.delete_stream(format!("{upper}_COMMANDS")).await;
        let _ = jetstream
            .delete_key_value(format!("{namespace}_partitions"))
            .await;
        let _ = jetstream
            .delete_key_value(format!("{upper}_COMMANDS_DEPLOYMENT"))
            .await;
    }
}

// Two threads: the receiver answers the exports the processes send while the test waits for
// them to exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_over_nats_is_one_trace_across_the_gateway_and_the_processor() {
    let Some(Deployment {
        postgres,
        schema,
        env,
    }) = deployment()
    else {
        return;
    };
    let store = format!("{postgres}?schema={schema}");
    let (endpoint, received) = receiver().await;
    let start = |role: &str, service: &str| {
        let mut vars: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        vars.extend([
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_SERVICE_NAME", service),
        ]);
        Served::start(
            &["--listen", "127.0.0.1:0", "--store", &store, "--role", role],
            &vars,
        )
    };
    let processor = start("processor", "wow-processor");
    let gateway = start("gateway", "wow-gateway");

    let response = reqwest::Client::new()
        .post(format!("http://{}/account/traced/open", gateway.address))
        .header("traceparent", format!("00-{TRACE_ID}-{PARENT_ID}-01"))
        .header("Command-Request-Id", "open-traced")
        .header("Command-Wait-Stage", "PROJECTED")
        .header("Command-Wait-Timeout", "30000")
        .json(&json!({"name": "Tracy", "balance": 10}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");

    // SIGTERM: each process exports the spans it still holds before it exits.
    assert!(gateway.stop().success());
    assert!(processor.stop().success());

    let spans = spans(&received);
    let traced: Vec<&Span> = spans.iter().filter(|s| s.trace_id == TRACE_ID).collect();
    let one = |service: &str, name: &str| {
        let found: Vec<&&Span> = traced
            .iter()
            .filter(|s| s.service == service && s.name == name)
            .collect();
        assert_eq!(found.len(), 1, "one `{name}` of {service}: {spans:#?}");
        (*found[0]).clone()
    };
    let gateway_span = one("wow-gateway", "gateway open");
    let node = one("wow-processor", "node open");
    let append = one("wow-processor", "append account");
    assert_eq!(gateway_span.parent_span_id, PARENT_ID, "{gateway_span:?}");
    assert_eq!(node.parent_span_id, gateway_span.span_id, "{node:?}");
    assert_eq!(append.parent_span_id, node.span_id, "{append:?}");
    // The consumers run in the processor, each a child of the append.
    let consumers: Vec<&&Span> = traced
        .iter()
        .filter(|s| s.parent_span_id == append.span_id)
        .collect();
    assert!(
        consumers
            .iter()
            .any(|s| s.name == "projection account_balance"),
        "{consumers:#?}"
    );
    assert!(consumers.iter().all(|s| s.service == "wow-processor"));

    clean_nats(&env).await;
    support::drop_schema(&postgres, &schema);
}
