//! A command's stages as server-sent events, one per stage (docs/http-api.md).

use std::convert::Infallible;
use std::time::Instant;

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;
use wow_core::CommandMessage;
use wow_runtime::command::WaitPlan;

use crate::state::HttpState;

/// Sends the command and answers with one server-sent event per stage (docs/http-api.md).
pub(crate) fn stages(
    state: HttpState,
    message: CommandMessage<Value>,
    plan: WaitPlan,
    started: Instant,
) -> Response {
    let metrics_state = state.clone();
    let awaited = plan.stage;
    // One event per stage (docs/http-api.md); a caller that waits for one consumer (Wow's
    // `Command-Wait-Processor`) gets that consumer's signals too, as Wow streams them.
    let awaited_function = plan.function.clone();
    let events = state
        .gateway()
        .send_and_wait_stream(message, plan)
        .filter(move |result| {
            let shown = match (&result.function, &awaited_function) {
                (None, _) => true,
                (Some(function), Some(wanted)) => wanted.matches(function),
                (Some(_), None) => false,
            };
            std::future::ready(shown)
        })
        .map(move |result| {
            // A command counts once, by the element that ends its stream: the awaited
            // stage, or a failure (a timeout included).
            if result.stage == awaited || !result.succeeded {
                metrics_state.metrics().observe(&result, started.elapsed());
            }
            let event = Event::default()
                .id(result.id.clone())
                .event(result.stage.as_str());
            Ok::<_, Infallible>(
                event
                    .json_data(crate::status::wire(result))
                    .unwrap_or_else(|_| Event::default().data("{}")),
            )
        });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response();
    // The stream was accepted; each event's `errorCode` says how its stage went.
    response.headers_mut().insert(
        crate::status::ERROR_CODE_HEADER,
        HeaderValue::from_static("Ok"),
    );
    response
}
