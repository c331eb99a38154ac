//! Reading a view's row by aggregate id, and the rows of a view over several aggregate types,
//! at least as fresh as an append when asked (SPEC DS-6).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use crate::path::url;
use crate::WowClient;

/// What a view read must include: the append of a request id of the aggregate, or a version
/// of it (a command's `aggregateVersion`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fresh {
    /// The append of this request id.
    Request(String),
    /// This version of the aggregate.
    Version(u64),
}

/// What a view read came to.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ViewRead {
    /// The row: the last aggregate version folded in, and the view's state.
    Row {
        /// The last aggregate version the row includes.
        version: u64,
        /// The view's state, as JSON.
        state: Value,
    },
    /// The view holds no row for the id in the caller's tenant.
    NotFound,
    /// The wait ran out before the row included what was asked for (`ViewNotFresh`): the row
    /// holds `version`; `wanted` is `None` while the request is not appended.
    NotFresh {
        /// The version the row holds (0: no row yet).
        version: u64,
        /// The version asked for, when known.
        wanted: Option<u64>,
    },
    /// No usable answer: a transport error, a refusal (400, 401, 403) or a 5xx, with what it
    /// said. Nothing is known of the row.
    Failed(String),
}

impl WowClient {
    /// Reads view `view` of aggregate `aggregate`/`id` (`GET /{aggregate}/{id}/view/{view}`),
    /// in `tenant` when auth is off. With `fresh`, the answer includes that append, or is
    /// [`ViewRead::NotFresh`] once `wait` (at most the service's 5 s) runs out: never older
    /// data passed off as current.
    pub async fn read_view(
        &self,
        (aggregate, id, view): (&str, &str, &str),
        tenant: Option<&str>,
        fresh: Option<(&Fresh, Duration)>,
    ) -> ViewRead {
        let url = match url(self.base(), &[aggregate, id, "view", view]) {
            Ok(url) => url,
            Err(error) => return ViewRead::Failed(format!("cannot read it: {error}")),
        };
        let request = with_fresh(self.http().get(url), fresh);
        let response = match self.authorize(request, tenant).send().await {
            Ok(response) => response,
            Err(error) => return ViewRead::Failed(format!("the read failed: {error}")),
        };
        let status = response.status();
        let body: Value = match response.json().await {
            Ok(body) => body,
            Err(error) => {
                return ViewRead::Failed(format!("answer {status} is unreadable: {error}"))
            }
        };
        read(status, body)
    }
}

impl WowClient {
    /// Reads the rows of the view `view` over several aggregate types
    /// (`GET /views/{view}?{filter}`), in `tenant` when auth is off. With `fresh`, the answer
    /// includes that append of the aggregate `{aggregate}/{id}` it names, or is
    /// [`ViewRead::NotFresh`] once `wait` runs out. A page of rows is [`ViewRead::Row`] with
    /// version 0 and the whole answer (`{rows, next}`) as its state.
    pub async fn read_view_rows(
        &self,
        view: &str,
        filter: &[(&str, &str)],
        tenant: Option<&str>,
        fresh: Option<(&Fresh, &str, Duration)>,
    ) -> ViewRead {
        let url = match url(self.base(), &["views", view]) {
            Ok(url) => url,
            Err(error) => return ViewRead::Failed(format!("cannot read it: {error}")),
        };
        let request = self.http().get(url).query(filter);
        let request = match fresh {
            Some((fresh, aggregate, wait)) => {
                with_fresh(request, Some((fresh, wait))).header("Wow-Fresh-Aggregate", aggregate)
            }
            None => request,
        };
        let response = match self.authorize(request, tenant).send().await {
            Ok(response) => response,
            Err(error) => return ViewRead::Failed(format!("the read failed: {error}")),
        };
        let status = response.status();
        match response.json::<Value>().await {
            Ok(body) if status == StatusCode::OK => ViewRead::Row {
                version: 0,
                state: body,
            },
            Ok(body) => read(status, body),
            Err(error) => ViewRead::Failed(format!("answer {status} is unreadable: {error}")),
        }
    }
}

/// `request` with the headers of `fresh`, if any.
fn with_fresh(
    request: reqwest::RequestBuilder,
    fresh: Option<(&Fresh, Duration)>,
) -> reqwest::RequestBuilder {
    let Some((fresh, wait)) = fresh else {
        return request;
    };
    match fresh {
        Fresh::Request(request_id) => request.header("Wow-Fresh-Request", request_id),
        Fresh::Version(version) => request.header("Wow-Fresh-Version", version.to_string()),
    }
    .header(
        "Wow-Fresh-Wait",
        wait.min(Duration::from_secs(5)).as_millis().to_string(),
    )
}

/// What an answer `status` with `body` says of the row.
fn read(status: StatusCode, body: Value) -> ViewRead {
    let number = |field: &str| body[field].as_u64();
    match (status, body["errorCode"].as_str()) {
        (StatusCode::OK, _) => match number("version") {
            Some(version) => ViewRead::Row {
                version,
                state: body["state"].clone(),
            },
            None => ViewRead::Failed(format!("a row without a version: {body}")),
        },
        (StatusCode::NOT_FOUND, _) => ViewRead::NotFound,
        (_, Some("ViewNotFresh")) => ViewRead::NotFresh {
            version: number("version").unwrap_or(0),
            wanted: number("wanted"),
        },
        _ => ViewRead::Failed(format!("{status}: {body}")),
    }
}
