//! `wow migrate`: bring a store's schema to this build's version, or say what that would do;
//! with `--claim-keys`, then claim the unique keys the examples' aggregates declare.

use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};
use wow_core::aggregate::{AggregateRegistry, AggregateRuntime};
use wow_core::eventsourcing::SchemaStatus;
use wow_core::Stores;
use wow_postgres::{PostgresOptions, PostgresStore};
use wow_runtime::eventsourcing::{claim_declared_keys, KeyBackfillProgress};
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

/// `wow migrate [--dry-run | --claim-keys]`: prints the schema version found, this build's,
/// and each pending migration; without `--dry-run` applies them (as `wow serve` would on
/// start: in one transaction, locked against another process migrating the same database,
/// with the upgrade of stores written by earlier builds) and says the version reached. With
/// `--claim-keys` it then claims the keys every aggregate declares ([`claim_keys`]).
pub(crate) async fn run(
    store: Option<String>,
    config: Option<PathBuf>,
    dry_run: bool,
    claim_keys: bool,
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
    let stores = open_store(url).await?;
    let after = status(url).await?;
    out!(
        "migrated: schema version {} ({} applied)",
        after.found,
        after.found.saturating_sub(before.found)
    );
    if claim_keys {
        self::claim_keys(&stores).await?;
    }
    Ok(())
}

/// Every aggregate type `wow serve` runs (the bank's and the shop's): those that declare
/// unique keys are the ones `--claim-keys` folds.
fn example_aggregates() -> Result<AggregateRegistry, ServeError> {
    let mut registry = AggregateRegistry::new();
    let refused =
        |error: wow_core::aggregate::RegistrationError| ServeError::ClaimKeys(error.to_string());
    registry
        .register::<wow_example_bank::account::Account>()
        .map_err(refused)?;
    registry
        .register::<wow_example_bank::audit::Audit>()
        .map_err(refused)?;
    registry
        .register::<wow_example_shop::product::Product>()
        .map_err(refused)?;
    registry
        .register::<wow_example_shop::order::Order>()
        .map_err(refused)?;
    Ok(registry)
}

/// `--claim-keys`: folds each aggregate of the example types that declare keys and claims its
/// keys (SPEC DM-1) with a progress bar per type, then prints what it claimed and one line per
/// value another aggregate holds. Conflicts do not stop it, and leave both aggregates as they
/// were; a second run claims nothing.
async fn claim_keys(stores: &Stores) -> Result<(), ServeError> {
    let registry = example_aggregates()?;
    let runtimes: Vec<&dyn AggregateRuntime> = registry.iter().map(|r| r.as_ref()).collect();
    let style =
        ProgressStyle::with_template("{prefix:>16} [{bar:40}] {pos}/{len} aggregates {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
    let bar: std::sync::Mutex<Option<(String, ProgressBar)>> = std::sync::Mutex::new(None);
    let progress = |step: &KeyBackfillProgress| {
        let mut bar = bar.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let name = step.aggregate.to_string();
        if bar.as_ref().is_none_or(|(shown, _)| *shown != name) {
            if let Some((_, done)) = bar.take() {
                done.finish();
            }
            let next = ProgressBar::new(step.aggregates_total)
                .with_style(style.clone())
                .with_prefix(name.clone());
            *bar = Some((name, next));
        }
        if let Some((_, current)) = &*bar {
            current.set_position(step.aggregates_done);
            current.set_message(format!(
                "{} keys claimed, {} conflicts",
                step.claimed, step.conflicts
            ));
        }
    };
    let outcome = claim_declared_keys(
        &runtimes,
        stores.events.as_ref(),
        Some(stores.snapshots.as_ref()),
        &progress,
    )
    .await;
    if let Some((_, done)) = bar
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take()
    {
        done.finish();
    }
    let done = outcome.map_err(|error| ServeError::ClaimKeys(error.to_string()))?;
    out!(
        "claimed keys: {} aggregates folded, {} keys claimed, {} held already, {} conflicts",
        done.aggregates,
        done.claimed,
        done.held,
        done.conflicts.len()
    );
    for conflict in &done.conflicts {
        out!(
            "conflict: {} in tenant {}: {} declares it, {} holds it",
            conflict.key,
            conflict.claimant.tenant_id,
            conflict.claimant,
            conflict.holder
        );
    }
    Ok(())
}
