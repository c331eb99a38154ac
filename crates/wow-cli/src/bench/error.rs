//! Why `wow bench` stopped before its report.

use crate::serve::ServeError;

/// Why `wow bench` could not run or finish.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchError {
    /// The `--url` is not an `http://host:port` URL this client can reach.
    #[error("unsupported URL `{0}`: use http://HOST:PORT (no path, no TLS)")]
    Url(String),
    /// A flag's value cannot be run with.
    #[error("{0}")]
    Usage(&'static str),
    /// The embedded service could not start.
    #[error("cannot start the embedded service: {0}")]
    Embedded(#[from] Box<ServeError>),
    /// The embedded service could not listen on a loopback port.
    #[error("cannot listen on a loopback port: {0}")]
    Listen(#[source] std::io::Error),
    /// No connection to the target could be opened at the start.
    #[error("cannot connect to {target}: {source}")]
    Connect {
        /// The address tried.
        target: String,
        /// Why it failed.
        #[source]
        source: TransportError,
    },
    /// A request could not be assembled (a bad header value or path).
    #[error("cannot build a request: {0}")]
    Request(#[from] hyper::http::Error),
    /// Opening the accounts before the measured run was refused.
    #[error("the setup could not open the accounts: {0}")]
    Setup(String),
    /// A worker task panicked or was cancelled.
    #[error("a worker stopped unexpectedly: {0}")]
    Worker(#[from] tokio::task::JoinError),
    /// The latency histogram could not be made.
    #[error("cannot make a latency histogram: {0}")]
    Histogram(#[from] hdrhistogram::CreationError),
    /// The JSON report could not be written.
    #[error("cannot write the JSON report: {0}")]
    Json(#[from] serde_json::Error),
}

/// Why a request got no answer (counted as `Transport`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TransportError {
    /// The TCP connection could not be opened.
    #[error("connect: {0}")]
    Connect(#[from] std::io::Error),
    /// HTTP failed on the connection (closed, reset, malformed answer).
    #[error("http: {0}")]
    Http(#[from] hyper::Error),
}
