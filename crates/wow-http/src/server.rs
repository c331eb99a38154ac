//! Serving a router over TCP so that the server holds: every connection is bounded in time
//! and size by [`ServerLimits`], and a stop lets the requests already taken finish.
//!
//! The protocol is hyper's (HTTP/1.1 through `hyper::server::conn::http1`, driven by
//! hyper-util's tokio glue and `GracefulShutdown`); this module only sets its bounds and adds
//! the answers that say what went wrong:
//!
//! - **Slow or silent head**: hyper's `header_read_timeout` closes a connection whose
//!   request head has not arrived in full in time, without an answer. The clock also runs
//!   while a keep-alive connection waits for its next request, so an idle connection is
//!   closed after the same time.
//! - **Slow body**: a command's body must arrive in full within `body_read_timeout` of its
//!   first read, or the command is answered 408 `BadRequest`. A body announced
//!   (`Content-Length`) above the body limit is answered 413 before a byte of it is read.
//! - **Client that stops reading**: a write of an answer that waits `write_timeout` without
//!   the client taking a byte (its buffers full) resets the connection, which drops all it
//!   held: its place among `max_connections`, the answer's body (an SSE stream ends, its
//!   keep-alive comments included) and the kernel's buffers (see `write_deadline`). Without
//!   it, as many such clients as `max_connections` would have every new connection answered
//!   503 for as long as they stay.
//! - **Long headers**: a header name or value above `max_header_bytes` is answered 431
//!   `BadRequest` with a body that names the header. hyper's buffer holds a whole head of 16
//!   times that (at least 64 KiB), so a real long header gets the named answer.
//! - **Too many connections**: past `max_connections`, a new connection takes the place of
//!   the connection that has waited longest for a request, if one has waited a second at
//!   least (never one in a request): that one is closed, as its header timeout would close it
//!   a little later, so silent sockets cannot lock new clients out (`idle`). With none idle
//!   that long, the new connection gets its request head read (within the same header
//!   timeout), a 503 `ServiceUnavailable` answer with `Retry-After: 1`, and is closed. At
//!   most 64 such refusals run at once; a connection past those is closed at once without an
//!   answer.
//!
//! # What hyper refuses by itself
//!
//! hyper answers a head it cannot parse with a bare status and no body, then closes the
//! connection; no handler sees it, so it carries no `errorCode`. That is:
//!
//! - 400: a header value holding a byte other than tab, `0x20..=0x7E` and `0x80..=0xFF`,
//!   that is any control character but tab (`0x00..=0x08`, `0x0B`, `0x0C`, `0x0E..=0x1F`,
//!   `0x7F`, and a CR not followed by LF; an LF ends the header line, and what follows is
//!   parsed as the next one); a header name outside the token characters; a malformed
//!   request line; an unparsable `Content-Length`, or two that differ; a
//!   `Transfer-Encoding` whose last coding is not `chunked` (or any on HTTP/1.0);
//! - 431: a head longer than the bound above, or more than 100 headers;
//! - 414: a request target longer than 65 534 bytes.
//!
//! A tab or a byte `0x80..=0xFF` does pass hyper: in a `Command-*` header it is answered by
//! the command route, 400 with a `CommandResult` naming the header ("must be visible
//! ASCII"). After hyper's bare answer the client may see a reset instead if it was still
//! sending (the server closes with its bytes unread).
//!
//! Only HTTP/1 is served. hyper bounds neither the head nor the idle time of an HTTP/2
//! connection, so serving cleartext HTTP/2 (prior knowledge) would reopen what the limits
//! close; hyper closes a connection that opens with the HTTP/2 preface, without an answer.
//!
//! # Shutdown
//!
//! When the `shutdown` future completes, [`serve`] stops accepting. On Linux the listening
//! socket first drops new handshakes (a bare SYN; see `handshakes`), the server takes every
//! connection that completes within a short settle (those waiting in the listen backlog and
//! those whose handshake was under way), then closes the listening socket: a client whose SYN
//! was dropped sends it again and meets the closed port, so its connect is refused. Elsewhere
//! the server takes the backlog as it is and closes at once. Every connection it took then
//! stops after its current request: one in the middle of a request finishes its answer and
//! closes; one that has not sent its first request yet has it read (within the header
//! timeout) and answered, then closes (hyper alone would close it unread, and with it a
//! request already in its socket); an idle keep-alive connection is closed at once. `serve`
//! returns when all have closed, or after `shutdown_grace`, when it drops those still open.
//!
//! What this guarantees a client: a request on a connection the server took is answered in
//! full, unless the grace runs out first. What it cannot guarantee, since hyper and the socket
//! API leave these races open:
//!
//! - a connection whose handshake completes after the settle (its last segment delayed by
//!   more than the settle; on other systems than Linux, any handshake the kernel completes
//!   between the last accept and the close) is reset by the kernel, its request unread (so
//!   not processed);
//! - a request sent on an idle keep-alive connection at the instant the stop closes it is
//!   not read: the client sees the connection closed or reset, and the request was not
//!   processed (HTTP/1.1 lets a server close an idle connection at any time, RFC 9112
//!   §9.3.1). Resending it, with the same `Command-Request-Id`, is safe.
//!
//! Dropping the `serve` future instead drops the listener and every connection at once.

