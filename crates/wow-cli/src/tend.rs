//! `wow catch-up` and `wow compensation`: tend the bank's consumers by hand.

use crate::output::out;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;
use wow_core::Stores;
use wow_example_bank::READ_MODELS;
use wow_runtime::view::{RebuildProgress, ViewRebuilds};
use wow_service::Settings;

use crate::serve::{open_store, ServeError};

/// Why a tending command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TendError {
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("cannot reach the service at {url}: {source}")]
    Request { url: String, source: reqwest::Error },
    #[error("the service answered {status}: {body}")]
    Refused { status: u16, body: String },
    #[error("cannot rebuild: {0}")]
    Rebuild(String),
    #[error("no view or outbox is named `{name}`; the known ones are: {known}")]
    UnknownReadModel { name: String, known: String },
    #[error("cannot make an HTTP client: {0}")]
    Client(String),
    #[error("{0}")]
    BadInput(String),
}

/// `wow catch-up`: opens the store, runs every consumer over the history it has not handled
/// yet with a progress bar per consumer, prints what each did, and exits. With `rebuild`
/// naming a view, then rebuilds it beside the live one (see [`rebuild_view`]); naming an
/// outbox, empties it first (see [`empty_outbox`]) so that the catch-up refills it.
pub(crate) async fn catch_up(
    store: Option<String>,
    config: Option<PathBuf>,
    rebuild: Option<String>,
) -> Result<(), TendError> {
    let settings = Settings::resolve(None, store, config.as_deref()).map_err(ServeError::from)?;
    let stores = open_store(settings.store_url(None)).await?;
    let view = match rebuild {
        Some(name) if VIEWS.contains(&name.as_str()) => Some(name),
        Some(name) => {
            empty_outbox(&stores, &name).await?;
            out!("{name}: emptied; rebuilding from history");
            None
        }
        None => None,
    };
    let bars: Arc<Mutex<Option<(String, ProgressBar)>>> = Arc::default();
    let shown = bars.clone();
    let progress = move |consumer: &str, step: &wow_runtime::event::CatchUpProgress| {
        let mut bar = shown
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if bar.as_ref().is_none_or(|(name, _)| name != consumer) {
            if let Some((_, done)) = bar.take() {
                done.finish();
            }
            let next = ProgressBar::new(step.aggregates_total)
                .with_style(bar_style(
                    "{prefix:>16} [{bar:40}] {pos}/{len} aggregates {msg}",
                ))
                .with_prefix(consumer.to_owned());
            *bar = Some((consumer.to_owned(), next));
        }
        if let Some((_, current)) = &*bar {
            current.set_position(step.aggregates_done);
            current.set_message(format!(
                "{} streams, {} failed",
                step.streams_handled, step.aggregates_failed
            ));
        }
    };
    let mut settings = settings;
    settings.retry_every = None;
    let bank = wow_example_bank::service::service()
        .stores(stores)
        .settings(settings)
        .on_catch_up(progress)
        .build()
        .await
        .map_err(|error| ServeError::Service(Box::new(error)))?;
    if let Some((_, done)) = bars
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take()
    {
        done.finish();
    }
    for (consumer, done) in bank.caught_up() {
        out!(
            "{consumer}: {} streams handled over {} aggregates, {} aggregates stopped on a failure",
            done.streams_handled,
            done.aggregates_done,
            done.aggregates_failed
        );
    }
    let rebuilt = match view {
        Some(view) => rebuild_view(bank.rebuilds(), &view).await,
        None => Ok(()),
    };
    bank.stop().await;
    rebuilt
}

/// The bank's views: a rebuild fills a new generation beside the one readers read.
const VIEWS: [&str; 1] = [wow_example_bank::projection::NAME];

fn bar_style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// Rebuilds `view` beside the live one (a service serving the same store goes on answering
/// its readers from the old rows until the new ones have caught up), with a progress bar
/// and the time left, and prints how it went.
async fn rebuild_view(rebuilds: &ViewRebuilds, view: &str) -> Result<(), TendError> {
    let bar = ProgressBar::new(0).with_style(bar_style(
        "{prefix:>16} [{bar:40}] {pos}/{len} aggregates {msg}",
    ));
    bar.set_prefix(view.to_owned());
    let mut show = |step: &RebuildProgress| {
        bar.set_length(step.aggregates_total);
        bar.set_position(step.aggregates_done);
        let eta = step.eta_ms.map_or_else(String::new, |eta| {
            format!(", {:.1}s left", eta as f64 / 1000.0)
        });
        bar.set_message(format!(
            "generation {}: {:?}, {} streams{eta}",
            step.generation, step.state, step.streams
        ));
    };
    let done = rebuilds
        .run(view, &mut show)
        .await
        .map_err(|error| TendError::Rebuild(error.to_string()))?;
    bar.finish();
    out!(
        "{view}: rebuilt into generation {} ({} streams over {} aggregates in {:.1}s); readers read it now",
        done.generation,
        done.streams,
        done.aggregates_done,
        done.elapsed_ms as f64 / 1000.0
    );
    Ok(())
}

/// Empties the outbox `name` of the bank: its rows and processed-message records in the view
/// store, and its positions, so that the next catch-up refills it from the whole history.
/// Its rows come back with the same ids, so the rows it sent before are not sent again.
/// Fails on a name the bank does not have, listing the ones it has.
async fn empty_outbox(stores: &Stores, name: &str) -> Result<(), TendError> {
    if !READ_MODELS.contains(&name) {
        return Err(TendError::UnknownReadModel {
            name: name.to_owned(),
            known: READ_MODELS.join(", "),
        });
    }
    stores
        .views
        .clear(name)
        .await
        .map_err(|error| TendError::Rebuild(error.to_string()))?;
    stores
        .positions
        .reset(name)
        .await
        .map_err(|error| TendError::Rebuild(error.to_string()))
}

