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
//! # Sampling
//!
//! A process whose sampler follows the parent's decision (OpenTelemetry's default) declares
//! it with [`follow_parent_sampling`]: a hop whose incoming context is unsampled then builds
//! no span and hands the context on as it came. `wow-service` declares it when it installs
//! the exporter with a `parentbased_*` sampler (or none named); a service that installs its
//! own layer calls it itself.
//!
//! # Cost when off
//!
//! A subscriber that is not interested in [`SPAN_TARGET`] (`wow serve` logs without it unless
//! `RUST_LOG` names it) makes every span here a disabled one: one cached interest check per
//! span, no allocation, and no propagator work. What remains per command is copying the
//! header strings the command already carries.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::Context;
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
    let Some(fields) = bytes.get(..55) else {
        return false;
    };
    let well_formed = fields.iter().enumerate().all(|(at, byte)| match at {
        2 | 35 | 52 => *byte == b'-',
        _ => matches!(byte, b'0'..=b'9' | b'a'..=b'f'),
    });
    let nonzero = |part: &[u8]| part.iter().any(|b| *b != b'0');
    let version_ok = match &fields[..2] {
        b"ff" => false,
        b"00" => bytes.len() == 55,
        _ => bytes.len() == 55 || bytes.get(55) == Some(&b'-'),
    };
    well_formed && version_ok && nonzero(&fields[3..35]) && nonzero(&fields[36..52])
}

/// Whether a span whose parent context arrives unsampled records nothing: true when the
/// installed sampler follows its parent's decision (OpenTelemetry's default,
/// `parentbased_*`). Set by whoever installs the OpenTelemetry layer
/// ([`follow_parent_sampling`]); off by default, so every span is built and the sampler
/// decides.
static PARENT_DECIDES: AtomicBool = AtomicBool::new(false);

/// Declares that the installed sampler follows a parent's sampling decision (the SDK's
/// `parentbased_*` samplers, its default): a hop whose incoming context is unsampled then
/// builds no span at all and carries that context on unchanged, so an unsampled intent costs
/// one span (its root's) rather than one per hop. Leave it off (the default) for a sampler
/// that may record a child of an unsampled parent.
pub fn follow_parent_sampling(enabled: bool) {
    PARENT_DECIDES.store(enabled, Ordering::Relaxed);
}

/// Whether a hop receiving `header` builds no span: the installed sampler follows its parent
/// ([`follow_parent_sampling`]) and the header's `traceparent` is valid with its sampled
/// flag clear. Reads the flags first: a sampled context (the usual case) is not parsed.
fn parent_unsampled(header: &Header) -> bool {
    if !PARENT_DECIDES.load(Ordering::Relaxed) {
        return false;
    }
    let Some(traceparent) = header.get(TRACEPARENT_HEADER) else {
        return false;
    };
    // The sampled flag is the lowest bit of the flags' second hex digit.
    let sampled = traceparent
        .as_bytes()
        .get(54)
        .and_then(|digit| char::from(*digit).to_digit(16))
        .is_some_and(|digit| digit & 1 == 1);
    !sampled && is_valid_traceparent(traceparent)
}

/// The remote span context a valid `traceparent` (see [`is_valid_traceparent`]) names, with
/// the `tracestate` given when it parses; `None` for an invalid `traceparent`.
fn parse_traceparent(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    if !is_valid_traceparent(traceparent) {
        return None;
    }
    let trace_id = TraceId::from_hex(traceparent.get(3..35)?).ok()?;
    let span_id = SpanId::from_hex(traceparent.get(36..52)?).ok()?;
    let flags = u8::from_str_radix(traceparent.get(53..55)?, 16).ok()?;
    let state = tracestate
        .and_then(|state| state.parse::<TraceState>().ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags) & TraceFlags::SAMPLED,
        true,
        state,
    ))
}

/// Makes `span` a child of the trace context `header` carries. Nothing happens when the span
/// is disabled, when the header has no valid `traceparent`, or when no OpenTelemetry layer
/// records the span: then the span keeps its contextual parent. Call it before the span is
/// first entered.
pub fn continue_from(span: &Span, header: &Header) {
    if span.is_disabled() {
        return;
    }
    let Some(parent) = header.get(TRACEPARENT_HEADER).and_then(|traceparent| {
        parse_traceparent(
            traceparent,
            header.get(TRACESTATE_HEADER).map(String::as_str),
        )
    }) else {
        return;
    };
    // No OpenTelemetry layer, or a span already entered: it keeps its parent.
    let _ignored = span.set_parent(Context::new().with_remote_span_context(parent));
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
    let span_context = context.span().span_context().clone();
    if !span_context.is_valid() {
        return;
    }
    header.insert(TRACEPARENT_HEADER.to_owned(), traceparent_of(&span_context));
    let state = span_context.trace_state().header();
    if state.is_empty() {
        // A `tracestate` left belongs to the context being replaced.
        header.remove(TRACESTATE_HEADER);
    } else {
        header.insert(TRACESTATE_HEADER.to_owned(), state);
    }
}

