//! `wow`: the wow-rs command line. `wow serve` runs the `bank` example over HTTP on the
//! embedded store:
//!
//! ```sh
//! cargo run -p wow-cli -- serve            # sqlite://./data/wow.db on 127.0.0.1:8080
//! cargo run -p wow-cli -- serve --store memory:// --listen 127.0.0.1:9000
//! cargo run -p wow-cli -- catch-up         # consumers read the history they missed
//! cargo run -p wow-cli -- compensation list --status FAILED
//! cargo run -p wow-cli -- compensation retry 0190...
//! ```

mod config;
mod serve;
mod tend;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The service allocates per command; mimalloc keeps that cheap under concurrency.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The wow-rs command line.
#[derive(Debug, Parser)]
#[command(
    name = "wow",
    version,
    about = "Event-sourced commands that are safe to retry"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the `bank` example over HTTP.
    Serve {
        /// Where to listen [default: 127.0.0.1:8080].
        #[arg(long, env = "WOW_LISTEN")]
        listen: Option<String>,
        /// The store: sqlite://PATH, postgres://... or memory:// [default: sqlite://./data/wow.db].
        #[arg(long, env = "WOW_STORE")]
        store: Option<String>,
        /// A TOML file of settings.
        #[arg(long, env = "WOW_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Runs every consumer of the `bank` over the history it has not handled yet, with a
    /// progress bar, and exits.
    CatchUp {
        /// The store: sqlite://PATH, postgres://... [default: sqlite://./data/wow.db].
        #[arg(long, env = "WOW_STORE")]
        store: Option<String>,
        /// Empties this read model (`account_balance` or `notifications`) first, so that it
        /// is rebuilt from the whole history.
        #[arg(long)]
        rebuild: Option<String>,
        /// A TOML file of settings.
        #[arg(long, env = "WOW_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Lists or retries the recorded consumer failures of a running service (event
    /// compensation).
    Compensation {
        #[command(subcommand)]
        action: CompensationAction,
        /// The service's base URL.
        #[arg(
            long,
            env = "WOW_SERVER",
            default_value = "http://127.0.0.1:8080",
            global = true
        )]
        server: String,
        /// A bearer token, when the service requires one.
        #[arg(long, env = "WOW_TOKEN", global = true)]
        token: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum CompensationAction {
    /// Prints the recorded failures.
    List {
        /// Only FAILED, EXHAUSTED or SUCCEEDED records.
        #[arg(long)]
        status: Option<String>,
        /// Only this consumer's records.
        #[arg(long)]
        consumer: Option<String>,
    },
    /// Runs exactly the recorded consumer on exactly the recorded stream again, now.
    Retry {
        /// The record's id.
        id: String,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match cli.command {
        Command::Serve {
            listen,
            store,
            config,
        } => runtime
            .block_on(serve::run(listen, store, config))
            .map_err(|e| e.to_string()),
        Command::CatchUp {
            store,
            config,
            rebuild,
        } => runtime
            .block_on(tend::catch_up(store, config, rebuild))
            .map_err(|e| e.to_string()),
        Command::Compensation {
            action,
            server,
            token,
        } => runtime
            .block_on(async {
                match action {
                    CompensationAction::List { status, consumer } => {
                        tend::list(&server, status, consumer, token).await
                    }
                    CompensationAction::Retry { id } => tend::retry(&server, &id, token).await,
                }
            })
            .map_err(|e| e.to_string()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
