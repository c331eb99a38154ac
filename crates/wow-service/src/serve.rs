//! Serving a gathered service until SIGINT or SIGTERM: [`ServiceBuilder::serve`] in the
//! caller's runtime, [`ServiceBuilder::run`] as a whole `main`.
//!
//! # Shutdown
//!
//! On SIGINT (Ctrl-C) or SIGTERM the server stops accepting and lets the requests it took
//! finish, for at most the shutdown grace (`WOW_SHUTDOWN_GRACE_MS`; see
//! [`wow_http::serve`]); then every consumer position is written, the compensation scheduler
//! stops, and the call returns. A restart on the same store resumes every consumer where it
//! stopped.

use std::io::{ErrorKind, Write};
use std::process::ExitCode;

use crate::builder::ServiceBuilder;
use crate::settings::Settings;
use crate::telemetry::{init_logging, shutdown_telemetry};
use crate::ServiceError;

impl ServiceBuilder {
    /// Starts the service ([`build`](Self::build)), listens on `settings.listen`, prints
    /// `listening on ADDRESS` (the address bound, so port 0 tells the port taken) as the
    /// first line of standard output, and serves until SIGINT or SIGTERM; then stops as the
    /// module documentation says. Logs through `tracing`, set up by [`init_logging`] unless
    /// the process already has a subscriber, with OTLP export of the spans when the
    /// environment asks for it ([`crate::telemetry`]); the spans still buffered are exported
    /// on the way out.
    ///
    /// # Errors
    ///
    /// Those of [`build`](Self::build); [`ServiceError::Listen`] when the address cannot be
    /// bound; [`ServiceError::Serve`] when serving fails.
    pub async fn serve(self) -> Result<(), ServiceError> {
        init_logging();
        let listen = self.settings.listen.clone();
        let running = self.build().await?;
        let bound = tokio::net::TcpListener::bind(&listen)
            .await
            .and_then(|listener| listener.local_addr().map(|address| (listener, address)));
        let (listener, address) = match bound {
            Ok(bound) => bound,
            Err(source) => {
                // What the catch-up did is kept for the next start.
                running.stop().await;
                return Err(ServiceError::Listen {
                    address: listen,
                    source,
                });
            }
        };
        tracing::info!(%address, "serving");
        say(&format!("listening on {address}"));
        let served = running.serve_on(listener, shutdown_signal()).await;
        // SPEC OB-1: the spans of the last requests are exported before the process exits.
        if let Err(error) = tokio::task::spawn_blocking(shutdown_telemetry).await {
            tracing::warn!(%error, "the last spans may not have been exported");
        }
        served
    }

    /// The whole of a service's `main`: reads the settings from the command line (see
    /// [`Settings::from_command_line`]; they replace any given with
    /// [`settings`](Self::settings)), sets up logging, starts a multi-threaded tokio runtime
    /// and [`serve`](Self::serve)s. On failure, prints `error: ...` to standard error and
    /// returns a failing exit code.
    pub fn run(self) -> ExitCode {
        init_logging();
        let outcome = Settings::from_command_line()
            .map_err(ServiceError::from)
            .and_then(|settings| {
                tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .map_err(ServiceError::Runtime)
                    .map(|runtime| (settings, runtime))
            })
            .and_then(|(settings, runtime)| runtime.block_on(self.settings(settings).serve()));
        // A failure before serving leaves spans buffered too.
        shutdown_telemetry();
        match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                tracing::error!(%error, "the service stopped");
                let _ = writeln!(std::io::stderr(), "error: {error}");
                ExitCode::FAILURE
            }
        }
    }
}

/// Writes `line` to standard output and flushes it; a closed pipe is not an error.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{line}").and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::BrokenPipe => {}
        Err(error) => tracing::warn!(%error, "cannot write to standard output"),
    }
}

/// Completes on SIGINT or SIGTERM.
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
    tracing::info!("shutting down: finishing the requests in flight");
}