/// The version-`00` `traceparent` naming `context`: `00-{trace id}-{span id}-{flags}` in
/// lowercase hexadecimal, only the sampled flag kept (W3C Trace Context).
fn traceparent_of(context: &SpanContext) -> String {
    fn push_hex(value: &mut String, bytes: &[u8]) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for byte in bytes {
            value.push(char::from(HEX[usize::from(byte >> 4)]));
            value.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
    let flags = context.trace_flags() & TraceFlags::SAMPLED;
    let mut value = String::with_capacity(55);
    value.push_str("00-");
    push_hex(&mut value, &context.trace_id().to_bytes());
    value.push('-');
    push_hex(&mut value, &context.span_id().to_bytes());
    value.push('-');
    push_hex(&mut value, &[flags.to_u8()]);
    value
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
/// it), else of the current span. No span when that context is unsampled and the sampler
/// follows it ([`follow_parent_sampling`]).
pub fn gateway_span(command: &JsonCommand) -> Span {
    if parent_unsampled(&command.header) {
        return Span::none();
    }
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "gateway",
        otel.name = ["gateway ", &command.name].concat().as_str(),
        request_id = command.request_id.as_str(),
        aggregate_id = command.aggregate_id.id.as_str(),
        tenant_id = command.aggregate_id.tenant_id.as_str(),
        command_id = command.id.as_str(),
    );
    continue_from(&span, &command.header);
    span
}

/// The span of a node processing `command` to its decision, a child of the context the
/// command's header carries (the gateway's span); none as for [`gateway_span`].
pub fn node_span(command: &JsonCommand) -> Span {
    if parent_unsampled(&command.header) {
        return Span::none();
    }
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "node",
        otel.name = ["node ", &command.name].concat().as_str(),
        request_id = command.request_id.as_str(),
        aggregate_id = command.aggregate_id.id.as_str(),
    );
    continue_from(&span, &command.header);
    span
}

/// The span of appending the stream deciding `command` at `version`, a child of the current
/// span (the node's), none when that one is none. Its context is what the stream's header
/// carries to the consumers.
pub fn append_span(command: &JsonCommand, version: u64) -> Span {
    if parent_unsampled(&command.header) {
        return Span::none();
    }
    tracing::info_span!(
        target: SPAN_TARGET,
        "append",
        otel.name = ["append ", &command.aggregate_id.aggregate_name].concat().as_str(),
        request_id = command.request_id.as_str(),
        version,
    )
}

/// The span of `consumer` handling `stream` at `stage` (a snapshotter, projection, event
/// processor or saga), a child of the context the stream's header carries (the append's);
/// none as for [`gateway_span`].
pub fn consumer_span(consumer: &str, stage: CommandStage, stream: &DomainEventStream) -> Span {
    if parent_unsampled(&stream.header) {
        return Span::none();
    }
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "consumer",
        otel.name = span_name(stage_kind(stage), consumer).as_str(),
        request_id = stream.request_id.as_str(),
        version = stream.version,
    );
    continue_from(&span, &stream.header);
    span
}

/// A consumer span's name: its kind and name (`projection account_balance`), or the kind
/// alone where the consumer is named after it (`snapshot`).
fn span_name(kind: &'static str, name: &str) -> String {
    if kind == name {
        kind.to_owned()
    } else {
        [kind, " ", name].concat()
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
    fn a_parsed_traceparent_is_written_back_the_same() {
        let parsed = parse_traceparent(VALID, Some("vendor=1")).unwrap();
        assert!(parsed.is_sampled() && parsed.is_remote());
        assert_eq!(traceparent_of(&parsed), VALID);
        assert_eq!(parsed.trace_state().header(), "vendor=1");
        let unsampled = VALID.replace("-01", "-00");
        assert_eq!(
            traceparent_of(&parse_traceparent(&unsampled, None).unwrap()),
            unsampled
        );
        // Flags other than sampled are not carried on.
        let other_flags = VALID.replace("-01", "-03");
        assert_eq!(
            traceparent_of(&parse_traceparent(&other_flags, None).unwrap()),
            VALID
        );
        assert!(parse_traceparent("garbage", None).is_none());
    }

    #[test]
    fn an_unsampled_parent_skips_the_span_only_when_the_sampler_follows_it() {
        let mut header = Header::new();
        header.insert(TRACEPARENT_HEADER.to_owned(), VALID.replace("-01", "-00"));
        follow_parent_sampling(false);
        assert!(!parent_unsampled(&header));
        follow_parent_sampling(true);
        assert!(parent_unsampled(&header));
        header.insert(TRACEPARENT_HEADER.to_owned(), VALID.to_owned());
        assert!(!parent_unsampled(&header));
        header.insert(TRACEPARENT_HEADER.to_owned(), "00-zz-00".to_owned());
        assert!(!parent_unsampled(&header));
        follow_parent_sampling(false);
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