mod deadline;
mod handshakes;
mod idle;
mod limits;
mod refusals;
mod watched;
mod write_deadline;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulConnection, GracefulShutdown, Watcher};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tower::ServiceExt;

use deadline::read_deadline;
pub(crate) use deadline::BodyReadTimeout;
pub use limits::{InvalidLimits, ServerLimits, MAX_READ_TIMEOUT};
use watched::Watched;
use write_deadline::WriteDeadline;

use crate::reads::gate::PeerAddr;

/// How many connections past the limit are being answered 503 at once.
const REFUSALS_AT_ONCE: usize = 64;

/// How long the accept loop waits after an accept error that is not about one connection
/// (out of file descriptors, say) before it tries again.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// How long the stop keeps taking connections whose handshakes were under way when it
/// began refusing new ones: the listener closes once none has completed for this long.
const HANDSHAKE_SETTLE: Duration = Duration::from_millis(100);

/// How often, at most, a warning says that connections were refused.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` within `limits` until `shutdown` completes, then stops as the
/// module documentation says: stop accepting, let the requests taken finish (for at most
/// `limits.shutdown_grace`), return.
///
/// # Errors
///
/// [`io::ErrorKind::InvalidInput`] (wrapping [`InvalidLimits`]) before serving anything when
/// `limits` cannot be served with. Accept errors never end the loop: one about a single
/// connection is skipped, any other (out of file descriptors) is logged and retried after a
/// second. An error while handing the listening socket over for the final drain is returned
/// after the connections taken have finished.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    limits
        .validate()
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
    let mut server = Server::new(app, limits);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(ended) = server.tasks.join_next(), if !server.tasks.is_empty() => {
                if let Err(error) = ended {
                    tracing::error!(%error, "a connection task failed");
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => server.take(stream, peer),
                Err(error) if is_connection_error(&error) => {
                    tracing::debug!(%error, "a connection failed before it was accepted");
                }
                Err(error) => {
                    tracing::error!(%error, "cannot accept connections; trying again in a second");
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                    }
                }
            },
        }
    }
    let drained = server.drain(listener).await;
    server.finish().await;
    drained
}

/// The accept side: the connection builders, the permits, the connection tasks.
struct Server {
    app: Router,
    limits: ServerLimits,
    /// Serves the connections within the limit.
    http: http1::Builder,
    /// Serves the refusals: keep-alive off, so each closes after its one 503.
    refusal: http1::Builder,
    connections: Arc<Semaphore>,
    refusals: Arc<Semaphore>,
    /// The served connections waiting for a request: at the limit, a new connection takes
    /// the place of the one idle longest.
    idle: idle::IdleConnections,
    graceful: GracefulShutdown,
    tasks: JoinSet<()>,
    refused_since_log: u64,
    last_refusal_log: Option<Instant>,
}

impl Server {
    fn new(app: Router, limits: ServerLimits) -> Self {
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .max_header_size(limits.head_bytes())
            .max_buf_size(limits.head_bytes())
            .keep_alive(true);
        let mut refusal = http.clone();
        refusal.keep_alive(false);
        Self {
            app,
            limits,
            http,
            refusal,
            // More permits than a semaphore holds is no limit at all: as many as it holds.
            connections: Arc::new(Semaphore::new(
                limits.max_connections.min(Semaphore::MAX_PERMITS),
            )),
            refusals: Arc::new(Semaphore::new(REFUSALS_AT_ONCE)),
            idle: idle::IdleConnections::default(),
            graceful: GracefulShutdown::new(),
            tasks: JoinSet::new(),
            refused_since_log: 0,
            last_refusal_log: None,
        }
    }

