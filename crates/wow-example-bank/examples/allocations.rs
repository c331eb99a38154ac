//! Allocations per command through the whole HTTP API, counted rather than timed: the bank on
//! the in-memory store, `N` deposits sent one after another through the router (as `wow
//! serve` routes them) at a wait stage, every allocation of the process counted (the
//! consumers' included). A count does not move with the machine's noise, so a change to the
//! request path can be compared by it exactly.
//!
//! `cargo run --release -p wow-example-bank --features service --example allocations -- [N] [STAGE]`
//! (`DHAT_FILE=out.json` also writes each allocation site's counts, for dhat's viewer).

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;

#[global_allocator]
static COUNTING: dhat::Alloc = dhat::Alloc;

/// Allocation calls and bytes allocated so far, by the whole process.
fn allocated() -> (u64, u64) {
    let stats = dhat::HeapStats::get();
    (stats.total_blocks, stats.total_bytes)
}

fn deposit(account: usize, stage: &str) -> Request<Body> {
    Request::post(format!("/account/a{account}/deposit"))
        .header("content-type", "application/json")
        .header("command-wait-stage", stage)
        .header("command-request-id", uuid::Uuid::now_v7().to_string())
        .body(Body::from(r#"{"amount":1}"#))
        .unwrap_or_default()
}

fn open(account: usize) -> Request<Body> {
    Request::post("/account/open")
        .header("content-type", "application/json")
        .header("command-aggregate-id", format!("a{account}"))
        .header("command-wait-stage", "PROCESSED")
        .body(Body::from(r#"{"name":"Ann","balance":0}"#))
        .unwrap_or_default()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().map_or(Ok(20_000), |n| n.parse())?;
    let stage = args.next().unwrap_or_else(|| "PROCESSED".to_owned());
    // With `DHAT_FILE` set, also writes where each allocation was made (dhat's viewer reads it).
    let _profiler = match std::env::var("DHAT_FILE") {
        Ok(file) => dhat::Profiler::builder().file_name(file).build(),
        Err(_) => dhat::Profiler::builder().testing().build(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let service = wow_example_bank::service::service()
            .store("memory://")
            .build()
            .await?;
        let router = service.router();
        for account in 0..1_000 {
            let answer = router.clone().oneshot(open(account)).await?;
            if !answer.status().is_success() {
                return Err(format!("open answered {}", answer.status()).into());
            }
        }
        // Warm up: the first deposit of each account loads and caches it.
        for n in 0..2_000 {
            router.clone().oneshot(deposit(n % 1_000, &stage)).await?;
        }
        let (calls, bytes) = allocated();
        for n in 0..count {
            let answer = router.clone().oneshot(deposit(n % 1_000, &stage)).await?;
            if !answer.status().is_success() {
                return Err(format!("a deposit answered {}", answer.status()).into());
            }
            drop(axum::body::to_bytes(answer.into_body(), 1 << 20).await?);
        }
        let (calls_after, bytes_after) = allocated();
        let (calls, bytes) = (calls_after - calls, bytes_after - bytes);
        println!(
            "{count} deposits at {stage}: {:.1} allocations and {:.0} bytes per command",
            calls as f64 / count as f64,
            bytes as f64 / count as f64
        );
        service.stop().await;
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
