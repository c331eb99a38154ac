//! Fresh reads of a view over several aggregate types (SPEC DS-6): its rows are not one per
//! aggregate, so a read names the aggregate whose append it must include
//! (`Wow-Fresh-Aggregate: {aggregate}/{id}`), and is answered once the view's consumer has
//! handled that append (its stored position on the aggregate), or `408 ViewNotFresh`.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use wow_core::event::ConsumerPositions;
use wow_core::eventsourcing::EventStore;
use wow_core::{AggregateId, NamedAggregate};
use wow_http::fresh::{not_fresh, read_fresh, Freshness, FRESH_AGGREGATE};

use crate::view_route::error;

/// What a consumer's fresh read needs: history (for the request log) and the positions.
#[derive(Debug, Clone)]
pub(crate) struct ConsumerReads {
    pub(crate) events: Arc<dyn EventStore>,
    pub(crate) positions: Arc<dyn ConsumerPositions>,
}

impl ConsumerReads {
    /// Waits until `consumer` (reading `inputs`) has handled what `freshness` names of the
    /// aggregate `Wow-Fresh-Aggregate` names in `tenant_id`: `Ok` then, else the answer to
    /// give (400 for a missing or unknown aggregate, 408 `ViewNotFresh`, 503).
    pub(crate) async fn wait(
        &self,
        consumer: &str,
        inputs: &[NamedAggregate],
        tenant_id: &str,
        freshness: &Freshness,
    ) -> Result<(), Response> {
        let aggregate = named(inputs, tenant_id, freshness)
            .map_err(|message| error(StatusCode::BAD_REQUEST, "BadRequest", message))?;
        let read = || {
            let (positions, aggregate) = (self.positions.clone(), aggregate.clone());
            async move {
                let at = positions
                    .positions(consumer, std::slice::from_ref(&aggregate))
                    .await
                    .map_err(|failure| {
                        error(
                            StatusCode::SERVICE_UNAVAILABLE,
                            "ServiceUnavailable",
                            format!("the positions of {consumer} cannot be read: {failure}"),
                        )
                    })?;
                Ok(at.get(&aggregate).map(|version| ((), *version)))
            }
        };
        match read_fresh(self.events.as_ref(), &aggregate, freshness, error, read).await {
            Ok(_) => Ok(()),
            Err(Ok(behind)) => {
                let id = format!("{}/{}", aggregate.aggregate_name, aggregate.id);
                Err(not_fresh(consumer, &id, &behind))
            }
            Err(Err(failure)) => Err(failure),
        }
    }
}

/// The aggregate `Wow-Fresh-Aggregate` names: `{aggregate}/{id}` of one of `inputs`, or a
/// bare id when there is one input; else what is wrong with it.
fn named(
    inputs: &[NamedAggregate],
    tenant_id: &str,
    freshness: &Freshness,
) -> Result<AggregateId, String> {
    let names = || {
        inputs
            .iter()
            .map(|input| input.aggregate_name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(text) = freshness.aggregate.as_deref() else {
        return Err(format!(
            "a fresh read of several rows names the aggregate whose append it must include: {FRESH_AGGREGATE}: {{aggregate}}/{{id}} (one of {})",
            names()
        ));
    };
    let (input, id) = match text.split_once('/') {
        Some((name, id)) => (inputs.iter().find(|input| input.aggregate_name == name), id),
        None if inputs.len() == 1 => (inputs.first(), text),
        None => (None, text),
    };
    match input {
        Some(input) if !id.is_empty() => Ok(input.aggregate_id(id, tenant_id)),
        _ => Err(format!(
            "{FRESH_AGGREGATE} must be {{aggregate}}/{{id}} with one of {}, not `{text}`",
            names()
        )),
    }
}