    /// Serves `stream`; at its peer's share of the places, in the place of that peer's
    /// connection that has waited longest for a request, and at the limit in the place of any
    /// connection that has (at least [`idle::EVICT_AFTER`] either way), or else answers it 503.
    fn take(&mut self, stream: TcpStream, peer: SocketAddr) {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
        }
        if self.idle.held_by(peer.ip()) >= self.limits.per_peer() {
            // One client's sockets, however many, leave the other places to everyone else:
            // past its share a peer gives up one of its own idle connections, or is refused.
            if self
                .idle
                .evict_longest_idle_of(peer.ip(), idle::EVICT_AFTER)
            {
                tracing::debug!(%peer, "the peer's idle connection gives its place to its new one");
                self.take_freed(stream, peer);
            } else {
                tracing::debug!(%peer, "refused: the peer holds its share of the connections");
                self.refuse(stream, peer);
            }
            return;
        }
        match self.connections.clone().try_acquire_owned() {
            Ok(permit) => {
                let connection = self.connection(stream, peer);
                self.tasks.spawn(async move {
                    connection.await;
                    drop(permit);
                });
            }
            Err(_) if self.idle.evict_longest_idle(idle::EVICT_AFTER) => {
                tracing::debug!(%peer, "an idle connection gives its place to a new one");
                self.take_freed(stream, peer);
            }
            Err(_) => self.refuse(stream, peer),
        }
    }

    /// Serves `stream` in the place an evicted connection frees: its task ends at once and
    /// frees it, but another new connection may take it first, so wait no longer than a head
    /// may take.
    fn take_freed(&mut self, stream: TcpStream, peer: SocketAddr) {
        let connections = self.connections.clone();
        let wait = self.limits.header_read_timeout;
        let connection = self.connection(stream, peer);
        self.tasks.spawn(async move {
            match tokio::time::timeout(wait, connections.acquire_owned()).await {
                Ok(Ok(permit)) => {
                    connection.await;
                    drop(permit);
                }
                _ => tracing::debug!(%peer, "closed without an answer: no place freed"),
            }
        });
    }

    /// Serves `stream` to its end, giving its place up when it has waited longest for a
    /// request and a new connection needs one.
    fn connection(
        &mut self,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> impl Future<Output = ()> + Send + 'static {
        let app = self.app.clone();
        let limits = self.limits;
        let tracked = self.idle.track(peer.ip());
        let first_request = Arc::new(Notify::new());
        let taken = first_request.clone();
        let in_use = tracked.clone();
        let service = service_fn(move |request: Request<Incoming>| {
            taken.notify_one();
            let busy = in_use.busy();
            let app = app.clone();
            async move {
                if let Some(answer) =
                    refusals::header_too_long(request.headers(), limits.max_header_bytes)
                {
                    return Ok::<_, Infallible>(
                        answer.map(|body| Body::new(Watched::new(body, busy))),
                    );
                }
                let mut request =
                    request.map(|body| Body::new(read_deadline(body, limits.body_read_timeout)));
                request.extensions_mut().insert(PeerAddr(peer));
                let answer = app.oneshot(request).await?;
                Ok(answer.map(|body| Body::new(Watched::new(body, busy))))
            }
        });
        let stream = WriteDeadline::new(stream, limits.write_timeout);
        let connection = self.http.serve_connection(TokioIo::new(stream), service);
        let watcher = self.graceful.watcher();
        async move {
            let evicted = tracked.evicted();
            let mut serving = std::pin::pin!(run(connection, first_request, watcher, peer));
            loop {
                tokio::select! {
                    () = &mut serving => break,
                    () = evicted.notified() => {
                        if !tracked.in_request() {
                            tracing::debug!(%peer, "closed while idle: a new connection takes its place");
                            break;
                        }
                    }
                }
            }
        }
    }

    fn refuse(&mut self, stream: TcpStream, peer: SocketAddr) {
        self.refused_since_log += 1;
        let now = Instant::now();
        if self
            .last_refusal_log
            .is_none_or(|last| now.duration_since(last) >= REFUSAL_LOG_EVERY)
        {
            tracing::warn!(
                refused = self.refused_since_log,
                max_connections = self.limits.max_connections,
                "connections refused: the server is at its connection limit"
            );
            self.refused_since_log = 0;
            self.last_refusal_log = Some(now);
        }
        let Ok(permit) = self.refusals.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "closed without an answer: too many refusals at once");
            return;
        };
        let max = self.limits.max_connections;
        let first_request = Arc::new(Notify::new());
        let taken = first_request.clone();
        let service = service_fn(move |_: Request<Incoming>| {
            taken.notify_one();
            async move { Ok::<_, Infallible>(refusals::busy(max)) }
        });
        let stream = WriteDeadline::new(stream, self.limits.write_timeout);
        let connection = self.refusal.serve_connection(TokioIo::new(stream), service);
        let watcher = self.graceful.watcher();
        self.tasks.spawn(async move {
            run(connection, first_request, watcher, peer).await;
            drop(permit);
        });
    }

    /// Takes the connections the kernel completed before the stop, and, where the listener
    /// can refuse new handshakes, those under way; then closes the listening socket. They
    /// are served as any other, so their requests are answered.
    async fn drain(&mut self, listener: TcpListener) -> io::Result<()> {
        let refusing = handshakes::refuse_new(&listener).unwrap_or_else(|error| {
            tracing::warn!(%error, "cannot refuse new handshakes; closing the listener at once");
            false
        });
        if refusing {
            self.settle(&listener).await
        } else {
            self.take_backlog(listener)
        }
    }

    /// Takes connections until none has completed its handshake for [`HANDSHAKE_SETTLE`].
    async fn settle(&mut self, listener: &TcpListener) -> io::Result<()> {
        loop {
            match tokio::time::timeout(HANDSHAKE_SETTLE, listener.accept()).await {
                Err(_settled) => return Ok(()),
                Ok(Ok((stream, peer))) => self.take(stream, peer),
                Ok(Err(error)) if is_connection_error(&error) => {}
                Ok(Err(error)) => return Err(error),
            }
        }
    }

    /// Empties the listen backlog as it is now, without waiting.
    fn take_backlog(&mut self, listener: TcpListener) -> io::Result<()> {
        // The std listener accepts without waiting for tokio to learn of the readiness, so
        // this empties the backlog as it is now; the socket is already non-blocking.
        let listener = listener.into_std()?;
        loop {
            match listener.accept() {
                Ok((stream, peer)) => {
                    let taken = stream
                        .set_nonblocking(true)
                        .and_then(|()| TcpStream::from_std(stream));
                    match taken {
                        Ok(stream) => self.take(stream, peer),
                        Err(error) => tracing::warn!(%peer, %error, "cannot serve a connection"),
                    }
                }
                // Returning drops the listener: later connects are refused.
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(error) if is_connection_error(&error) => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// Asks every connection to stop after its current request, and waits for them, for
    /// at most the grace; then drops those still open.
    async fn finish(self) {
        let Self {
            graceful,
            mut tasks,
            limits,
            ..
        } = self;
        tracing::info!(
            connections = graceful.count(),
            "stopped accepting; finishing the requests in flight"
        );
        tokio::select! {
            () = graceful.shutdown() => tracing::info!("every connection has closed"),
            () = tokio::time::sleep(limits.shutdown_grace) => tracing::warn!(
                grace_ms = limits.shutdown_grace.as_millis(),
                "connections still open after the shutdown grace: dropping them"
            ),
        }
        tasks.shutdown().await;
    }
}

/// Drives `connection` to its end. The stop concerns it only once hyper has taken its first
/// request (`first_request` is notified by the service): asked to stop before, hyper would
/// close a connection it has not read from yet, and with it a request already in the socket
/// (the reset this module exists to avoid). Until then the header timeout bounds it.
async fn run<C>(mut connection: C, first_request: Arc<Notify>, watcher: Watcher, peer: SocketAddr)
where
    C: GracefulConnection<Error = hyper::Error> + Unpin,
{
    let ended = tokio::select! {
        ended = &mut connection => ended,
        () = first_request.notified() => watcher.watch(connection).await,
    };
    if let Err(error) = ended {
        // A header timeout, a client gone, a head hyper refused: the client's doing.
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}

/// Whether an accept error is about one connection (which the loop skips) rather than the
/// listener.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}
