//! How long and how much a client may take of the server.

use std::time::Duration;

/// The bounds [`serve`](crate::serve) holds every connection to, so that a slow, silent or
/// greedy client, or one that stops reading, holds a socket for seconds, not for ever. Plain values; `Default` gives the
/// documented defaults, and [`ServerLimits::validate`] says whether a set is usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// How long a connection may take to send a request's head (request line and headers),
    /// counted from when the server starts waiting for it: from the accept on a new
    /// connection, from the end of the previous answer on a keep-alive one. So it also bounds
    /// an idle keep-alive connection. Past it the connection is closed without an answer.
    /// Default 5 s.
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive in full, counted from when the handler
    /// starts reading it (a total, not a per-chunk bound: a body trickled one byte at a time
    /// is cut off too). Past it a command is answered 408 with `errorCode` `BadRequest` and
    /// the connection is closed. Default 10 s.
    pub body_read_timeout: Duration,
    /// How long a write of an answer may wait without the client taking a byte: a client that
    /// stops reading stalls the write once the socket's buffers are full. Past it the
    /// connection is reset (the client sees its answer cut off) and all it held is released:
    /// its place among `max_connections`, the answer's body (an SSE stream ends; a command it
    /// waited on goes on) and the kernel's buffers. The clock runs only while a write waits,
    /// and only bytes the socket takes stop it, so neither SSE keep-alive comments nor later
    /// events keep a reader that stopped alive. A client that reads 64 KiB of its answer
    /// within each `write_timeout` is never cut off (on Linux, where the kernel holds at most
    /// 128 KiB unsent; elsewhere it may wait for a good part of its send buffer to drain).
    /// Default 10 s.
    pub write_timeout: Duration,
    /// The longest header value (or name) accepted, in bytes: a request with a longer one is
    /// answered 431 with a body that names the header. The whole head (request line and every
    /// header) may take 16 times this, at least 64 KiB; a longer head gets hyper's own 431
    /// without a body, and the connection is closed. Default 16 KiB (so a head of 256 KiB).
    pub max_header_bytes: usize,
    /// Connections served at once. One more takes the place of the connection that has
    /// waited longest for a request (a second at least, never one in a request); with none,
    /// it is answered 503 `ServiceUnavailable` (after its request head arrives) and closed.
    /// Default 1024.
    pub max_connections: usize,
    /// Connections one peer (one client IP address) may hold at once; `None` is half of
    /// `max_connections` (at least one), so one client's sockets, however many, leave room for
    /// everyone else. One more from that peer takes the place of its own connection that has
    /// waited longest for a request (a second at least, never one in a request); with none, it
    /// is answered 503 `ServiceUnavailable` and closed. Behind a reverse proxy every client is
    /// the proxy's address: raise it there. Default `None`.
    pub max_connections_per_peer: Option<usize>,
    /// After the shutdown signal, how long the requests in flight may take to finish; the
    /// connections still open then are dropped. Default 30 s.
    pub shutdown_grace: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(5),
            body_read_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            max_header_bytes: 16 * 1024,
            max_connections: 1024,
            max_connections_per_peer: None,
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

/// The smallest bound on a whole request head, whatever `max_header_bytes` says.
const MIN_HEAD_BYTES: usize = 64 * 1024;

/// How many times `max_header_bytes` a whole request head may take.
const HEAD_PER_HEADER: usize = 16;

