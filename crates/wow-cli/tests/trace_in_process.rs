//! SPEC OB-1, one trace per intent, in one process: a transfer sent over HTTP with a W3C
//! `traceparent` is one trace from the gateway to the node, the append, the projection, the
//! saga and the commands the saga sends; with no OpenTelemetry layer the `traceparent`
//! passes through unchanged into the stored streams, the saga's commands among them.
//!
//! Each test runs on a current-thread runtime with its own default subscriber, so the two
//! never see each other's spans.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry::Value as OtelValue;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::Value;
use tower::ServiceExt;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;
use wow_core::Stores;
use wow_runtime::trace_context::SPAN_TARGET;
use wow_service::RunningService;

/// The trace and parent span the caller's request names.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

fn traceparent() -> String {
    format!("00-{TRACE_ID}-{PARENT_ID}-01")
}

async fn bank() -> RunningService {
    wow_example_bank::service::service()
        .stores(Stores::in_memory())
        .build()
        .await
        .unwrap()
}

async fn call(
    app: &Router,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, Value) {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::from(body.to_owned())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Opens `a` with 100 and `b` with 5, then transfers 30 from `a` to `b` with the test's
/// `traceparent`, waiting until the saga handled it (both its commands processed).
async fn open_and_transfer(app: &Router) {
    for (id, balance) in [("a", 100), ("b", 5)] {
        let body = format!(r#"{{"name":"{id}","balance":{balance}}}"#);
        let (status, answer) = call(app, "POST", &format!("/account/{id}/open"), &[], &body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    let traceparent = traceparent();
    let headers = [
        ("traceparent", traceparent.as_str()),
        ("tracestate", "vendor=1"),
        ("Command-Request-Id", "transfer-1"),
        ("Command-Wait-Stage", "SAGA_HANDLED"),
    ];
    let (status, answer) = call(
        app,
        "POST",
        "/account/a/transfer",
        &headers,
        r#"{"to":"b","amount":30}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let sent = answer["result"]["commands"].as_array().unwrap();
    assert_eq!(sent.len(), 2, "{answer}");
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a OtelValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn attribute_is(span: &SpanData, key: &str, value: &str) -> bool {
    attribute(span, key).is_some_and(|v| v.as_str() == value)
}

/// The one finished span named `name` whose attribute `key` is `value`, if there is one yet.
fn find<'a>(spans: &'a [SpanData], name: &str, key: &str, value: &str) -> Option<&'a SpanData> {
    let found: Vec<_> = spans
        .iter()
        .filter(|span| span.name == name && attribute_is(span, key, value))
        .collect();
    assert!(
        found.len() <= 1,
        "more than one `{name}` with {key}={value}: {found:#?}"
    );
    found.first().copied()
}

fn id(span: &SpanData) -> SpanId {
    span.span_context.span_id()
}

/// The chain of one transfer, once every span of it has finished.
struct Chain<'a> {
    gateway: &'a SpanData,
    node: &'a SpanData,
    append: &'a SpanData,
    projection: &'a SpanData,
    saga: &'a SpanData,
    receive_gateway: &'a SpanData,
    receive_node: &'a SpanData,
    receive_append: &'a SpanData,
    receive_projection: &'a SpanData,
    confirm_gateway: &'a SpanData,
    confirm_node: &'a SpanData,
}

fn chain(spans: &[SpanData]) -> Option<Chain<'_>> {
    let by_request = |name: &str, request_id: &str| find(spans, name, "request_id", request_id);
    let transfer = "transfer-1";
    let saga = by_request("saga transfer", transfer)?;
    // The saga's commands, by the command they carry (their request ids derive from the event).
    let sent = |command: &str, name: &str| {
        spans.iter().find(|span| {
            span.name == name
                && attribute_is(span, "command", command)
                && span.span_context.trace_id() == saga.span_context.trace_id()
        })
    };
    let receive_node = sent("receive_transfer", "node receive_transfer")?;
    let receive_request = attribute(receive_node, "request_id")?.as_str().into_owned();
    Some(Chain {
        gateway: by_request("gateway transfer", transfer)?,
        node: by_request("node transfer", transfer)?,
        append: by_request("append account", transfer)?,
        projection: by_request("projection account_balance", transfer)?,
        saga,
        receive_gateway: sent("receive_transfer", "gateway receive_transfer")?,
        receive_node,
        receive_append: by_request("append account", &receive_request)?,
        receive_projection: by_request("projection account_balance", &receive_request)?,
        confirm_gateway: sent("confirm_transfer", "gateway confirm_transfer")?,
        confirm_node: sent("confirm_transfer", "node confirm_transfer")?,
    })
}

#[tokio::test]
async fn a_transfer_is_one_trace_from_the_request_to_the_commands_its_saga_sends() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("ob-1"))
        .with_filter(Targets::new().with_target(SPAN_TARGET, tracing::Level::INFO));
    let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let service = bank().await;
    let app = service.router();
    open_and_transfer(&app).await;

    // The answer comes once the saga is done; the projection of `b` may still be running.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let spans = loop {
        let spans = exporter.get_finished_spans().unwrap();
        if chain(&spans).is_some() {
            break spans;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the transfer's spans never all finished: {:#?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        tokio::task::yield_now().await;
    };
    let chain = chain(&spans).unwrap();
    let trace_id = TraceId::from_hex(TRACE_ID).unwrap();
    let request_parent = SpanId::from_hex(PARENT_ID).unwrap();

    // Every span of the intent is in the request's trace.
    let of_intent = [
        chain.gateway,
        chain.node,
        chain.append,
        chain.projection,
        chain.saga,
        chain.receive_gateway,
        chain.receive_node,
        chain.receive_append,
        chain.receive_projection,
        chain.confirm_gateway,
        chain.confirm_node,
    ];
    for span in of_intent {
        assert_eq!(span.span_context.trace_id(), trace_id, "{span:#?}");
    }
    // So is every span that names the transfer's request id.
    for span in spans
        .iter()
        .filter(|s| attribute_is(s, "request_id", "transfer-1"))
    {
        assert_eq!(span.span_context.trace_id(), trace_id, "{span:#?}");
    }
    // The parent chain: request → gateway → node → append → projection, saga → the saga's
    // commands → their nodes → their appends → their projections.
    assert_eq!(chain.gateway.parent_span_id, request_parent);
    assert!(chain.gateway.parent_span_is_remote);
    assert_eq!(chain.node.parent_span_id, id(chain.gateway));
    assert_eq!(chain.append.parent_span_id, id(chain.node));
    assert_eq!(chain.projection.parent_span_id, id(chain.append));
    assert_eq!(chain.saga.parent_span_id, id(chain.append));
    assert_eq!(chain.receive_gateway.parent_span_id, id(chain.saga));
    assert_eq!(chain.receive_node.parent_span_id, id(chain.receive_gateway));
    assert_eq!(chain.receive_append.parent_span_id, id(chain.receive_node));
    assert_eq!(
        chain.receive_projection.parent_span_id,
        id(chain.receive_append)
    );
    assert_eq!(chain.confirm_gateway.parent_span_id, id(chain.saga));
    assert_eq!(chain.confirm_node.parent_span_id, id(chain.confirm_gateway));
    // The request's tracestate travels on.
    assert_eq!(
        chain.receive_node.span_context.trace_state().header(),
        "vendor=1"
    );

    // The stored stream carries the append's context, the saga's command the saga's.
    let history = stream_headers(&app, "a").await;
    assert_eq!(
        history[1]["traceparent"],
        format!("00-{TRACE_ID}-{}-01", id(chain.append))
    );
    let received = stream_headers(&app, "b").await;
    assert_eq!(
        received[1]["traceparent"],
        format!("00-{TRACE_ID}-{}-01", id(chain.receive_append))
    );
    service.stop().await;
}