pub(crate) fn client() -> Result<reqwest::Client, TendError> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|error| TendError::Client(error.to_string()))
}

pub(crate) async fn answer(
    url: &str,
    request: reqwest::RequestBuilder,
    token: Option<&str>,
) -> Result<Value, TendError> {
    answer_with_total(url, request, token)
        .await
        .map(|(body, _)| body)
}

/// [`answer`], with the `Wow-Total` header's count when the answer has one.
async fn answer_with_total(
    url: &str,
    request: reqwest::RequestBuilder,
    token: Option<&str>,
) -> Result<(Value, Option<u64>), TendError> {
    let request = match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    };
    let response = request.send().await.map_err(|source| TendError::Request {
        url: url.to_owned(),
        source,
    })?;
    let status = response.status();
    let total = response
        .headers()
        .get("Wow-Total")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok());
    let body = response.text().await.map_err(|source| TendError::Request {
        url: url.to_owned(),
        source,
    })?;
    if !status.is_success() {
        return Err(TendError::Refused {
            status: status.as_u16(),
            body,
        });
    }
    let body = serde_json::from_str(&body).map_err(|_| TendError::Refused {
        status: status.as_u16(),
        body,
    })?;
    Ok((body, total))
}

/// Which recorded failures `wow compensation list` prints: each filter given narrows them.
#[derive(Debug, Default)]
pub(crate) struct FailureFilter {
    pub(crate) status: Option<String>,
    pub(crate) consumer: Option<String>,
    pub(crate) aggregate: Option<String>,
    pub(crate) aggregate_id: Option<String>,
    pub(crate) recoverable: Option<String>,
}

/// `wow compensation list`: prints the recorded failures, one per line.
pub(crate) async fn list(
    server: &str,
    filter: FailureFilter,
    token: Option<String>,
) -> Result<(), TendError> {
    let url = format!("{}/compensation/failures", server.trim_end_matches('/'));
    let mut query = vec![("limit", "1000".to_owned())];
    query.extend(filter.status.map(|s| ("status", s)));
    query.extend(filter.consumer.map(|c| ("consumer", c)));
    query.extend(filter.aggregate.map(|a| ("aggregate", a)));
    query.extend(filter.aggregate_id.map(|a| ("aggregateId", a)));
    query.extend(filter.recoverable.map(|r| ("recoverable", r)));
    let request = client()?.get(&url).query(&query);
    let (records, total) = answer_with_total(&url, request, token.as_deref()).await?;
    let records = records.as_array().cloned().unwrap_or_default();
    out!(
        "{:<38} {:<10} {:<18} {:<40} {:>4} {:>8}  error",
        "id",
        "status",
        "consumer",
        "aggregate",
        "v",
        "attempts"
    );
    for record in &records {
        out!(
            "{:<38} {:<10} {:<18} {:<40} {:>4} {:>8}  {}: {}",
            text(&record["id"]),
            text(&record["status"]),
            text(&record["consumer"]),
            format!(
                "{}/{}",
                text(&record["aggregateId"]["aggregateName"]),
                text(&record["aggregateId"]["aggregateId"])
            ),
            record["version"],
            record["attempts"],
            text(&record["errorCode"]),
            text(&record["errorMessage"]),
        );
    }
    match total {
        Some(total) if total > u64::try_from(records.len()).unwrap_or(u64::MAX) => {
            out!("{} record(s) of {total}", records.len());
        }
        _ => out!("{} record(s)", records.len()),
    }
    Ok(())
}

/// `wow compensation recoverable|retry-spec ID …`: an operator's edit of one record, `PUT
/// /compensation/failures/{id}/{what}` with `body`; prints the record after it.
pub(crate) async fn edit(
    server: &str,
    id: &str,
    what: &str,
    body: Value,
    token: Option<String>,
) -> Result<(), TendError> {
    let url = format!(
        "{}/compensation/failures/{id}/{what}",
        server.trim_end_matches('/')
    );
    let record = answer(&url, client()?.put(&url).json(&body), token.as_deref()).await?;
    out!(
        "{}: {}, {}, retry spec {}, by {}",
        text(&record["id"]),
        text(&record["status"]),
        text(&record["recoverable"]),
        record["retrySpec"],
        text(&record["updatedBy"])
    );
    Ok(())
}

/// `wow compensation retry ID`: retries one record and prints it after.
pub(crate) async fn retry(server: &str, id: &str, token: Option<String>) -> Result<(), TendError> {
    let url = format!(
        "{}/compensation/failures/{id}/retry",
        server.trim_end_matches('/')
    );
    let record = answer(&url, client()?.post(&url), token.as_deref()).await?;
    out!(
        "{}: {} after {} attempt(s)",
        text(&record["id"]),
        text(&record["status"]),
        record["attempts"]
    );
    Ok(())
}

/// `wow compensation skip ID`: an operator gives up on one recorded failure (SPEC DS-5); the
/// consumer's streams of the aggregate parked behind it run.
pub(crate) async fn skip(server: &str, id: &str, token: Option<String>) -> Result<(), TendError> {
    let url = format!(
        "{}/compensation/failures/{id}/skip",
        server.trim_end_matches('/')
    );
    let record = answer(&url, client()?.post(&url), token.as_deref()).await?;
    out!(
        "{}: {} by {}",
        text(&record["id"]),
        text(&record["status"]),
        text(&record["skippedBy"])
    );
    Ok(())
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}
