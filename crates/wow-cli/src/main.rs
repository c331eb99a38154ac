//! `wow`: the wow-rs command line. `wow serve` runs the `bank` example over HTTP on the
//! embedded store:
//!
//! ```sh
//! cargo run -p wow-cli -- serve            # sqlite://./data/wow.db on 127.0.0.1:8080
//! cargo run -p wow-cli -- serve --store memory:// --listen 127.0.0.1:9000
//! cargo run -p wow-cli -- catch-up         # consumers read the history they missed
//! cargo run -p wow-cli -- compensation list --status FAILED
//! cargo run -p wow-cli -- compensation retry 0190...
//! cargo run -p wow-cli -- send account alice deposit '{"amount":5}' --request-id dep-1
//! cargo run -p wow-cli -- outcome account alice dep-1   # APPENDED / REJECTED / IN_FLIGHT / NONE / UNKNOWN
//! cargo run -p wow-cli -- events account alice
//! cargo run -p wow-cli --release -- bench --embedded memory:// --duration 10s
//! ```
//!
//! `send` and `outcome` exit 0 when applied, 3 when rejected for good (do not resend), 5
//! when no decision is recorded yet (`IN_FLIGHT`: look again; `NONE`: resending with the
//! same request id is safe) and 4 when the outcome stays unknown (escalate; never resend
//! under a new request id).

