//! `wow serve`: open the store, start the bank, serve HTTP, stop gracefully.

use crate::output::out;
use std::io::Write;
use std::path::PathBuf;

use axum::Router;
use wow_core::Stores;
use wow_example_bank::Bank;
use wow_http::{HttpConfig, HttpState};
use wow_postgres::{PostgresOptions, PostgresStore};
use wow_sqlite::{SqliteOptions, SqliteStore};

use crate::config::{ConfigError, ServeConfig};
use crate::legacy::{self, Database, LegacyError};

/// Why `wow serve` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("unsupported store URL `{0}`: use sqlite://PATH, postgres://... or memory://")]
    Store(String),
    #[error("cannot open the store: {0}")]
    Open(#[from] wow_sqlite::OpenError),
    #[error("cannot open the store: {0}")]
    OpenPostgres(#[from] wow_postgres::OpenError),
    #[error("cannot upgrade the store of an earlier build: {0}")]
    Legacy(#[from] LegacyError),
    #[error("cannot start the bank: {0}")]
    Bank(#[from] wow_example_bank::BankError),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: String,
        source: std::io::Error,
    },
    #[error("the server failed: {0}")]
    Serve(std::io::Error),
}

/// Opens the store at `url` (`memory://`, `sqlite:...` or `postgres://...`): one value for
/// every store contract, all in one database. A SQLite or PostgreSQL store written by an
/// earlier build is upgraded first ([`legacy::upgrade`]), so the bank starts on today's shape.
pub(crate) async fn open_store(url: &str) -> Result<Stores, ServeError> {
    if url == "memory://" || url == "memory:" {
        return Ok(Stores::in_memory());
    }
    if url.starts_with("sqlite:") {
        let store = SqliteStore::open(url.parse::<SqliteOptions>()?).await?;
        let stores = Stores::of(store.clone());
        legacy::upgrade(Database::Sqlite(&store), &stores).await?;
        return Ok(stores);
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let store = PostgresStore::open(url.parse::<PostgresOptions>()?).await?;
        let stores = Stores::of(store.clone());
        legacy::upgrade(Database::Postgres(&store), &stores).await?;
        return Ok(stores);
    }
    Err(ServeError::Store(url.to_owned()))
}

/// The bank's own read route: `GET /account/{id}/view`, in the caller's tenant (found as for
/// every other route: another tenant's account of the same id is not found, SPEC TN-1).
fn bank_routes(bank: &Bank, http: &HttpConfig) -> Router {
    use axum::extract::Path;
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    fn error(status: StatusCode, code: &'static str, message: String) -> Response {
        (
            status,
            [(wow_http::ERROR_CODE_HEADER, code)],
            axum::Json(serde_json::json!({"errorCode": code, "errorMsg": message})),
        )
            .into_response()
    }
    let balances = bank.balances.clone();
    let named = bank
        .pipeline
        .gateway
        .registry()
        .get("account")
        .map(|r| r.named_aggregate().clone());
    let http = http.clone();
    Router::new().route(
        "/account/{id}/view",
        get(move |Path(id): Path<String>, headers: HeaderMap| {
            let (balances, named, http) = (balances.clone(), named.clone(), http.clone());
            async move {
                let tenant = match wow_http::caller_tenant(&http, &headers) {
                    Ok(tenant) => tenant,
                    Err(refused) => return refused.into_response(),
                };
                if let Err(rule) = wow_core::check_aggregate_id(&id) {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "IllegalArgument",
                        format!("id {rule}"),
                    );
                }
                let Some(named) = named else {
                    return error(
                        StatusCode::NOT_FOUND,
                        "NotFound",
                        "no aggregate named account".to_owned(),
                    );
                };
                match balances
                    .view(&named.aggregate_id(id.clone(), tenant.0))
                    .await
                {
                    Ok(Some(view)) => axum::Json(view).into_response(),
                    Ok(None) => error(
                        StatusCode::NOT_FOUND,
                        "NotFound",
                        format!("no account {id} in the read model"),
                    ),
                    Err(failure) => error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "ServiceUnavailable",
                        failure.to_string(),
                    ),
                }
            }
        }),
    )
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "no SIGTERM handler");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight commands");
}

/// Runs the service until SIGINT or SIGTERM.
pub(crate) async fn run(
    listen: Option<String>,
    store: Option<String>,
    config: Option<PathBuf>,
) -> Result<(), ServeError> {
    let settings = ServeConfig::resolve(listen, store, config.as_deref())?;
    let stores = open_store(&settings.store).await?;
    let snapshots = stores.snapshots.clone();
    let bank = Bank::start_with(stores, settings.bank_options()).await?;
    let http = HttpConfig {
        body_limit: settings.body_limit,
        default_wait_timeout: settings.wait_timeout,
        auth_tokens: settings.auth_tokens.clone(),
        ..HttpConfig::default()
    };
    let app = wow_http::router(
        HttpState::new(&bank.pipeline, Some(snapshots), http.clone())
            .with_openapi_paths(wow_example_bank::api::openapi_paths()),
    )
    .merge(bank_routes(&bank, &http));
    let app = wow_http::error_fallbacks(app, bank.pipeline.gateway.registry());
    let listener = tokio::net::TcpListener::bind(&settings.listen)
        .await
        .map_err(|source| ServeError::Listen {
            address: settings.listen.clone(),
            source,
        })?;
    let address = listener.local_addr().map_err(ServeError::Serve)?;
    tracing::info!(%address, store = %settings.store, "wow serve is up");
    out!("listening on {address}");
    let _ = std::io::stdout().flush();
    // Stops accepting on the signal, then lets the requests taken finish (the shutdown
    // grace bounds the wait); see wow_http::serve.
    wow_http::serve(listener, app, settings.server_limits, shutdown_signal())
        .await
        .map_err(ServeError::Serve)?;
    bank.flush().await;
    drop(bank);
    tracing::info!("stopped");
    Ok(())
}
