//! SPEC OB-1 for deadlines: a deadline's row keeps no trace context, so its firing is a trace
//! of its own. Alone in its test binary: the OpenTelemetry layer is the process's global
//! subscriber, installed before any span is made (a thread's own default subscriber races
//! with other tests' threads over `tracing`'s per-callsite cache).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use opentelemetry::trace::{SpanId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;
use wow_core::aggregate::AggregateRegistry;
use wow_core::command::{CommandKind, JsonCommand, TRACEPARENT_HEADER};
use wow_core::eventsourcing::{History, InMemoryEventStore};
use wow_core::id::{self, ManualClock};
use wow_core::{AggregateId, CommandMessage};
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::LocalPipeline;

const T0: i64 = 1_800_000_000_000;
const MINUTE: i64 = 60_000;

fn command(id: &AggregateId, name: &str, body: serde_json::Value) -> JsonCommand {
    CommandMessage::new(id.clone(), name, CommandKind::Normal, body)
}

/// SPEC OB-1: a deadline's row keeps no trace context, so its firing is a trace of its own,
/// rooted at the `deadline` span; the fired command's gateway, node and append are below it,
/// and the stream it appends carries that trace, not the one of the stream that scheduled it.
#[tokio::test]
async fn a_deadlines_firing_is_a_trace_of_its_own_rooted_at_its_deadline_span() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("ob-1"))
        .with_filter(tracing_subscriber::filter::Targets::new().with_target(
            wow_runtime::trace_context::SPAN_TARGET,
            tracing::Level::INFO,
        ));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();

    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let mut registry = AggregateRegistry::new();
    registry
        .register::<wow_core::testing_example::Hold>()
        .unwrap();
    let pipeline = LocalPipeline::builder(registry, store.clone())
        .clock(clock.clone())
        .deadlines(store.clone())
        .build();
    let scheduler = pipeline.deadline_scheduler(store.clone());
    let hold = AggregateId::new("demo", "hold", id::new_id(), "t1");
    let placing = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    pipeline
        .gateway
        .send_and_wait(
            command(&hold, "place", json!({"minutes": 1})).with_header(TRACEPARENT_HEADER, placing),
            WaitPlan::processed(),
        )
        .await
        .unwrap();
    clock.advance(MINUTE);
    assert_eq!(scheduler.fire_due().await.unwrap().fired, 1);

    let spans = exporter.get_finished_spans().unwrap();
    let named = |prefix: &str| {
        let found: Vec<_> = spans
            .iter()
            .filter(|s| s.name.starts_with(prefix))
            .collect();
        found
    };
    let deadline = named("deadline ");
    assert_eq!(deadline.len(), 1, "{spans:#?}");
    let deadline = deadline[0];
    assert_eq!(
        deadline.parent_span_id,
        SpanId::INVALID,
        "a root: {deadline:#?}"
    );
    let trace = deadline.span_context.trace_id();
    assert_ne!(trace.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
    let in_trace = |prefix: &str| {
        let found: Vec<_> = named(prefix)
            .into_iter()
            .filter(|s| s.span_context.trace_id() == trace)
            .collect();
        assert_eq!(
            found.len(),
            1,
            "one `{prefix}` in the firing's trace: {spans:#?}"
        );
        found[0]
    };
    let gateway = in_trace("gateway ");
    let fired = in_trace("node ");
    let append = in_trace("append ");
    assert_eq!(gateway.parent_span_id, deadline.span_context.span_id());
    assert_eq!(fired.parent_span_id, gateway.span_context.span_id());
    assert_eq!(append.parent_span_id, fired.span_context.span_id());
    let history = store.load(&hold, 2, 2).await.unwrap();
    assert_eq!(
        history[0].header.get(TRACEPARENT_HEADER).cloned(),
        Some(format!("00-{trace}-{}-01", append.span_context.span_id()))
    );
}