mod bench;
mod legacy;
mod migrate;
mod output;
mod remote;
mod serve;
mod tend;
mod view_read;

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
        /// What this process does: monolith (everything here), gateway (HTTP, commands over
        /// NATS) or processor (owns partitions, runs the consumers) [default: monolith, or
        /// WOW_ROLE].
        #[arg(long, value_enum)]
        role: Option<wow_service::Role>,
        /// The example domain to serve: `bank` (accounts, transfers; the contract of
        /// docs/http-api.md) or `shop` (products with unique SKUs).
        #[arg(long, value_enum, env = "WOW_EXAMPLE", default_value_t = serve::Example::Bank)]
        example: serve::Example,
    },
    /// Runs every consumer of the `bank` over the history it has not handled yet, with a
    /// progress bar, and exits.
    CatchUp {
        /// The store: sqlite://PATH, postgres://... [default: sqlite://./data/wow.db].
        #[arg(long, env = "WOW_STORE")]
        store: Option<String>,
        /// Rebuilds this view (`account_balance`) from the whole history beside the live one,
        /// with a progress bar and the time left: a service on the same store answers its
        /// readers from the old rows until the new ones have caught up. Or empties this outbox
        /// (`notifications`) first, so that it is refilled (rows sent before are not sent
        /// again).
        #[arg(long)]
        rebuild: Option<String>,
        /// A TOML file of settings.
        #[arg(long, env = "WOW_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Brings the store's schema to this build's version (what `wow serve` does on start),
    /// or with --dry-run prints the version found and each pending migration, and applies
    /// nothing. Safe when several processes migrate one database at once. With --claim-keys
    /// it then claims the unique keys of aggregates made before their type declared them.
    Migrate {
        /// The store: sqlite://PATH, postgres://... [default: sqlite://./data/wow.db].
        #[arg(long, env = "WOW_STORE")]
        store: Option<String>,
        /// A TOML file of settings.
        #[arg(long, env = "WOW_CONFIG")]
        config: Option<PathBuf>,
        /// Says what would be applied, and applies nothing.
        #[arg(long)]
        dry_run: bool,
        /// Then claims the unique keys the examples' aggregates declare (SPEC DM-1), for
        /// aggregates made before their type declared keys: folds each aggregate, claims
        /// each key that is free, and lists each value another aggregate holds (with both
        /// ids) instead of stopping. Running it again changes nothing.
        #[arg(long, conflicts_with = "dry_run")]
        claim_keys: bool,
    },
    /// Sends one command to a running service the safe way: a stable request id, and a
    /// look-up in history before any resend (SPEC TO-2). Prints the outcome as JSON.
    ///
    /// An answer that is lost, a timeout, a 5xx: the request is looked up. APPENDED ends it
    /// (applied); REJECTED ends it (rejected, final); IN_FLIGHT is looked up again until
    /// --in-flight-wait-ms; NONE is resent with the same request id, up to --attempts.
    #[command(after_help = remote::EXIT_CODES)]
    Send {
        #[command(flatten)]
        args: remote::SendArgs,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// What the service says of a request id (SPEC TO-1), as JSON: APPENDED (version,
    /// command id, the stream), REJECTED (code, message, command id, version), IN_FLIGHT,
    /// NONE, or UNKNOWN. The request id may hold any character (a saga's holds `/`).
    #[command(after_help = remote::EXIT_CODES)]
    Outcome {
        /// The aggregate type.
        aggregate: String,
        /// The aggregate id.
        id: String,
        /// The request id.
        request_id: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// A view's row of an aggregate, as JSON; with --fresh-request or --fresh-version, once
    /// the row includes that append (SPEC DS-6), or NOT_FRESH when --wait runs out.
    #[command(after_help = view_read::VIEW_EXIT_CODES)]
    View {
        /// The aggregate type.
        aggregate: String,
        /// The aggregate id.
        id: String,
        /// The view's name.
        view: String,
        /// Answer only once the row includes the append of this request id.
        #[arg(long)]
        fresh_request: Option<String>,
        /// Answer only once the row includes this version of the aggregate.
        #[arg(long)]
        fresh_version: Option<u64>,
        /// How long the service waits for that, in milliseconds (at most 5000).
        #[arg(long, default_value_t = 3000)]
        wait: u64,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// An aggregate's history: the streams with versions from `head` to `tail`.
    Events {
        /// The aggregate type.
        aggregate: String,
        /// The aggregate id.
        id: String,
        /// The first version.
        #[arg(default_value_t = 1)]
        head: u64,
        /// The last version [default: the latest].
        tail: Option<u64>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Loads a running bank (or one served in this process with --embedded) with one
    /// command over many keep-alive connections, and reports throughput, latency
    /// percentiles, errors by code, the consumers' backlog and the server's memory.
    Bench(bench::BenchArgs),
    /// Lists, retries, skips and judges the recorded consumer failures of a running service
    /// (event compensation).
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

/// Where a remote command talks, and as whom.
#[derive(Debug, clap::Args)]
struct RemoteArgs {
    /// The service's base URL.
    #[arg(long, env = "WOW_SERVER", default_value = "http://127.0.0.1:8080")]
    server: String,
    /// A bearer token, when the service requires one.
    #[arg(long, env = "WOW_TOKEN")]
    token: Option<String>,
    /// The tenant (when the service has no auth).
    #[arg(long, env = "WOW_TENANT")]
    tenant: Option<String>,
}

impl RemoteArgs {
    fn remote(self) -> remote::Remote {
        remote::Remote {
            server: self.server,
            token: self.token,
            tenant: self.tenant,
        }
    }
}

#[derive(Debug, Subcommand)]
enum CompensationAction {
    /// Prints the recorded failures.
    List {
        /// Only FAILED, EXHAUSTED, SUCCEEDED or SKIPPED records.
        #[arg(long)]
        status: Option<String>,
        /// Only this consumer's records.
        #[arg(long)]
        consumer: Option<String>,
        /// Only records of this aggregate type.
        #[arg(long)]
        aggregate: Option<String>,
        /// Only records of the aggregate with this id.
        #[arg(long)]
        aggregate_id: Option<String>,
        /// Only RECOVERABLE, UNRECOVERABLE or UNKNOWN records.
        #[arg(long)]
        recoverable: Option<String>,
    },
    /// Judges whether retrying a record can succeed: RECOVERABLE, UNRECOVERABLE (the
    /// scheduler leaves it alone; `retry` still runs it) or UNKNOWN. An operator's action.
    Recoverable {
        /// The record's id.
        id: String,
        /// RECOVERABLE, UNRECOVERABLE or UNKNOWN.
        recoverable: String,
    },
    /// Gives a record its own retry spec, judged at once (EXHAUSTED when the new limit is
    /// reached already, else due after the new backoff). An operator's action.
    RetrySpec {
        /// The record's id.
        id: String,
        /// Attempts in all, the first one included (at least 1).
        #[arg(long)]
        max_attempts: u32,
        /// The wait before the first retry, in milliseconds.
        #[arg(long)]
        initial_backoff_ms: u64,
        /// The longest wait between retries, in milliseconds (at least the initial one).
        #[arg(long)]
        max_backoff_ms: u64,
    },
    /// Runs exactly the recorded consumer on exactly the recorded stream again, now.
    Retry {
        /// The record's id.
        id: String,
    },
    /// Skips the recorded stream for its consumer (an operator's decision, recorded): it is
    /// never retried, and the consumer's streams of that aggregate parked behind it run.
    Skip {
        /// The record's id.
        id: String,
    },
}

fn main() -> ExitCode {
    wow_service::init_logging();
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
    let outcome = runtime.block_on(run(cli.command));
    // Whatever the subcommand, the spans it left buffered are exported before the exit.
    wow_service::shutdown_telemetry();
    exit_code(outcome)
}

/// Runs one subcommand to its end: `Ok` holds the process's exit code.
async fn run(command: Command) -> Result<u8, String> {
    match command {
        Command::Serve {
            listen,
            store,
            config,
            role,
            example,
        } => done(serve::run(listen, store, config, role, example).await),
        Command::CatchUp {
            store,
            config,
            rebuild,
        } => done(tend::catch_up(store, config, rebuild).await),
        Command::Migrate {
            store,
            config,
            dry_run,
            claim_keys,
        } => done(migrate::run(store, config, dry_run, claim_keys).await),
        Command::Send { args, remote } => coded(remote::send(&remote.remote(), args).await),
        Command::Outcome {
            aggregate,
            id,
            request_id,
            remote,
        } => coded(remote::outcome(&remote.remote(), &aggregate, &id, &request_id).await),
        Command::View {
            aggregate,
            id,
            view,
            fresh_request,
            fresh_version,
            wait,
            remote,
        } => {
            let fresh = view_read::FreshArgs {
                request: fresh_request,
                version: fresh_version,
                wait: std::time::Duration::from_millis(wait),
            };
            coded(view_read::view(&remote.remote(), (&aggregate, &id, &view), fresh).await)
        }
        Command::Events {
            aggregate,
            id,
            head,
            tail,
            remote,
        } => coded(remote::events(&remote.remote(), &aggregate, &id, head, tail).await),
        Command::Bench(args) => done(bench::run(args).await),
        Command::Compensation {
            action,
            server,
            token,
        } => done(compensation(action, &server, token).await),
    }
}

/// `wow compensation list|retry|skip|recoverable|retry-spec` against the service at `server`.
async fn compensation(
    action: CompensationAction,
    server: &str,
    token: Option<String>,
) -> Result<(), tend::TendError> {
    match action {
        CompensationAction::List {
            status,
            consumer,
            aggregate,
            aggregate_id,
            recoverable,
        } => {
            let filter = tend::FailureFilter {
                status,
                consumer,
                aggregate,
                aggregate_id,
                recoverable,
            };
            tend::list(server, filter, token).await
        }
        CompensationAction::Recoverable { id, recoverable } => {
            let body = serde_json::json!({ "recoverable": recoverable });
            tend::edit(server, &id, "recoverable", body, token).await
        }
        CompensationAction::RetrySpec {
            id,
            max_attempts,
            initial_backoff_ms,
            max_backoff_ms,
        } => {
            let body = serde_json::json!({
                "maxAttempts": max_attempts,
                "initialBackoffMs": initial_backoff_ms,
                "maxBackoffMs": max_backoff_ms,
            });
            tend::edit(server, &id, "retry-spec", body, token).await
        }
        CompensationAction::Retry { id } => tend::retry(server, &id, token).await,
        CompensationAction::Skip { id } => tend::skip(server, &id, token).await,
    }
}

/// A subcommand that ends with success or an error: success is exit code 0.
fn done<E: std::fmt::Display>(outcome: Result<(), E>) -> Result<u8, String> {
    outcome.map(|()| 0).map_err(|e| e.to_string())
}

/// A subcommand that chooses its own exit code.
fn coded<E: std::fmt::Display>(outcome: Result<u8, E>) -> Result<u8, String> {
    outcome.map_err(|e| e.to_string())
}

/// The process's exit code: the subcommand's own, or 1 after printing the error.
fn exit_code(outcome: Result<u8, String>) -> ExitCode {
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
