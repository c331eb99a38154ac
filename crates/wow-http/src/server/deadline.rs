//! A request body that must arrive within a deadline.
//!
//! tower-http's `TimeoutBody` bounds the wait for each frame, so a client that trickles one
//! byte just inside the timeout holds the connection for as long as the body limit lets it;
//! and it drops the body's size hint, which is how the command reader sees `Content-Length`
//! before reading (the early 413). This wrapper bounds the whole body instead and passes the
//! size hint through.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::Duration;

use axum::BoxError;
use tokio::time::Sleep;

use super::watched::{Watch, Watched};

/// The body did not arrive in full within the server's body read timeout. The command
/// reader answers it with 408 `BadRequest`; the connection is closed after the answer.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {} ms", .0.as_millis())]
pub(crate) struct BodyReadTimeout(pub(crate) Duration);

/// A request body failing with [`BodyReadTimeout`] once its timeout has passed since its
/// first read (see [`read_deadline`]).
pub(crate) type ReadDeadline<B> = Watched<B, Deadline>;

/// `body`, failing with [`BodyReadTimeout`] once `timeout` has passed since its first read.
/// A body nobody reads never starts its clock (hyper closes the connection after the answer
/// instead of reading it).
pub(crate) fn read_deadline<B>(body: B, timeout: Duration) -> ReadDeadline<B> {
    Watched::new(
        body,
        Deadline {
            timeout,
            deadline: None,
        },
    )
}

/// The clock of a [`ReadDeadline`].
#[derive(Debug)]
pub(crate) struct Deadline {
    timeout: Duration,
    /// Started at the first poll.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl Watch for Deadline {
    /// [`BodyReadTimeout`] once the timeout has passed since the first poll.
    fn poll_stop(&mut self, cx: &mut Context<'_>) -> Option<BoxError> {
        let timeout = self.timeout;
        let deadline = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if deadline.as_mut().poll(cx).is_ready() {
            return Some(Box::new(BodyReadTimeout(timeout)));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use axum::body::Bytes;
    use http_body::{Body, Frame};
    use http_body_util::{BodyExt, Full, StreamBody};

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_arriving_fails_at_the_deadline() {
        let pending = StreamBody::new(futures::stream::pending::<
            Result<Frame<Bytes>, std::convert::Infallible>,
        >());
        let body = read_deadline(pending, Duration::from_millis(300));
        let error = body.collect().await.unwrap_err();
        assert!(error.downcast_ref::<BodyReadTimeout>().is_some(), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_in_time_is_read_whole_and_keeps_its_size_hint() {
        let body = read_deadline(Full::new(Bytes::from_static(b"{}")), Duration::from_secs(1));
        assert_eq!(body.size_hint().exact(), Some(2));
        assert_eq!(body.collect().await.unwrap().to_bytes(), "{}");
    }
}
