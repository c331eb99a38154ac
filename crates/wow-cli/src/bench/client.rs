//! The load's HTTP/1.1 client: one persistent hyper connection per worker (as wrk does), so
//! a request costs no pool look-up, and a connection that fails is opened again.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::http::{HeaderValue, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::error::{BenchError, TransportError};

/// Where the load goes: `host:port` to connect to and the `Host` header to send.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// `host:port`.
    pub(crate) address: String,
    /// The `Host` header.
    pub(crate) host: HeaderValue,
    /// `Authorization: Bearer …`, when a token was given.
    pub(crate) auth: Option<HeaderValue>,
}

impl Target {
    /// Reads `http://host[:port]` (a trailing `/` allowed); the port defaults to 80.
    pub(crate) fn parse(url: &str, token: Option<&str>) -> Result<Self, BenchError> {
        let refused = || BenchError::Url(url.to_owned());
        let rest = url.strip_prefix("http://").ok_or_else(refused)?;
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
            return Err(refused());
        }
        let has_port = authority
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.parse::<u16>().is_ok());
        let address = if has_port {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        let host = HeaderValue::from_str(authority).map_err(|_| refused())?;
        let target = Self {
            address,
            host,
            auth: None,
        };
        match token {
            Some(token) => target.with_token(token),
            None => Ok(target),
        }
    }

    /// This target, its requests sent with `Authorization: Bearer token`.
    pub(crate) fn with_token(&self, token: &str) -> Result<Self, BenchError> {
        let auth = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| BenchError::Usage("the token is not a valid header value"))?;
        Ok(Self {
            auth: Some(auth),
            ..self.clone()
        })
    }
}

/// How one request ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A 2xx answer.
    Success,
    /// Any other answer: its `Wow-Error-Code`, else `HTTP <status>`.
    Refused(String),
}

/// One persistent HTTP/1.1 connection with keep-alive.
#[derive(Debug)]
pub(crate) struct Connection<B> {
    sender: SendRequest<B>,
}

impl<B> Connection<B>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// Opens a connection to `target`; its driver runs as a task until the connection ends.
    pub(crate) async fn open(target: &Target) -> Result<Self, TransportError> {
        let stream = TcpStream::connect(&target.address).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            // The connection's end is seen by the next request on it.
            let _ = connection.await;
        });
        Ok(Self { sender })
    }

    /// Whether the connection can take another request.
    pub(crate) fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Sends `request` and reads the whole answer, keeping only what the report needs.
    pub(crate) async fn send(&mut self, request: Request<B>) -> Result<Answer, TransportError> {
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let answer = if status.is_success() {
            Answer::Success
        } else {
            Answer::Refused(error_code(status, response.headers()))
        };
        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            frame?;
        }
        Ok(answer)
    }
}

/// The code of a refused answer: `Wow-Error-Code`, else `HTTP <status>`.
fn error_code(status: StatusCode, headers: &hyper::http::HeaderMap) -> String {
    headers
        .get(wow_http::ERROR_CODE_HEADER)
        .and_then(|code| code.to_str().ok())
        .map_or_else(|| format!("HTTP {}", status.as_u16()), str::to_owned)
}

/// A request body that is one precomputed buffer.
pub(crate) type Body = Full<Bytes>;

/// `GET path` on a fresh connection: the body of a 2xx answer, else `None`.
pub(crate) async fn get(target: &Target, path: &str) -> Option<Bytes> {
    let mut connection = Connection::<Empty<Bytes>>::open(target).await.ok()?;
    let mut request = Request::get(path).header(hyper::http::header::HOST, target.host.clone());
    if let Some(auth) = &target.auth {
        request = request.header(hyper::http::header::AUTHORIZATION, auth.clone());
    }
    let request = request.body(Empty::new()).ok()?;
    connection.sender.ready().await.ok()?;
    let response = connection.sender.send_request(request).await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    Some(response.into_body().collect().await.ok()?.to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let target = Target::parse("http://127.0.0.1:9100/", None).ok();
        assert_eq!(target.map(|t| t.address), Some("127.0.0.1:9100".into()));
        let target = Target::parse("http://localhost", Some("t")).ok();
        assert_eq!(
            target.as_ref().map(|t| t.address.as_str()),
            Some("localhost:80")
        );
        assert!(target.and_then(|t| t.auth).is_some());
        for bad in ["https://x:1", "127.0.0.1:80", "http://", "http://x:1/path"] {
            assert!(Target::parse(bad, None).is_err(), "{bad}");
        }
    }
}
