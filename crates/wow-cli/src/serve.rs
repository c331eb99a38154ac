//! `wow serve`: open the store (upgrading an earlier build's), then serve the bank through
//! the library's service builder, which stops gracefully on SIGINT or SIGTERM.

use std::path::PathBuf;

use wow_core::Stores;
use wow_postgres::{PostgresOptions, PostgresStore};
use wow_service::{Role, ServiceError, Settings, SettingsError};
use wow_sqlite::{SqliteOptions, SqliteStore};

use crate::legacy::{self, Database, LegacyError};

/// Why `wow serve` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    #[error(transparent)]
    Config(#[from] SettingsError),
    #[error("unsupported store URL `{0}`: use sqlite://PATH, postgres://... or memory://")]
    Store(String),
    #[error("cannot open the store: {0}")]
    Open(#[from] wow_sqlite::OpenError),
    #[error("cannot open the store: {0}")]
    OpenPostgres(#[from] wow_postgres::OpenError),
    #[error("cannot upgrade the store of an earlier build: {0}")]
    Legacy(#[from] LegacyError),
    #[error(transparent)]
    Service(Box<ServiceError>),
    #[error("cannot claim the declared keys: {0}")]
    ClaimKeys(String),
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
        let stores = Stores::of(store.clone()).with_health(std::sync::Arc::new(store.clone()));
        legacy::upgrade(Database::Postgres(&store), &stores).await?;
        return Ok(stores);
    }
    Err(ServeError::Store(url.to_owned()))
}

/// The example domain `wow serve` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Example {
    /// The bank of docs/http-api.md.
    Bank,
    /// The shop: products with unique SKUs.
    Shop,
    /// The booking service: rooms, customers, bookings that read both, a saga and a view
    /// over several types.
    Booking,
}

/// Runs `example` until SIGINT or SIGTERM: the settings from the flags, `WOW_*` and the TOML
/// file, the store opened (and upgraded from an earlier build), then the example's service as
/// `wow_example_bank::service` (or the shop's or booking's `service`) assembles it on the
/// library's builder.
pub(crate) async fn run(
    listen: Option<String>,
    store: Option<String>,
    config: Option<PathBuf>,
    role: Option<Role>,
    example: Example,
) -> Result<(), ServeError> {
    let mut settings = Settings::resolve(listen, store, config.as_deref())?;
    if let Some(role) = role {
        settings = settings.with_role(role)?;
    }
    let stores = open_store(settings.store_url(None)).await?;
    let service = match example {
        Example::Bank => wow_example_bank::service::service(),
        Example::Shop => wow_example_shop::service::service(),
        Example::Booking => wow_example_booking::service::service(),
    };
    service
        .stores(stores)
        .settings(settings)
        .serve()
        .await
        .map_err(|error| ServeError::Service(Box::new(error)))?;
    Ok(())
}
