//! One trace per intent (SPEC OB-1): the W3C trace context (`traceparent`, `tracestate`)
//! travels in the headers of a command, of the stream it appended, and of every command a
//! consumer of that stream sends; each hop runs in a `tracing` span whose parent is the
//! context it received.
//!
//! # With and without an OpenTelemetry layer
//!
//! The spans are `tracing` spans of target [`SPAN_TARGET`]. With a
//! `tracing_opentelemetry` layer in the subscriber, each hop's span continues the trace of the
//! header it received ([`continue_from`]) and writes its own context into the header it hands
//! on ([`stamp`]): one trace id, each hop a child span. Without one, nothing is extracted or
//! injected and the header keeps what it received: the caller's `traceparent` passes through
//! unchanged, command to stream to saga command, so a user's own tracing sees one trace id.
//!
//! # Cost when off
//!
//! A subscriber that is not interested in [`SPAN_TARGET`] (`wow serve` logs without it unless
//! `RUST_LOG` names it) makes every span here a disabled one: one cached interest check per
//! span, no allocation, and no propagator work. What remains per command is copying the
//! header strings the command already carries.

use std::collections::BTreeMap;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use wow_core::command::{CommandStage, JsonCommand, TRACEPARENT_HEADER, TRACESTATE_HEADER};
use wow_core::deadline::ScheduledCommand;
use wow_core::event::DomainEventStream;

/// The `tracing` target of every span of an intent's trace: a subscriber enables it to trace
/// (an OpenTelemetry layer), or leaves it off to pay nothing.
pub const SPAN_TARGET: &str = "wow::trace";

/// The header names of the W3C trace context, in the order they are carried.
pub const TRACE_HEADERS: [&str; 2] = [TRACEPARENT_HEADER, TRACESTATE_HEADER];

type Header = BTreeMap<String, String>;

/// Reads a trace context from a message header.
struct HeaderExtractor<'a>(&'a Header);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// Writes a trace context into a message header; an empty `tracestate` removes any the
/// header had (it belonged to the context being replaced).
struct HeaderInjector<'a>(&'a mut Header);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if value.is_empty() {
            self.0.remove(key);
        } else {
            self.0.insert(key.to_owned(), value);
        }
    }
}

/// The longest `tracestate` carried on: W3C Trace Context lets a hop drop one past 512
/// characters, and bounds what a caller stores in every stream of its intent.
pub const MAX_TRACESTATE_LEN: usize = 512;

/// The trace headers a command sent by an HTTP request with these `traceparent` and
/// `tracestate` header values carries: both when the `traceparent` is valid (version `00`
/// form, non-zero ids; see [`is_valid_traceparent`]) and the `tracestate` at most
/// [`MAX_TRACESTATE_LEN`] characters, the `traceparent` alone when the `tracestate` is not,
/// nothing when the `traceparent` is absent or invalid (the gateway then starts a trace).
pub fn from_request(traceparent: Option<&str>, tracestate: Option<&str>) -> Vec<(String, String)> {
    let Some(traceparent) = traceparent
        .map(str::trim)
        .filter(|v| is_valid_traceparent(v))
    else {
        return Vec::new();
    };
    let mut trace = vec![(TRACEPARENT_HEADER.to_owned(), traceparent.to_owned())];
    if let Some(state) = tracestate
        .map(str::trim)
        .filter(|state| !state.is_empty() && state.len() <= MAX_TRACESTATE_LEN)
    {
        trace.push((TRACESTATE_HEADER.to_owned(), state.to_owned()));
    }
    trace
}

/// Whether `value` is a W3C `traceparent` a hop continues: `VV-TTTT…-PPPP…-FF` with a
/// two-digit version other than `ff`, a 32-digit trace id and a 16-digit parent id that are
/// not all zeros, and two-digit flags, all lowercase hexadecimal. A version-`00` value has
/// nothing after the flags; a later version may (W3C: read the first four fields).
pub fn is_valid_traceparent(value: &str) -> bool {
    let bytes = value.as_bytes();
    let hex = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|part| part.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
    };
    let dash = |at: usize| bytes.get(at) == Some(&b'-');
    let nonzero = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|part| part.iter().any(|b| *b != b'0'))
    };
    let well_formed = hex(0..2)
        && dash(2)
        && hex(3..35)
        && dash(35)
        && hex(36..52)
        && dash(52)
        && hex(53..55)
        && nonzero(3..35)
        && nonzero(36..52);
    let version_ok = match bytes.get(0..2) {
        Some(b"ff") | None => false,
        Some(b"00") => bytes.len() == 55,
        Some(_) => bytes.len() == 55 || dash(55),
    };
    well_formed && version_ok
}

/// Makes `span` a child of the trace context `header` carries. Nothing happens when the span
/// is disabled, when the header has no valid `traceparent`, or when no OpenTelemetry layer
/// records the span: then the span keeps its contextual parent. Call it before the span is
/// first entered.
pub fn continue_from(span: &Span, header: &Header) {
    if span.is_disabled() || !header.contains_key(TRACEPARENT_HEADER) {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(header));
    if parent.span().span_context().is_valid() {
        // No OpenTelemetry layer, or a span already entered: it keeps its parent.
        let _ignored = span.set_parent(parent);
    }
}

/// Writes `span`'s trace context into `header` (`traceparent`, and `tracestate` when it has
/// one), so the next hop continues from `span`. When `span` carries no OpenTelemetry context
/// (disabled, or no layer records it) `header` is left as it is: the context it carries
/// passes through unchanged.
pub fn stamp(span: &Span, header: &mut Header) {
    if span.is_disabled() {
        return;
    }
    let context = span.context();
    if context.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&context, &mut HeaderInjector(header));
    }
}

