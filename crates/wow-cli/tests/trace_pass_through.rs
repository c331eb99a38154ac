//! SPEC OB-1 without an OpenTelemetry layer: the `traceparent` a request brings passes through
//! unchanged into the stored streams, the saga's commands among them, so a team's own tracing
//! sees one trace id. Alone in its test binary, with a global subscriber that records every
//! span (the worst case: spans made, none given an OpenTelemetry context).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/traced_bank.rs"]
mod traced_bank;

use traced_bank::{bank, open_and_transfer, stream_headers, traceparent};
use tracing_subscriber::layer::SubscriberExt;

#[tokio::test]
async fn without_an_opentelemetry_layer_the_traceparent_passes_through_unchanged() {
    // Spans enabled (every target), but no OpenTelemetry layer to give them a context.
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::sink);
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(logs)).unwrap();

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
