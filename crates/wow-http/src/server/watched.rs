//! A body passed through frame by frame, with a check before each frame that may end it: the
//! one wrapper behind the request body's read deadline and the answer body that keeps its
//! connection busy. Unlike tower-http's and http-body-util's wrappers it keeps the inner
//! body's size hint, which is how `Content-Length` is seen before the body is read.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::BoxError;
use http_body::{Body, Frame, SizeHint};

/// What a [`Watched`] body checks before each of its frames.
pub(crate) trait Watch: Unpin {
    /// An error to end the body with instead of its next frame, or `None` to read on. When it
    /// answers `None` it registers no wake-up of its own unless it means to end the body later.
    fn poll_stop(&mut self, cx: &mut Context<'_>) -> Option<BoxError>;
}

/// `body`, read through `watch`: each frame as `body` gives it, unless `watch` ends the body
/// first; its end of stream and size hint are `body`'s own. `watch` lives as long as the body.
#[derive(Debug)]
pub(crate) struct Watched<B, W> {
    body: B,
    watch: W,
}

impl<B, W> Watched<B, W> {
    /// `body`, read through `watch`.
    pub(crate) fn new(body: B, watch: W) -> Self {
        Self { body, watch }
    }
}

impl<B, W> Body for Watched<B, W>
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
    W: Watch,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let Some(stop) = this.watch.poll_stop(cx) {
            return Poll::Ready(Some(Err(stop)));
        }
        Pin::new(&mut this.body).poll_frame(cx).map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
