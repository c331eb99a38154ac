//! `wow view`: reads a view's row of a running service, at least as fresh as an append when
//! asked (SPEC DS-6).

use std::time::Duration;

use serde_json::json;
use wow_client::{Fresh, ViewRead};

use crate::output::out;
use crate::remote::Remote;
use crate::tend::TendError;

/// The exit code of a read whose wait ran out before the view included the append.
pub(crate) const NOT_FRESH: u8 = 6;

/// What `wow view`'s exit codes say.
pub(crate) const VIEW_EXIT_CODES: &str = "\
Exit codes:
  0  the row, printed as JSON (it includes the append asked for, if one was).
  6  not fresh yet: the wait ran out before the view included the append asked for; the
     view's version and the one wanted are printed. Read again later.
  1  no such row, or the service refused the read.";

/// The append a read asks for: a request id's, or a version's.
#[derive(Debug, Clone)]
pub(crate) struct FreshArgs {
    pub(crate) request: Option<String>,
    pub(crate) version: Option<u64>,
    pub(crate) wait: Duration,
}

/// `wow view AGGREGATE ID VIEW`: prints the row as JSON; with a freshness condition, once the
/// row includes it, or `NOT_FRESH` with how far behind the view is.
pub(crate) async fn view(
    remote: &Remote,
    (aggregate, id, view): (&str, &str, &str),
    fresh: FreshArgs,
) -> Result<u8, TendError> {
    let condition = match (fresh.request, fresh.version) {
        (Some(request), _) => Some(Fresh::Request(request)),
        (None, Some(version)) => Some(Fresh::Version(version)),
        (None, None) => None,
    };
    let read = remote
        .client()?
        .read_view(
            (aggregate, id, view),
            remote.tenant.as_deref(),
            condition.as_ref().map(|condition| (condition, fresh.wait)),
        )
        .await;
    match read {
        ViewRead::Row { version, state } => {
            out!(
                "{:#}",
                json!({"aggregateId": id, "version": version, "state": state})
            );
            Ok(0)
        }
        ViewRead::NotFresh { version, wanted } => {
            out!(
                "{:#}",
                json!({"status": "NOT_FRESH", "version": version, "wanted": wanted})
            );
            Ok(NOT_FRESH)
        }
        ViewRead::NotFound => Err(TendError::BadInput(format!(
            "view {view} holds no row for {aggregate} `{id}`"
        ))),
        ViewRead::Failed(reason) => Err(TendError::BadInput(reason)),
        other => Err(TendError::BadInput(format!("{other:?}"))),
    }
}
