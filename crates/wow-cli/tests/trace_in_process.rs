//! SPEC OB-1, one trace per intent, in one process: a transfer sent over HTTP with a W3C
//! `traceparent` is one trace from the gateway to the node, the append, the projection, the
//! saga and the commands the saga sends.
//!
//! Alone in its test binary: the OpenTelemetry layer is the process's global subscriber,
//! installed before any span is made (a thread's own default subscriber races with other
//! threads over `tracing`'s per-callsite cache).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/traced_bank.rs"]
mod traced_bank;

use std::time::Duration;

use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry::Value as OtelValue;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use traced_bank::{bank, open_and_transfer, stream_headers, PARENT_ID, TRACE_ID};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;
use wow_runtime::trace_context::SPAN_TARGET;

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
    // The saga's commands, by the span's name, which names the command (their request ids
    // derive from the event).
    let sent = |name: &str| {
        spans.iter().find(|span| {
            span.name == name && span.span_context.trace_id() == saga.span_context.trace_id()
        })
    };
    let receive_node = sent("node receive_transfer")?;
    let receive_request = attribute(receive_node, "request_id")?.as_str().into_owned();
    Some(Chain {
        gateway: by_request("gateway transfer", transfer)?,
        node: by_request("node transfer", transfer)?,
        append: by_request("append account", transfer)?,
        projection: by_request("projection account_balance", transfer)?,
        saga,
        receive_gateway: sent("gateway receive_transfer")?,
        receive_node,
        receive_append: by_request("append account", &receive_request)?,
        receive_projection: by_request("projection account_balance", &receive_request)?,
        confirm_gateway: sent("gateway confirm_transfer")?,
        confirm_node: sent("node confirm_transfer")?,
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
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();

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
