//! SPEC OB-1 under a parent-based sampler (OpenTelemetry's default): an intent whose request
//! arrives unsampled builds no span at any hop and carries the request's `traceparent` on
//! unchanged, while an intent that starts its own trace is still traced. Alone in its test
//! binary: the OpenTelemetry layer is the process's global subscriber.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/traced_bank.rs"]
mod traced_bank;

use opentelemetry::trace::{TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use traced_bank::{bank, open_and_transfer_traced, stream_headers, PARENT_ID, TRACE_ID};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;
use wow_runtime::trace_context::{follow_parent_sampling, SPAN_TARGET};

#[tokio::test]
async fn an_unsampled_request_builds_no_span_and_its_traceparent_passes_through() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("ob-1"))
        .with_filter(Targets::new().with_target(SPAN_TARGET, tracing::Level::INFO));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();
    follow_parent_sampling(true);

    let service = bank().await;
    let app = service.router();
    let unsampled = format!("00-{TRACE_ID}-{PARENT_ID}-00");
    open_and_transfer_traced(&app, &unsampled).await;

    // Every hop of the transfer, the saga's commands among them, passed the request's
    // context on as it came: a span built at any hop would have written its own span id.
    let sent = stream_headers(&app, "a").await;
    assert_eq!(sent.len(), 3, "{sent:?}");
    for header in &sent[1..] {
        assert_eq!(header["traceparent"], unsampled.as_str(), "{header}");
        assert_eq!(header["tracestate"], "vendor=1", "{header}");
    }
    let received = stream_headers(&app, "b").await;
    assert_eq!(received[1]["traceparent"], unsampled.as_str());

    // The opens came without a traceparent: their traces started here, sampled, and exported.
    let spans = exporter.get_finished_spans().unwrap();
    let trace = TraceId::from_hex(TRACE_ID).unwrap();
    assert!(
        spans.iter().any(|span| span.name == "gateway open"),
        "{spans:#?}"
    );
    assert!(
        spans
            .iter()
            .all(|span| span.span_context.trace_id() != trace),
        "{spans:#?}"
    );
    let open_stream = &sent[0]["traceparent"];
    assert!(
        open_stream
            .as_str()
            .is_some_and(|value| value.ends_with("-01")),
        "{sent:?}"
    );
    service.stop().await;
}
