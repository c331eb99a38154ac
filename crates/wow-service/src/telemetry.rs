//! Logging, and the export of an intent's trace (SPEC OB-1) over OTLP when the standard
//! environment asks for it.
//!
//! | variable | effect |
//! | --- | --- |
//! | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` | where spans go, used as is (`http://host:4318/v1/traces`) |
//! | `OTEL_EXPORTER_OTLP_ENDPOINT` | the collector's base URL; spans go to `{it}/v1/traces` |
//! | `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, `OTEL_EXPORTER_OTLP_PROTOCOL` | `http/protobuf` (default) or `http/json`; `grpc` is not built in |
//! | `OTEL_SERVICE_NAME` | the `service.name` of every span (default `wow`) |
//! | `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_BSP_*` | as the OpenTelemetry SDK reads them |
//!
//! Under a sampler that follows its parent (`OTEL_TRACES_SAMPLER` unset or `parentbased_*`)
//! a hop whose incoming trace context is unsampled builds no span
//! (`wow_runtime::trace_context::follow_parent_sampling`). The layer records no source
//! location, thread, target or idle time, and does not make a span's OpenTelemetry context
//! current while it runs: take it from the `tracing` span
//! (`tracing_opentelemetry::OpenTelemetrySpanExt::context`).
//!
//! With neither endpoint variable set (or both empty) no OpenTelemetry layer is installed:
//! the spans of `wow_runtime::trace_context` are then of no interest to the subscriber,
//! so each is one cached check, and the `traceparent` a request brings passes through
//! unchanged.

use std::sync::Mutex;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};
use wow_runtime::trace_context::SPAN_TARGET;

/// The variable naming where spans go, used as is.
pub const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The variable naming the collector's base URL (spans go to `/v1/traces` below it).
pub const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The `service.name` given to spans when `OTEL_SERVICE_NAME` is not set.
pub const DEFAULT_SERVICE_NAME: &str = "wow";

/// The tracer provider installed by [`init_logging`], kept for [`shutdown_telemetry`].
static PROVIDER: Mutex<Option<SdkTracerProvider>> = Mutex::new(None);

/// Why no spans are exported although an endpoint is set.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The protocol variable names one this build cannot speak.
    #[error("{var}={value} is not supported: use http/protobuf or http/json")]
    UnsupportedProtocol {
        /// The variable read.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// The OTLP exporter could not be built (an endpoint that is not a URL, say).
    #[error("cannot build the OTLP span exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// Logs to standard error through `tracing`, filtered by `RUST_LOG` (default `info`), and,
/// when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, exports
/// the spans of every intent over OTLP (see the module documentation). Does nothing when the
/// process already has a global subscriber. A bad OTLP setting is logged as an error and
/// the process runs on without export.
pub fn init_logging() {
    if tracing::dispatcher::has_been_set() {
        return;
    }
    let exporting = otlp_requested().then(provider_from_env);
    let (provider, failure) = match exporting {
        Some(Ok(provider)) => (Some(provider), None),
        Some(Err(error)) => (None, Some(error)),
        None => (None, None),
    };
    let otel = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("wow"))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_context_activation(false)
            .with_filter(otel_filter())
    });
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(log_filter());
    let installed = tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init()
        .is_ok();
    if let Some(error) = failure {
        tracing::error!(%error, "spans are not exported");
    }
    if installed {
        if let Some(provider) = provider {
            wow_runtime::trace_context::follow_parent_sampling(sampler_follows_parent());
            tracing::info!("exporting spans over OTLP");
            *PROVIDER.lock().unwrap_or_else(|p| p.into_inner()) = Some(provider);
        }
    } else if let Some(provider) = provider {
        // Another subscriber won the race: this provider has nothing to export.
        let _ignored = provider.shutdown();
    }
}

/// Exports the spans still buffered and stops the exporter installed by [`init_logging`];
/// nothing when none is. Blocks until the last batch is sent or the exporter's timeout
/// passes: call it from a blocking context (as [`ServiceBuilder::serve`] does on its way out,
/// through `spawn_blocking`).
///
/// [`ServiceBuilder::serve`]: crate::ServiceBuilder::serve
pub fn shutdown_telemetry() {
    let provider = PROVIDER.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(provider) = provider {
        if let Err(error) = provider.shutdown() {
            tracing::warn!(%error, "the last spans may not have been exported");
        }
    }
}

/// Whether the environment names an OTLP endpoint for spans.
pub fn otlp_requested() -> bool {
    [TRACES_ENDPOINT_VAR, ENDPOINT_VAR]
        .iter()
        .any(|var| std::env::var_os(var).is_some_and(|value| !value.is_empty()))
}

/// Whether the sampler the SDK builds from `OTEL_TRACES_SAMPLER` follows a parent's
/// decision: unset, empty or one of the `parentbased_*` samplers (the SDK's default is
/// `parentbased_always_on`).
fn sampler_follows_parent() -> bool {
    std::env::var("OTEL_TRACES_SAMPLER").map_or(true, |sampler| {
        let sampler = sampler.trim();
        sampler.is_empty() || sampler.starts_with("parentbased_")
    })
}

/// The protocol the environment asks for: the traces variable, else the general one, else
/// `http/protobuf`.
fn protocol_from_env() -> Result<Protocol, TelemetryError> {
    for var in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        let Ok(value) = std::env::var(var) else {
            continue;
        };
        return match value.trim().to_ascii_lowercase().as_str() {
            "" => continue,
            "http/protobuf" => Ok(Protocol::HttpBinary),
            "http/json" => Ok(Protocol::HttpJson),
            _ => Err(TelemetryError::UnsupportedProtocol { var, value }),
        };
    }
    Ok(Protocol::HttpBinary)
}

/// A tracer provider exporting in batches over OTLP/HTTP, as the environment configures it.
///
/// # Errors
///
/// [`TelemetryError`] when the protocol is not supported or the exporter cannot be built.
pub fn provider_from_env() -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol_from_env()?)
        .build()?;
    let resource = if std::env::var_os("OTEL_SERVICE_NAME").is_some_and(|v| !v.is_empty()) {
        Resource::builder().build()
    } else {
        Resource::builder()
            .with_service_name(DEFAULT_SERVICE_NAME)
            .build()
    };
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// What the log lines show: `RUST_LOG` (default `info`), without the trace spans unless
/// `RUST_LOG` names their target, so logging alone never records them.
fn log_filter() -> EnvFilter {
    let asked = std::env::var("RUST_LOG").unwrap_or_default();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    if asked.contains(SPAN_TARGET) {
        return filter;
    }
    match format!("{SPAN_TARGET}=off").parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    }
}

/// What the OpenTelemetry layer records: the trace spans, and warnings and errors as events
/// of the span they happen in.
fn otel_filter() -> EnvFilter {
    EnvFilter::new(format!("warn,{SPAN_TARGET}=info"))
}
