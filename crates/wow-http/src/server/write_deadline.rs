//! A connection whose answers must keep leaving: the write timeout.
//!
//! hyper bounds the wait for a request, not the time an answer takes to leave. A client that
//! sends a request and stops reading fills the socket's buffers, then hyper waits on a write
//! for ever, holding the connection's place among `max_connections`, the answer's body (an
//! SSE stream, and the wait behind it) and the buffers. [`WriteDeadline`] wraps the socket
//! and promises:
//!
//! - once a write (or flush, or shutdown) has waited `timeout` without the socket taking a
//!   byte, it fails with [`io::ErrorKind::TimedOut`], and so does every later write: hyper
//!   ends the connection and drops all it held;
//! - the socket is then reset, not closed (`SO_LINGER` 0): the kernel drops the answer it
//!   still holds instead of trying to deliver it to a client that does not read;
//! - the clock runs only while a write waits, and only bytes taken stop it: another write
//!   asked for while one waits (the next SSE event, a keep-alive comment) does not restart
//!   it;
//! - the socket takes more as soon as the client has read a little (on Linux the kernel
//!   holds at most [`UNSENT_BYTES`] of the answer unsent, and takes more once the client's
//!   reads let part of that go), so a client that keeps reading, however slowly, keeps its
//!   connection; elsewhere the kernel may wait for a good part of its send buffer (up to
//!   several MiB) to drain before it takes more.
//!
//! Reads pass through untouched (the header and body timeouts bound those).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// What the deadline asks of the socket under it.
pub(super) trait Transport {
    /// Makes the socket take more as soon as the peer has taken a little: on Linux the kernel
    /// then holds at most [`UNSENT_BYTES`] not yet sent (`TCP_NOTSENT_LOWAT`), instead of
    /// waiting to be writable again until a third of a buffer of up to several MiB is free.
    fn watch_progress(&self);

    /// Makes the close that follows drop what is still unsent (for TCP, a reset).
    fn reset_on_close(&self);
}

/// How much of an answer the kernel holds unsent, on Linux: what a client that stops
/// reading leaves in the kernel (with what its window took), and about how much a slow
/// client must read within the write timeout to be seen progressing.
const UNSENT_BYTES: u32 = 128 * 1024;

impl Transport for TcpStream {
    fn watch_progress(&self) {
        #[cfg(target_os = "linux")]
        if let Err(error) = socket2::SockRef::from(self).set_tcp_notsent_lowat(UNSENT_BYTES) {
            tracing::debug!(%error, "cannot set TCP_NOTSENT_LOWAT");
        }
    }

    fn reset_on_close(&self) {
        if let Err(error) = socket2::SockRef::from(self).set_linger(Some(Duration::ZERO)) {
            tracing::debug!(%error, "cannot set SO_LINGER; the connection is closed instead");
        }
    }
}

/// `io`, whose writes fail once one has waited `timeout` without progress (see the module
/// documentation).
#[derive(Debug)]
pub(super) struct WriteDeadline<T> {
    io: T,
    timeout: Duration,
    /// Armed when a write first waits; dropped when the peer takes a byte.
    stalled: Option<Pin<Box<Sleep>>>,
    /// The timeout passed: every write fails from now on.
    expired: bool,
}

impl<T: Transport> WriteDeadline<T> {
    pub(super) fn new(io: T, timeout: Duration) -> Self {
        io.watch_progress();
        Self {
            io,
            timeout,
            stalled: None,
            expired: false,
        }
    }