/// The headers of `account`'s stored streams, in version order.
async fn stream_headers(app: &Router, account: &str) -> Vec<Value> {
    let (status, streams) = call(
        app,
        "GET",
        &format!("/account/{account}/event/1/10"),
        &[],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{streams}");
    streams
        .as_array()
        .unwrap()
        .iter()
        .map(|stream| stream["header"].clone())
        .collect()
}

#[tokio::test]
async fn without_an_opentelemetry_layer_the_traceparent_passes_through_unchanged() {
    // Spans enabled (every target), but no OpenTelemetry layer to give them a context.
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::sink);
    let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry().with(logs));

    let service = bank().await;
    let app = service.router();
    open_and_transfer(&app).await;

    let traceparent = traceparent();
    // The transfer's stream (version 2 of `a`) and the saga's confirmation (version 3).
    let sent = stream_headers(&app, "a").await;
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(sent[0].get("traceparent").is_none(), "{sent:?}");
    for header in &sent[1..] {
        assert_eq!(header["traceparent"], traceparent.as_str(), "{header}");
        assert_eq!(header["tracestate"], "vendor=1", "{header}");
    }
    // The saga's receive_transfer, appended at `b` with the command's headers.
    let received = stream_headers(&app, "b").await;
    assert_eq!(received.len(), 2, "{received:?}");
    assert_eq!(received[1]["traceparent"], traceparent.as_str());
    assert_eq!(received[1]["tracestate"], "vendor=1");
    service.stop().await;
}
