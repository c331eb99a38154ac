//! `wow migrate`: bring a store's schema to this build's version, or say what that would do.

use std::path::PathBuf;

use wow_core::eventsourcing::SchemaStatus;
use wow_postgres::{PostgresOptions, PostgresStore};
use wow_service::Settings;
use wow_sqlite::{SqliteOptions, SqliteStore};

use crate::output::out;
use crate::serve::{open_store, ServeError};

/// Where the store at `url` stands, read without changing anything.
async fn status(url: &str) -> Result<SchemaStatus, ServeError> {
    if url.starts_with("sqlite:") {
        return Ok(SqliteStore::schema_status(url.parse::<SqliteOptions>()?).await?);
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(PostgresStore::schema_status(url.parse::<PostgresOptions>()?).await?);
    }
    Err(ServeError::Store(url.to_owned()))
}

/// `wow migrate [--dry-run]`: prints the schema version found, this build's, and each pending
/// migration; without `--dry-run` applies them (as `wow serve` would on start: in one
/// transaction, locked against another process migrating the same database, with the upgrade
/// of stores written by earlier builds) and says the version reached.
pub(crate) async fn run(
    store: Option<String>,
    config: Option<PathBuf>,
    dry_run: bool,
) -> Result<(), ServeError> {
    let settings = Settings::resolve(None, store, config.as_deref())?;
    let url = settings.store_url(None);
    let before = status(url).await?;
    out!(
        "{url}: schema version {} (this build: {})",
        before.found,
        before.latest
    );
    for pending in &before.pending {
        out!("pending {}: {}", pending.version, pending.summary);
    }
    if before.is_too_new() {
        out!("the store was written by a newer build; this one cannot open it");
        return Ok(());
    }
    if dry_run {
        out!("dry run: nothing applied");
        return Ok(());
    }
    open_store(url).await?;
    let after = status(url).await?;
    out!(
        "migrated: schema version {} ({} applied)",
        after.found,
        after.found.saturating_sub(before.found)
    );
    Ok(())
}
