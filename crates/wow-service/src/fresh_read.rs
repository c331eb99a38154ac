//! Reads at least as fresh as an append (SPEC DS-6): a reader names the append its answer must
//! include, by request id (`Wow-Fresh-Request`) or by aggregate version (`Wow-Fresh-Version`),
//! and is answered once the view has folded it in, or after a bounded wait
//! (`Wow-Fresh-Wait`, milliseconds) with `408 ViewNotFresh` (as a command's wait that runs
//! out) and how far behind the view is: never silently stale data.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use wow_core::eventsourcing::EventStore;
use wow_core::AggregateId;

/// Names the request id whose append the answer must include.
pub(crate) const FRESH_REQUEST: &str = "Wow-Fresh-Request";
/// Names the aggregate version the answer must include (a command's `aggregateVersion`).
pub(crate) const FRESH_VERSION: &str = "Wow-Fresh-Version";
/// How long to wait for the view, in milliseconds (default [`DEFAULT_WAIT`], at most
/// [`MAX_WAIT`]).
pub(crate) const FRESH_WAIT: &str = "Wow-Fresh-Wait";
/// How long a fresh read waits when the reader does not say.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(3);
/// The longest wait a reader may ask for.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(5);
/// How often a waiting read looks again, at most.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// A reader's freshness condition, and how long it waits for it: the row must include the
/// append of `request` and version `version` of the read aggregate (each when named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Freshness {
    pub(crate) request: Option<String>,
    pub(crate) version: Option<u64>,
    pub(crate) wait: Duration,
}

/// Why a freshness condition could not be read: a header that does not parse (400).
pub(crate) type Refusal = (StatusCode, &'static str, String);

impl Freshness {
    /// The condition the request's headers name, if any.
    pub(crate) fn of(headers: &HeaderMap) -> Result<Option<Self>, Refusal> {
        let text = |name: &str| -> Result<Option<String>, Refusal> {
            headers
                .get(name)
                .map(|value| {
                    value
                        .to_str()
                        .map(|v| v.trim().to_owned())
                        .map_err(|_| bad(format!("{name} must be visible ASCII")))
                })
                .transpose()
        };
        let request = text(FRESH_REQUEST)?;
        if request.as_deref() == Some("") {
            return Err(bad(format!("{FRESH_REQUEST} is empty")));
        }
        let version = text(FRESH_VERSION)?
            .map(|version| {
                version.parse::<u64>().map_err(|_| {
                    bad(format!(
                        "{FRESH_VERSION} must be a version (1, 2, ...), not `{version}`"
                    ))
                })
            })
            .transpose()?;
        if request.is_none() && version.is_none() {
            return Ok(None);
        }
        let wait = match text(FRESH_WAIT)? {
            None => DEFAULT_WAIT,
            Some(ms) => {
                let ms: u64 = ms
                    .parse()
                    .map_err(|_| bad(format!("{FRESH_WAIT} must be milliseconds, not `{ms}`")))?;
                Duration::from_millis(ms).min(MAX_WAIT)
            }
        };
        Ok(Some(Self {
            request,
            version,
            wait,
        }))
    }
}

fn bad(message: String) -> Refusal {
    (StatusCode::BAD_REQUEST, "BadRequest", message)
}

/// What a fresh read found when its wait ran out, for the `ViewNotFresh` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Behind {
    /// The version the view had folded in (0: no row yet).
    pub(crate) version: u64,
    /// The version the reader asked for; `None` when the request was not appended yet.
    pub(crate) wanted: Option<u64>,
}

/// Reads with `read` (the view's row and the version it folded in) until the row includes
/// what `freshness` names, or its wait runs out. `Ok(row)` is fresh enough; `Err(Ok(behind))`
/// says how far behind the view still is; `Err(Err(response))` is the read's own failure, or
/// the request log's (made by `error`).
pub(crate) async fn read_fresh<T, Read, Fut>(
    events: &Arc<dyn EventStore>,
    aggregate: &AggregateId,
    freshness: &Freshness,
    error: fn(StatusCode, &'static str, String) -> Response,
    mut read: Read,
) -> Result<Option<(T, u64)>, Result<Behind, Response>>
where
    Read: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<(T, u64)>, Response>>,
{
    let deadline = tokio::time::Instant::now() + freshness.wait;
    let mut appended = None;
    let mut pause = Duration::from_millis(5);
    loop {
        if let (Some(request), None) = (&freshness.request, appended) {
            appended = appended_at(events, aggregate, request, error)
                .await
                .map_err(Err)?;
        }
        // The version the row must reach; unknown while the named request is not appended.
        let wanted = match (&freshness.request, appended) {
            (Some(_), None) => None,
            (_, at) => Some(at.unwrap_or(0).max(freshness.version.unwrap_or(0))),
        };
        let row = read().await.map_err(Err)?;
        let version = row.as_ref().map_or(0, |(_, version)| *version);
        if wanted.is_some_and(|wanted| version >= wanted) {
            return Ok(row);
        }
        if tokio::time::Instant::now() + pause > deadline {
            return Err(Ok(Behind { version, wanted }));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LOOK_EVERY);
    }
}

/// The version at which `request` was appended to `aggregate`, if it was.
async fn appended_at(
    events: &Arc<dyn EventStore>,
    aggregate: &AggregateId,
    request: &str,
    error: fn(StatusCode, &'static str, String) -> Response,
) -> Result<Option<u64>, Response> {
    match events.find_request(aggregate, request).await {
        Ok(found) => Ok(found.map(|record| record.version)),
        Err(failure) => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            format!("the request log cannot be read: {failure}"),
        )),
    }
}
