//! The operations page (`/ui`) in a real browser: headless Chromium driven by Playwright
//! (`operations_page/page.cjs`, Node with `playwright-core` and the system's Chromium), against
//! the bank served in this process on SQLite with bearer auth (tokens `ta` for tenant-a, `tb`
//! for tenant-b, the operator token `op`) and faults the script turns on and off over HTTP
//! (`operations_page/controls.rs`):
//!
//! - without the operator token the page is not served (401, and 403 to a tenant's token in
//!   `?token=`); opened once as `/ui?token=op`, it loads with the cookie that sets;
//! - a consumer made to fail shows up on the page, with the stream parked behind it (SPEC
//!   DS-5); "Skip" is refused with a tenant's token and records the operator's with the
//!   operator token; after the fault is fixed, "Retry now" turns it to SUCCEEDED and the
//!   parked stream runs; before that, alice's record is marked UNRECOVERABLE (refused with a
//!   tenant's token; the list filters by it), RECOVERABLE again, and given its own retry spec
//!   from the detail's form, each recorded with the operator's fingerprint; the list filters
//!   by aggregate id and shows the total;
//! - a view's rebuild started from the page stops FAILED on a stream it cannot fold, naming
//!   it, while readers keep the rows they had (SPEC DS-6);
//! - the look-up form shows each of its answers: APPENDED, REJECTED, IN_FLIGHT (appends held),
//!   NONE and UNKNOWN (reads failing);
//! - a quarantined aggregate shows with its error, and the live view draws the counters;
//! - tenant-b's token sees none of tenant-a's failures nor its quarantine.
//!
//! The script writes a screenshot of each view to `WOW_UI_SCREENSHOTS` (default
//! `target/ui-screenshots`; `WOW_UI_SCREENSHOTS=docs/ui` renews the ones docs/operations.md shows).
//! Without Chromium, Node or playwright-core (`.ci/run` installs them) the test says so in a
//! `SKIPPED` line on stderr and passes, unless `WOW_REQUIRE_BROWSER=1` (set by `.ci/run` under
//! `CI=true`): then it fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "operations_page/controls.rs"]
mod controls;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use controls::{Controlled, Faults, Ledger};
use wow_core::event::EventConsumer;
use wow_core::eventsourcing::EventStore;
use wow_core::Stores;
use wow_example_bank::account::Account;
use wow_example_bank::projection::AccountBalance;
use wow_example_bank::transfer::TransferSaga;
use wow_service::{Service, Settings};

/// The workspace's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Chromium and the folder holding `node_modules/playwright-core`, or why not.
fn browser() -> Result<(PathBuf, PathBuf), String> {
    let chromium = std::env::var_os("WOW_UI_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if !chromium.exists() {
        return Err(format!("no Chromium at {}", chromium.display()));
    }
    let modules = std::env::var_os("WOW_UI_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/ui-node/node_modules"));
    if !modules.join("playwright-core").exists() {
        return Err(format!("no playwright-core in {}", modules.display()));
    }
    Ok((chromium, modules))
}

/// The bank on SQLite in `folder`, its history behind faults the script turns on and off, with
/// bearer auth (`ta`, `tb`, the operator's `op`) and retries by hand only.
async fn the_bank_with_faults_to_control(folder: &Path) -> wow_service::RunningService {
    let store = wow_sqlite::SqliteStore::open(
        format!("sqlite://{}", folder.join("ui.db").display())
            .parse()
            .unwrap(),
    )
    .await
    .unwrap();
    let faults = Arc::new(Faults::default());
    let mut stores = Stores::of(store);
    let events: Arc<dyn EventStore> = Arc::new(Controlled {
        inner: stores.events.clone(),
        faults: faults.clone(),
    });
    stores.events = events.clone();
    let settings = Settings {
        auth_tokens: HashMap::from([
            ("ta".to_owned(), wow_http::TokenBinding::tenant("tenant-a")),
            ("tb".to_owned(), wow_http::TokenBinding::tenant("tenant-b")),
        ]),
        operator_tokens: HashSet::from(["op".to_owned()]),
        // Retries by hand only: the page's button is the retry.
        retry_every: None,
        wait_timeout: Duration::from_secs(10),
        ..Settings::default()
    };
    let ledger = faults.clone();
    Service::builder()
        .aggregate::<Account>()
        .view::<AccountBalance>()
        .saga(TransferSaga)
        .projection(move |_: &Stores| Arc::new(Ledger(ledger)) as Arc<dyn EventConsumer>)
        .routes(
            move |_| controls::routes(faults.clone(), events.clone()),
            Default::default(),
        )
        .stores(stores)
        .settings(settings)
        .build()
        .await
        .unwrap()
}

/// Where the script writes its screenshots (`WOW_UI_SCREENSHOTS`, under the workspace when
/// relative), created.
fn screenshots_folder() -> PathBuf {
    let screenshots = std::env::var_os("WOW_UI_SCREENSHOTS")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                root().join(dir)
            }
        })
        .unwrap_or_else(|| root().join("target/ui-screenshots"));
    std::fs::create_dir_all(&screenshots).unwrap();
    screenshots
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operations_page_shows_failures_retries_outcomes_quarantine_and_counters() {
    let (chromium, modules) = match browser() {
        Ok(found) => found,
        Err(missing) => {
            wow_tck::skip::unavailable(
                wow_tck::skip::Requirement::Browser,
                &format!("{missing} (`apt-get install chromium` and `npm install --prefix target/ui-node playwright-core@1.64.1`, as .ci/run does under CI=true)"),
            );
            return;
        }
    };

    let folder = tempfile::tempdir().unwrap();
    let service = the_bank_with_faults_to_control(folder.path()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(service.serve_on(listener, async {
        let _ = stopped.await;
    }));

    let screenshots = screenshots_folder();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/operations_page/page.cjs");
    let run = tokio::process::Command::new("node")
        .arg(&script)
        .env("WOW_UI_BASE", &base)
        .env("WOW_UI_CHROMIUM", &chromium)
        .env("NODE_PATH", &modules)
        .env("WOW_UI_SCREENSHOTS", &screenshots)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(240), run)
        .await
        .expect("the browser test finished within four minutes")
        .expect("node runs");
    let _ = stop.send(());
    let _ = served.await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{said}");
    assert!(output.status.success(), "the browser test failed:\n{said}");
}