    /// What a write's poll of `io` gave, under the deadline: bytes taken (`progressed`)
    /// disarm the clock, a wait arms it (unless it is armed already), and a wait past it is
    /// the error. A flush or shutdown that completes takes no bytes of its own (a TCP flush
    /// completes at once), so it leaves the clock as it is.
    fn watch<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
        progressed: impl FnOnce(&R) -> bool,
    ) -> Poll<io::Result<R>> {
        match polled {
            Poll::Ready(Ok(done)) => {
                if progressed(&done) {
                    self.stalled = None;
                }
                Poll::Ready(Ok(done))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => {
                let timeout = self.timeout;
                let stalled = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                ready!(stalled.as_mut().poll(cx));
                self.expired = true;
                self.stalled = None;
                tracing::debug!(
                    write_timeout_ms = self.timeout.as_millis(),
                    "the client took nothing of the answer for the write timeout: resetting the connection"
                );
                self.io.reset_on_close();
                Poll::Ready(Err(self.timed_out()))
            }
        }
    }

    /// The error of every write once the deadline has passed.
    fn timed_out(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the client took nothing of the answer for {} ms",
                self.timeout.as_millis()
            ),
        )
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteDeadline<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Transport + Unpin> AsyncWrite for WriteDeadline<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.expired {
            return Poll::Ready(Err(this.timed_out()));
        }
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.watch(cx, polled, |written| *written > 0)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.expired {
            return Poll::Ready(Err(this.timed_out()));
        }
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.watch(cx, polled, |written| *written > 0)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.expired {
            return Poll::Ready(Err(this.timed_out()));
        }
        let polled = Pin::new(&mut this.io).poll_flush(cx);
        this.watch(cx, polled, |()| false)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.expired {
            return Poll::Ready(Err(this.timed_out()));
        }
        let polled = Pin::new(&mut this.io).poll_shutdown(cx);
        this.watch(cx, polled, |()| false)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::future::poll_fn;
    use tokio::io::{AsyncReadExt, DuplexStream};
    use tokio::net::{TcpListener, TcpSocket};
    use tokio::time::Instant;

    const TIMEOUT: Duration = Duration::from_secs(1);
    /// What the in-memory pipe holds before a write waits.
    const PIPE: usize = 1024;

    impl Transport for DuplexStream {
        fn watch_progress(&self) {}
        fn reset_on_close(&self) {}
    }

    /// A pipe whose writing end is under the deadline, and its reading end.
    fn pipe() -> (WriteDeadline<DuplexStream>, DuplexStream) {
        let (writer, reader) = tokio::io::duplex(PIPE);
        (WriteDeadline::new(writer, TIMEOUT), reader)
    }

    /// Polls one write of `chunk` once: `None` while it waits.
    async fn write_once<T>(io: &mut WriteDeadline<T>, chunk: &[u8]) -> Option<io::Result<usize>>
    where
        T: AsyncWrite + Transport + Unpin,
    {
        poll_fn(|cx| match Pin::new(&mut *io).poll_write(cx, chunk) {
            Poll::Ready(result) => Poll::Ready(Some(result)),
            Poll::Pending => Poll::Ready(None),
        })
        .await
    }

    /// Writes until a write waits.
    async fn fill(io: &mut WriteDeadline<DuplexStream>) {
        while let Some(written) = write_once(io, &[b'x'; PIPE / 4]).await {
            assert!(written.unwrap() > 0);
        }
    }

    /// Awaits one write to its failure, within twice the timeout.
    async fn failed_write(io: &mut WriteDeadline<DuplexStream>) -> io::Error {
        let write = poll_fn(|cx| Pin::new(&mut *io).poll_write(cx, b"x"));
        tokio::time::timeout(TIMEOUT * 2, write)
            .await
            .expect("the write fails at the timeout")
            .unwrap_err()
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_waits_for_the_timeout_fails_and_so_does_every_later_one() {
        let (mut io, _reader) = pipe();
        fill(&mut io).await;
        let stalled = Instant::now();
        // Asked for again and again well inside the timeout (as keep-alive comments are):
        // the clock is not restarted.
        let mut error = None;
        for _ in 0..8 {
            tokio::time::sleep(TIMEOUT / 4).await;
            match write_once(&mut io, b": keep-alive\n\n").await {
                None => assert!(stalled.elapsed() < TIMEOUT, "{:?}", stalled.elapsed()),
                Some(result) => {
                    error = Some(result.unwrap_err());
                    break;
                }
            }
        }
        let error = error.expect("the write fails at the timeout");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(stalled.elapsed(), TIMEOUT);
        let later = write_once(&mut io, b"more").await.unwrap().unwrap_err();
        assert_eq!(later.kind(), io::ErrorKind::TimedOut);
        let flushed = poll_fn(|cx| Pin::new(&mut io).poll_flush(cx)).await;
        assert_eq!(flushed.unwrap_err().kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_write_wakes_its_task_at_the_timeout() {
        let (mut io, _reader) = pipe();
        fill(&mut io).await;
        let stalled = Instant::now();
        // Nobody asks again: the timer itself wakes the write (as it wakes hyper).
        let error = failed_write(&mut io).await;
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(stalled.elapsed(), TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_taken_by_the_reader_restart_the_clock() {
        let (mut io, mut reader) = pipe();
        fill(&mut io).await;
        tokio::time::sleep(TIMEOUT * 3 / 4).await;
        assert!(write_once(&mut io, b"x").await.is_none(), "still waiting");
        let mut taken = [0u8; 16];
        reader.read_exact(&mut taken).await.unwrap();
        assert_eq!(write_once(&mut io, b"x").await.unwrap().unwrap(), 1);
        // A new wait has a whole timeout of its own.
        fill(&mut io).await;
        let stalled = Instant::now();
        tokio::time::sleep(TIMEOUT * 3 / 4).await;
        assert!(write_once(&mut io, b"x").await.is_none(), "still waiting");
        let error = failed_write(&mut io).await;
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(stalled.elapsed(), TIMEOUT);
    }

    #[tokio::test]
    async fn a_tcp_connection_that_times_out_is_reset() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(1024).unwrap();
        let (client, accepted) = tokio::join!(
            socket.connect(listener.local_addr().unwrap()),
            listener.accept()
        );
        let (mut client, accepted) = (client.unwrap(), accepted.unwrap().0);
        let mut io = WriteDeadline::new(accepted, Duration::from_millis(200));
        let chunk = vec![b'x'; 64 * 1024];
        let error = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Err(error) = poll_fn(|cx| Pin::new(&mut io).poll_write(cx, &chunk)).await {
                    return error;
                }
            }
        })
        .await
        .expect("the write times out");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        drop(io);
        let mut received = Vec::new();
        let ended = client.read_to_end(&mut received).await;
        assert_eq!(
            ended.unwrap_err().kind(),
            io::ErrorKind::ConnectionReset,
            "after {} bytes",
            received.len()
        );
    }
}