/// A limit that cannot be served with: fix the setting it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidLimits {
    /// The named limit is zero: it would refuse or cut off every request.
    #[error("{0} must be more than zero")]
    Zero(&'static str),
    /// The named timeout is longer than [`MAX_READ_TIMEOUT`] (a day), past what the clock
    /// can count from now.
    #[error("{0} must be at most a day")]
    TooLong(&'static str),
}

/// The longest read or write timeout accepted.
pub const MAX_READ_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

impl ServerLimits {
    /// `Ok` when every limit can be served with: the read and write timeouts,
    /// `max_header_bytes` and `max_connections` are above zero (`shutdown_grace` may be zero:
    /// stop at once), and the read and write timeouts at most [`MAX_READ_TIMEOUT`].
    ///
    /// # Errors
    ///
    /// [`InvalidLimits::Zero`] naming the first limit that is zero, else
    /// [`InvalidLimits::TooLong`] naming the first timeout that is too long.
    pub fn validate(&self) -> Result<(), InvalidLimits> {
        let zeros = [
            ("header_read_timeout", self.header_read_timeout.is_zero()),
            ("body_read_timeout", self.body_read_timeout.is_zero()),
            ("write_timeout", self.write_timeout.is_zero()),
            ("max_header_bytes", self.max_header_bytes == 0),
            ("max_connections", self.max_connections == 0),
            (
                "max_connections_per_peer",
                self.max_connections_per_peer == Some(0),
            ),
        ];
        if let Some((name, _)) = zeros.iter().find(|(_, zero)| *zero) {
            return Err(InvalidLimits::Zero(name));
        }
        let timeouts = [
            ("header_read_timeout", self.header_read_timeout),
            ("body_read_timeout", self.body_read_timeout),
            ("write_timeout", self.write_timeout),
        ];
        match timeouts
            .iter()
            .find(|(_, timeout)| *timeout > MAX_READ_TIMEOUT)
        {
            Some((name, _)) => Err(InvalidLimits::TooLong(name)),
            None => Ok(()),
        }
    }

    /// Connections one peer may hold at once: [`ServerLimits::max_connections_per_peer`],
    /// else half of `max_connections` (at least one).
    pub fn per_peer(&self) -> usize {
        self.max_connections_per_peer
            .unwrap_or(self.max_connections / 2)
            .max(1)
    }

    /// The bound on a whole request head (request line and headers), which is also hyper's
    /// read buffer: comfortably above `max_header_bytes`, so that one long header is answered
    /// with the 431 that names it rather than hyper's bare one.
    pub(crate) fn head_bytes(&self) -> usize {
        self.max_header_bytes
            .saturating_mul(HEAD_PER_HEADER)
            .max(MIN_HEAD_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_leave_room_for_the_explained_431() {
        let limits = ServerLimits::default();
        assert_eq!(limits.validate(), Ok(()));
        assert_eq!(limits.head_bytes(), 256 * 1024);
        assert!(
            limits.head_bytes() > 200 * 1024,
            "a 200 KB header is answered by name"
        );
    }

    #[test]
    fn a_zero_limit_is_named() {
        let limits = ServerLimits {
            max_connections: 0,
            ..ServerLimits::default()
        };
        assert_eq!(
            limits.validate(),
            Err(InvalidLimits::Zero("max_connections"))
        );
        let tiny = ServerLimits {
            max_header_bytes: 1,
            ..ServerLimits::default()
        };
        assert_eq!(
            tiny.head_bytes(),
            MIN_HEAD_BYTES,
            "hyper needs at least 8 KiB"
        );
        let forever = ServerLimits {
            header_read_timeout: Duration::from_millis(u64::MAX),
            ..ServerLimits::default()
        };
        assert_eq!(
            forever.validate(),
            Err(InvalidLimits::TooLong("header_read_timeout"))
        );
    }

    #[test]
    fn the_write_timeout_is_validated_as_the_read_timeouts_are() {
        let never = ServerLimits {
            write_timeout: Duration::ZERO,
            ..ServerLimits::default()
        };
        assert_eq!(never.validate(), Err(InvalidLimits::Zero("write_timeout")));
        let forever = ServerLimits {
            write_timeout: MAX_READ_TIMEOUT + Duration::from_millis(1),
            ..ServerLimits::default()
        };
        assert_eq!(
            forever.validate(),
            Err(InvalidLimits::TooLong("write_timeout"))
        );
        let a_day = ServerLimits {
            write_timeout: MAX_READ_TIMEOUT,
            ..ServerLimits::default()
        };
        assert_eq!(a_day.validate(), Ok(()));
    }
}
