//! Reads at least as fresh as an append (SPEC DS-6): a reader names the append its answer must
//! include, by request id (`Wow-Fresh-Request`) or by aggregate version (`Wow-Fresh-Version`),
//! and is answered once the view has folded it in, or after a bounded wait
//! (`Wow-Fresh-Wait`, milliseconds) with `408 ViewNotFresh` (as a command's wait that runs
//! out) and how far behind the view is: never silently stale data. A read of several rows (a
//! list, a query) names the aggregate whose append it must include with
//! `Wow-Fresh-Aggregate`.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use wow_core::eventsourcing::EventStore;
use wow_core::AggregateId;

/// Names the request id whose append the answer must include.
pub const FRESH_REQUEST: &str = "Wow-Fresh-Request";
/// Names the aggregate version the answer must include (a command's `aggregateVersion`).
pub const FRESH_VERSION: &str = "Wow-Fresh-Version";
/// Names the aggregate whose append a read of several rows must include: its id (of the
/// read's aggregate type), or `{aggregate}/{id}` where the read spans several types.
pub const FRESH_AGGREGATE: &str = "Wow-Fresh-Aggregate";
/// How long to wait for the view, in milliseconds (default [`DEFAULT_WAIT`], at most
/// [`MAX_WAIT`]).
pub const FRESH_WAIT: &str = "Wow-Fresh-Wait";
/// How long a fresh read waits when the reader does not say.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(3);
/// The longest wait a reader may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(5);
/// How often a waiting read looks again, at most.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// A reader's freshness condition, and how long it waits for it: the row must include the
/// append of `request` and version `version` of the read aggregate (each when named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freshness {
    /// The request id whose append the answer must include.
    pub request: Option<String>,
    /// The aggregate version the answer must include.
    pub version: Option<u64>,
    /// The aggregate named by `Wow-Fresh-Aggregate` (as written), for reads of several rows.
    pub aggregate: Option<String>,
    /// How long the read waits.
    pub wait: Duration,
}

/// Why a freshness condition could not be read: a header that does not parse (400): the
/// status, the error code and the message.
pub type Refusal = (StatusCode, &'static str, String);

impl Freshness {
    /// The condition the request's headers name, if any.
    pub fn of(headers: &HeaderMap) -> Result<Option<Self>, Refusal> {
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
        let aggregate = text(FRESH_AGGREGATE)?.filter(|aggregate| !aggregate.is_empty());
        if request.is_none() && version.is_none() {
            return Ok(None);
        }
        let wait = match text(FRESH_WAIT)? {
            None => DEFAULT_WAIT,
            Some(ms) => {
                let wait = ms
                    .parse::<u64>()
                    .map(Duration::from_millis)
                    .ok()
                    .filter(|wait| *wait <= MAX_WAIT);
                wait.ok_or_else(|| {
                    bad(format!(
                        "{FRESH_WAIT} must be milliseconds, at most {}, not `{ms}`",
                        MAX_WAIT.as_millis()
                    ))
                })?
            }
        };
        Ok(Some(Self {
            request,
            version,
            aggregate,
            wait,
        }))
    }
}

fn bad(message: String) -> Refusal {
    (StatusCode::BAD_REQUEST, "BadRequest", message)
}

/// An error answer as every read gives it: `{errorCode, errorMsg, succeeded: false}` and
/// `Wow-Error-Code`.
pub fn error_answer(status: StatusCode, code: &'static str, message: String) -> Response {
    let mut response = (
        status,
        axum::Json(serde_json::json!({"errorCode": code, "errorMsg": message, "succeeded": false})),
    )
        .into_response();
    response
        .headers_mut()
        .insert(crate::ERROR_CODE_HEADER, HeaderValue::from_static(code));
    response
}

/// What a fresh read found when its wait ran out, for the `ViewNotFresh` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Behind {
    /// The version the view had folded in (0: no row yet).
    pub version: u64,
    /// The version the reader asked for; `None` when the request was not appended yet.
    pub wanted: Option<u64>,
}

/// `408 ViewNotFresh`: the wait ran out before `view` included what was asked for of the
/// aggregate `id`; the body says how far behind it is (`version`, `wanted`, `lag`; `wanted`
/// is null while the request is not appended), and `Retry-After: 1`.
pub fn not_fresh(view: &str, id: &str, behind: &Behind) -> Response {
    let message = match behind.wanted {
        Some(wanted) => format!(
            "view {view} holds version {} of `{id}`, not yet {wanted}",
            behind.version
        ),
        None => format!(
            "the request is not appended to `{id}` yet; view {view} holds version {}",
            behind.version
        ),
    };
    let lag = behind
        .wanted
        .map(|wanted| wanted.saturating_sub(behind.version));
    let mut response = (
        StatusCode::REQUEST_TIMEOUT,
        axum::Json(
            serde_json::json!({"errorCode": "ViewNotFresh", "errorMsg": message,
            "succeeded": false, "version": behind.version, "wanted": behind.wanted, "lag": lag}),
        ),
    )
        .into_response();
    response.headers_mut().insert(
        crate::ERROR_CODE_HEADER,
        HeaderValue::from_static("ViewNotFresh"),
    );
    response.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        HeaderValue::from_static("1"),
    );
    response
}

/// Reads with `read` (the view's row and the version it folded in) until the row includes
/// what `freshness` names, or its wait runs out. `Ok(row)` is fresh enough; `Err(Ok(behind))`
/// says how far behind the view still is; `Err(Err(response))` is the read's own failure, or
/// the request log's (made by `error`).
pub async fn read_fresh<T, Read, Fut>(
    events: &dyn EventStore,
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
    events: &dyn EventStore,
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

/// The freshness headers in `/openapi.json`, as parameters of a read: with
/// `Wow-Fresh-Aggregate` for a read of several rows (`of` says what it names there).
pub fn openapi_parameters(of: Option<&str>) -> Vec<serde_json::Value> {
    use serde_json::json;
    let mut parameters = vec![
        json!({"name": FRESH_REQUEST, "in": "header", "required": false,
            "description": "Answer only once the view includes the append of this request id of the aggregate (SPEC DS-6); with Wow-Fresh-Version, both.",
            "schema": {"type": "string", "minLength": 1}}),
        json!({"name": FRESH_VERSION, "in": "header", "required": false,
            "description": "Answer only once the view includes this version of the aggregate (a command's aggregateVersion); with Wow-Fresh-Request, both.",
            "schema": {"type": "integer", "minimum": 0, "maximum": u64::MAX}}),
        json!({"name": FRESH_WAIT, "in": "header", "required": false,
            "description": "How long to wait for that, in milliseconds (3000 unless said; at most 5000).",
            "schema": {"type": "integer", "minimum": 0, "maximum": 5000}}),
    ];
    if let Some(of) = of {
        parameters.push(json!({"name": FRESH_AGGREGATE, "in": "header", "required": false,
            "description": format!("The aggregate the freshness headers are about: {of}; required with them."),
            "schema": {"type": "string", "minLength": 1}}));
    }
    parameters
}