/// The trace headers the commands sent on behalf of a stream with header `from` carry:
/// `span`'s context when it has one (see [`stamp`]), else the stream's own, unchanged.
/// Appended to `link`, which every command a saga sends on that stream carries.
pub fn carry(span: &Span, from: &Header, link: &mut Vec<(String, String)>) {
    let mut stamped = Header::new();
    stamp(span, &mut stamped);
    let source = if stamped.contains_key(TRACEPARENT_HEADER) {
        &stamped
    } else {
        from
    };
    for key in TRACE_HEADERS {
        if let Some(value) = source.get(key) {
            link.push((key.to_owned(), value.clone()));
        }
    }
}

/// The span of a gateway taking `command` (checks and the hand-over to the bus), a child of
/// the context the command's header carries (the HTTP request's, or the consumer's that sent
/// it), else of the current span.
pub fn gateway_span(command: &JsonCommand) -> Span {
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "gateway",
        otel.name = %format_args!("gateway {}", command.name),
        command = %command.name,
        aggregate_id = %command.aggregate_id,
        request_id = %command.request_id,
        command_id = %command.id,
    );
    continue_from(&span, &command.header);
    span
}

/// The span of a node processing `command` to its decision, a child of the context the
/// command's header carries (the gateway's span).
pub fn node_span(command: &JsonCommand) -> Span {
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "node",
        otel.name = %format_args!("node {}", command.name),
        command = %command.name,
        aggregate_id = %command.aggregate_id,
        request_id = %command.request_id,
        command_id = %command.id,
    );
    continue_from(&span, &command.header);
    span
}

/// The span of appending the stream deciding `command` at `version`, a child of the current
/// span (the node's). Its context is what the stream's header carries to the consumers.
pub fn append_span(command: &JsonCommand, version: u64) -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        "append",
        otel.name = %format_args!("append {}", command.aggregate_id.aggregate_name),
        aggregate_id = %command.aggregate_id,
        version,
        request_id = %command.request_id,
    )
}

/// The span of `consumer` handling `stream` at `stage` (a snapshotter, projection, event
/// processor or saga), a child of the context the stream's header carries (the append's).
pub fn consumer_span(consumer: &str, stage: CommandStage, stream: &DomainEventStream) -> Span {
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "consumer",
        otel.name = %SpanName(stage_kind(stage), consumer),
        consumer,
        stage = %stage,
        aggregate_id = %stream.aggregate_id,
        version = stream.version,
        request_id = %stream.request_id,
    );
    continue_from(&span, &stream.header);
    span
}

/// A consumer span's name: its kind and name (`projection account_balance`), or the kind
/// alone where the consumer is named after it (`snapshot`).
struct SpanName<'a>(&'static str, &'a str);

impl std::fmt::Display for SpanName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpanName(kind, name) if kind == name => f.write_str(kind),
            SpanName(kind, name) => write!(f, "{kind} {name}"),
        }
    }
}

/// What kind of consumer runs at `stage`, as a span names it.
fn stage_kind(stage: CommandStage) -> &'static str {
    match stage {
        CommandStage::Snapshot => "snapshot",
        CommandStage::Projected => "projection",
        CommandStage::EventHandled => "processor",
        CommandStage::SagaHandled => "saga",
        _ => "consumer",
    }
}

/// The span of the deadline scheduler firing `schedule`.
///
/// A deadline's row does not store the trace context of the stream that scheduled it (it
/// fires long after that request's trace ended, possibly in another process), so a firing
/// starts a trace of its own: a root span (no contextual parent is taken from whatever span
/// the scheduler runs in) naming the deadline, its owner and its request id, which derives
/// from the scheduling stream, so the firing is found from the intent that scheduled it. The
/// command it sends carries this span's context, so its gateway, node, append and consumers
/// are one trace below it.
pub fn deadline_span(schedule: &ScheduledCommand) -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        parent: None,
        "deadline",
        otel.name = %format_args!("deadline {}", schedule.name),
        deadline = %schedule.name,
        owner = %schedule.owner,
        target_aggregate = %schedule.target,
        command = %schedule.command,
        request_id = %schedule.request_id,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_is_continued_only_when_well_formed() {
        assert!(is_valid_traceparent(VALID));
        // A later version may append fields; version 00 may not.
        assert!(is_valid_traceparent(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"
        ));
        for invalid in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
        ] {
            assert!(!is_valid_traceparent(invalid), "{invalid}");
        }
    }

    #[test]
    fn a_request_carries_its_trace_context_on_only_when_valid_and_bounded() {
        let carried = from_request(Some(VALID), Some("vendor=1"));
        assert_eq!(
            carried,
            vec![
                (TRACEPARENT_HEADER.to_owned(), VALID.to_owned()),
                (TRACESTATE_HEADER.to_owned(), "vendor=1".to_owned()),
            ]
        );
        assert!(from_request(Some("garbage"), Some("vendor=1")).is_empty());
        assert!(from_request(None, Some("vendor=1")).is_empty());
        let long = "v=".to_owned() + &"x".repeat(MAX_TRACESTATE_LEN);
        assert_eq!(from_request(Some(VALID), Some(&long)).len(), 1);
    }

    #[test]
    fn without_a_layer_the_header_passes_through_unchanged() {
        let mut header = Header::new();
        header.insert(TRACEPARENT_HEADER.to_owned(), VALID.to_owned());
        header.insert(TRACESTATE_HEADER.to_owned(), "vendor=1".to_owned());
        let before = header.clone();
        let span = tracing::info_span!(target: SPAN_TARGET, "test");
        continue_from(&span, &header);
        stamp(&span, &mut header);
        assert_eq!(header, before);
        let mut link = Vec::new();
        carry(&span, &header, &mut link);
        assert_eq!(link, before.into_iter().collect::<Vec<_>>());
    }
}
