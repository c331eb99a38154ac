//! The server holds: `wow_http::serve` over real TCP against clients that send slowly, send
//! nothing, send too much, come too many, or stop reading their answers, and a stop with
//! requests in flight. The client
//! side writes raw bytes, so that it can misbehave as an attacker would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;
use tokio::time::timeout;
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_http::{router, HttpConfig, HttpState, ServerLimits};
use wow_runtime::pipeline::LocalPipeline;

/// Generous: every bound under test is 300 ms.
const PATIENCE: Duration = Duration::from_secs(5);
const SHORT: Duration = Duration::from_millis(300);

fn short_limits() -> ServerLimits {
    ServerLimits {
        header_read_timeout: SHORT,
        body_read_timeout: SHORT,
        shutdown_grace: PATIENCE,
        ..ServerLimits::default()
    }
}

/// A server running `wow_http::serve` until `stop` is sent.
struct Running {
    address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    served: JoinHandle<io::Result<()>>,
    _bank: Option<LocalPipeline>,
}

impl Running {
    async fn app(app: Router, limits: ServerLimits) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(wow_http::serve(listener, app, limits, async {
            let _ = stopped.await;
        }));
        Self {
            address,
            stop: Some(stop),
            served,
            _bank: None,
        }
    }

    /// The bank's routes, as `wow serve` has them.
    async fn bank(limits: ServerLimits, config: HttpConfig) -> Self {
        Self::bank_and(limits, config, Router::new()).await
    }

    /// The bank's routes and `extra`.
    async fn bank_and(limits: ServerLimits, config: HttpConfig, extra: Router) -> Self {
        let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
        let bank = support::bank_pipeline(&wow_core::Stores::in_memory().with_events(store));
        let app = router(HttpState::new(&bank, None, config)).merge(extra);
        let mut running = Self::app(app, limits).await;
        running._bank = Some(bank);
        running
    }

    async fn connect(&self) -> TcpStream {
        TcpStream::connect(self.address).await.unwrap()
    }

    /// A connection with a receive buffer of about a kilobyte that has sent `request`: a
    /// client that will not read the answer (until the test reads it).
    async fn not_reading(&self, request: &[u8]) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(1024).unwrap();
        let mut stream = socket.connect(self.address).await.unwrap();
        stream.write_all(request).await.unwrap();
        stream
    }

    /// Sends `request` on new connections until one is answered other than 503 (the server
    /// at its connection limit), within [`PATIENCE`]; that answer, and its connection (kept
    /// open, so still counted by the server).
    async fn served(&self, request: &[u8]) -> (Answer, TcpStream) {
        timeout(PATIENCE, async {
            loop {
                let mut stream = self.connect().await;
                stream.write_all(request).await.unwrap();
                match read_answer(&mut stream).await {
                    Ok(answer) if answer.status != 503 => return (answer, stream),
                    // Refused, or closed unanswered (too many refusals at once): again.
                    Ok(_) | Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
        })
        .await
        .expect("served within the patience")
    }

    /// Sends the stop and waits until new connections are refused.
    async fn stop_accepting(&mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        timeout(PATIENCE, async {
            loop {
                match TcpStream::connect(self.address).await {
                    // Taken before the close: dropped at once, so it ends at once.
                    Ok(stream) => drop(stream),
                    Err(error) if error.kind() == io::ErrorKind::ConnectionRefused => return,
                    Err(error) => panic!("connect: {error}"),
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("connections refused after the stop");
    }

    async fn stopped(self) {
        timeout(PATIENCE, self.served)
            .await
            .expect("serve returns")
            .unwrap()
            .unwrap();
    }
}

/// One HTTP answer, read off the wire.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// Reads one answer: its head, then a body of `Content-Length` bytes (the server's answers
/// all have one), or up to the close.
async fn read_answer(stream: &mut TcpStream) -> io::Result<Answer> {
    let mut buffer = Vec::new();
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("closed after {} bytes of head", buffer.len()),
            ));
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head}"));
    let headers: HashMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let mut body = buffer[head_end..].to_vec();
    match headers
        .get("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        Some(length) => {
            while body.len() < length {
                let mut chunk = vec![0u8; length - body.len()];
                let read = stream.read(&mut chunk).await?;
                if read == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                body.extend_from_slice(&chunk[..read]);
            }
        }
        None => {
            stream.read_to_end(&mut body).await?;
        }
    }
    Ok(Answer {
        status,
        headers,
        body,
    })
}

async fn answer_within(stream: &mut TcpStream) -> Answer {
    timeout(PATIENCE, read_answer(stream))
        .await
        .expect("an answer in time")
        .unwrap()
}

/// Waits for the server to close `stream` (an end of file, or a reset); returns what it
/// sent before.
async fn closed_within(stream: &mut TcpStream) -> Vec<u8> {
    timeout(PATIENCE, async {
        let mut received = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return received,
                Ok(read) => received.extend_from_slice(&chunk[..read]),
            }
        }
    })
    .await
    .expect("the server closes the connection in time")
}

fn command(path: &str, headers: &[(&str, &[u8])], body: &[u8]) -> Vec<u8> {
    let mut request =
        format!("POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n")
            .into_bytes();
    for (name, value) in headers {
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(b": ");
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    request.extend_from_slice(body);
    request
}

fn assert_code(answer: &Answer, status: u16, code: &str) {
    let body = answer.json();
    assert_eq!(answer.status, status, "{body}");
    assert_eq!(body["errorCode"], code, "{body}");
    assert_eq!(answer.header("wow-error-code"), Some(code), "{body}");
}

mod slow_clients {
    use super::*;

    #[tokio::test]
    async fn a_head_that_stops_arriving_is_closed_at_the_header_timeout() {
        let server = Running::bank(short_limits(), HttpConfig::default()).await;
        let mut stream = server.connect().await;
        stream
            .write_all(b"POST /account/a/deposit HTTP/1.1\r\nHost: test\r\nCommand-Req")
            .await
            .unwrap();
        let started = Instant::now();
        let sent = closed_within(&mut stream).await;
        assert!(sent.is_empty(), "closed without an answer: {sent:?}");
        assert!(started.elapsed() >= SHORT - Duration::from_millis(50));
    }

    #[tokio::test]
    async fn a_connection_that_never_sends_is_closed_at_the_header_timeout() {
        let server = Running::bank(short_limits(), HttpConfig::default()).await;
        let mut stream = server.connect().await;
        assert!(closed_within(&mut stream).await.is_empty());
    }

    #[tokio::test]
    async fn an_idle_keep_alive_connection_is_closed_at_the_header_timeout() {
        let server = Running::bank(short_limits(), HttpConfig::default()).await;
        let mut stream = server.connect().await;
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .unwrap();
        let answer = answer_within(&mut stream).await;
        assert_eq!(answer.status, 200);
        assert_ne!(answer.header("connection"), Some("close"), "kept alive");
        let started = Instant::now();
        assert!(closed_within(&mut stream).await.is_empty());
        assert!(started.elapsed() >= SHORT - Duration::from_millis(50));
    }

    #[tokio::test]
    async fn a_body_that_stops_arriving_is_answered_408_at_the_body_timeout() {
        let server = Running::bank(short_limits(), HttpConfig::default()).await;
        let mut stream = server.connect().await;
        let mut request = command("/account/a/deposit", &[], &[b' '; 100]);
        request.truncate(request.len() - 90);
        stream.write_all(&request).await.unwrap();
        let answer = answer_within(&mut stream).await;
        assert_code(&answer, 408, "BadRequest");
        let body = answer.json();
        assert_eq!(body["bindingErrors"][0]["name"], "body", "{body}");
        assert!(
            body["errorMsg"]
                .as_str()
                .unwrap()
                .contains("did not arrive in time"),
            "{body}"
        );
        closed_within(&mut stream).await;
    }

    #[tokio::test]
    async fn a_body_trickled_inside_the_timeout_is_still_cut_off_at_it() {
        let server = Running::bank(short_limits(), HttpConfig::default()).await;
        let (mut reader, mut writer) = server.connect().await.into_split();
        let head = command("/account/a/deposit", &[], &[b' '; 1000]);
        let head = head[..head.len() - 1000].to_vec();
        // One byte every 100 ms: no wait between bytes reaches the 300 ms timeout.
        let trickle = tokio::spawn(async move {
            writer.write_all(&head).await?;
            let mut every = tokio::time::interval(Duration::from_millis(100));
            for _ in 0..1000 {
                every.tick().await;
                writer.write_all(b" ").await?;
            }
            io::Result::Ok(())
        });
        let answer = timeout(PATIENCE, async {
            let mut buffer = Vec::new();
            let _ = reader.read_to_end(&mut buffer).await;
            buffer
        })
        .await
        .expect("answered well before the body could end");
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        trickle.abort();
    }
}

mod oversize {
    use super::*;

    fn small_body() -> HttpConfig {
        HttpConfig {
            body_limit: 256,
            ..HttpConfig::default()
        }
    }

    #[tokio::test]
    async fn a_body_announced_over_the_limit_is_answered_413_before_it_is_sent() {
        let server = Running::bank(short_limits(), small_body()).await;
        let mut stream = server.connect().await;
        stream
            .write_all(
                b"POST /account/a/deposit HTTP/1.1\r\nHost: test\r\nCommand-Request-Id: big-1\r\nContent-Length: 999999999999\r\n\r\n",
            )
            .await
            .unwrap();
        let started = Instant::now();
        let answer = answer_within(&mut stream).await;
        assert!(
            started.elapsed() < SHORT,
            "at once, not at the body timeout"
        );
        assert_code(&answer, 413, "BadRequest");
        let body = answer.json();
        assert_eq!(body["bindingErrors"][0]["name"], "body", "{body}");
        assert_eq!(body["requestId"], "big-1", "a CommandResult with its ids");
        assert_eq!(body["succeeded"], false);
    }

    #[tokio::test]
    async fn a_chunked_body_that_grows_past_the_limit_is_answered_413() {
        let server = Running::bank(short_limits(), small_body()).await;
        let mut stream = server.connect().await;
        let mut request =
            b"POST /account/a/deposit HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec();
        for _ in 0..4 {
            request.extend_from_slice(b"64\r\n");
            request.extend_from_slice(&[b' '; 100]);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
        stream.write_all(&request).await.unwrap();
        let answer = answer_within(&mut stream).await;
        assert_code(&answer, 413, "BadRequest");
    }

    #[tokio::test]
    async fn a_200_kb_header_is_answered_431_naming_it() {
        let server = Running::bank(short_limits(), HttpConfig::default()).await;
        let mut stream = server.connect().await;
        let long = "r".repeat(200 * 1024);
        let request = command(
            "/account/a/deposit",
            &[("Command-Request-Id", long.as_bytes())],
            b"{\"amount\":1}",
        );
        stream.write_all(&request).await.unwrap();
        let answer = answer_within(&mut stream).await;
        assert_code(&answer, 431, "BadRequest");
        let message = answer.json()["errorMsg"].as_str().unwrap().to_owned();
        assert_eq!(
            message,
            format!(
                "header Command-Request-Id is longer than {} bytes",
                ServerLimits::default().max_header_bytes
            )
        );
    }
}

mod header_bytes {
    use super::*;

    #[tokio::test]
    async fn a_control_character_is_refused_by_hyper_with_a_bare_400() {
        let server = Running::bank(short_limits(), HttpConfig::default()).await;
        let mut stream = server.connect().await;
        let request = command(
            "/account/a/deposit",
            &[("Command-Request-Id", b"a\x01b")],
            b"{\"amount\":1}",
        );
        stream.write_all(&request).await.unwrap();
        let answer = answer_within(&mut stream).await;
        assert_eq!(answer.status, 400);
        assert!(answer.body.is_empty(), "hyper's own answer has no body");
    }

    #[tokio::test]
    async fn a_tab_or_a_byte_above_ascii_in_a_command_header_is_named() {
        let server = Running::bank(short_limits(), HttpConfig::default()).await;
        let cases: [(&str, &str, &[u8]); 3] = [
            ("/account/a/deposit", "Command-Request-Id", b"a\tb"),
            ("/account/a/deposit", "Command-Wait-Stage", b"SENT\xff"),
            ("/account/open", "Command-Aggregate-Id", b"caf\xc3\xa9"),
        ];
        for (path, name, value) in cases {
            let mut stream = server.connect().await;
            let request = command(path, &[(name, value)], b"{\"amount\":1}");
            stream.write_all(&request).await.unwrap();
            let answer = answer_within(&mut stream).await;
            assert_code(&answer, 400, "IllegalArgument");
            let body = answer.json();
            assert_eq!(body["bindingErrors"][0]["name"], name, "{body}");
            assert_eq!(
                body["bindingErrors"][0]["msg"], "must be visible ASCII",
                "{body}"
            );
        }
    }
}

mod connections {
    use super::*;

    /// A request whose body never arrives: its connection is in a request until the body
    /// read timeout.
    const BODY_PENDING: &[u8] = b"POST /account/a/deposit HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n";

    async fn in_a_request(server: &Running) -> TcpStream {
        let mut stream = server.connect().await;
        stream.write_all(BODY_PENDING).await.unwrap();
        stream
    }

    /// Sends `GET /health` on new connections until one is answered 200 (each other answer
    /// being a 503), within [`PATIENCE`]: `Err` when none was.
    async fn health_served_within_patience(
        server: &Running,
    ) -> Result<(), tokio::time::error::Elapsed> {
        timeout(PATIENCE, async {
            loop {
                let mut stream = server.connect().await;
                stream
                    .write_all(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
                    .await
                    .unwrap();
                let answer = read_answer(&mut stream).await.unwrap();
                if answer.status == 200 {
                    return;
                }
                assert_eq!(answer.status, 503);
            }
        })
        .await
    }

    #[tokio::test]
    async fn past_the_limit_a_connection_is_answered_503_and_closed() {
        let limits = ServerLimits {
            max_connections: 2,
            // One peer stands for many clients here.
            max_connections_per_peer: Some(2),
            header_read_timeout: PATIENCE * 2,
            body_read_timeout: PATIENCE * 2,
            ..short_limits()
        };
        let server = Running::bank(limits, HttpConfig::default()).await;
        // Accepted in the order they connect: these two take the limit, each in a request
        // (no idle connection to give its place).
        let held = [in_a_request(&server).await, in_a_request(&server).await];
        let mut third = server.connect().await;
        third
            .write_all(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .unwrap();
        let answer = answer_within(&mut third).await;
        assert_code(&answer, 503, "ServiceUnavailable");
        assert_eq!(answer.header("connection"), Some("close"));
        assert_eq!(answer.header("retry-after"), Some("1"));
        closed_within(&mut third).await;
        // Once one goes, a new connection is served again.
        drop(held);
        let served = health_served_within_patience(&server).await;
        assert!(
            served.is_ok(),
            "served again once the held connections went"
        );
    }

    /// SPEC TN-1: sockets that connect and send nothing cannot lock new clients out. At the
    /// limit, a new connection takes the place of the connection idle longest (a second at
    /// least), never of one in a request.
    #[tokio::test]
    async fn at_the_limit_a_new_connection_takes_the_place_of_the_one_idle_longest() {
        let limits = ServerLimits {
            max_connections: 2,
            // One peer stands for many clients here.
            max_connections_per_peer: Some(2),
            header_read_timeout: PATIENCE * 4,
            body_read_timeout: PATIENCE * 4,
            ..short_limits()
        };
        let server = Running::bank(limits, HttpConfig::default()).await;
        let mut busy = in_a_request(&server).await;
        let mut idle = server.connect().await;
        // Refused (503) while the idle one has waited less than a second, then served.
        let served = health_served_within_patience(&server).await;
        assert!(served.is_ok(), "a new client is served at the limit");
        let sent = closed_within(&mut idle).await;
        assert!(
            sent.is_empty(),
            "the idle one closed without an answer: {sent:?}"
        );
        // The one in a request is still served: its body arrives, its answer comes.
        busy.write_all(br#"{"amount":1}"#).await.unwrap();
        let answer = answer_within(&mut busy).await;
        assert_eq!(answer.status, 404, "no account `a`: answered, not cut off");
    }

    /// SPEC TN-1: one client's sockets, however many and however fresh, leave room for
    /// everyone else. A peer holds half the places at most; past that its own idle connection
    /// gives its place, or it is answered 503, while another peer is served at once.
    #[tokio::test]
    async fn one_peer_holds_its_share_of_the_places_and_another_peer_is_served() {
        let limits = ServerLimits {
            max_connections: 8,
            header_read_timeout: PATIENCE * 4,
            body_read_timeout: PATIENCE * 4,
            ..short_limits()
        };
        let server = Running::bank(limits, HttpConfig::default()).await;
        // Twice the limit of silent sockets from 127.0.0.1, all fresh: none has idled a second.
        let mut hostile = Vec::new();
        for _ in 0..16 {
            hostile.push(server.connect().await);
        }
        // Another client (127.0.0.2) is served at once, on its first connection.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let mut other = socket.connect(server.address).await.unwrap();
        other
            .write_all(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .unwrap();
        let answer = answer_within(&mut other).await;
        assert_eq!(
            answer.status, 200,
            "another peer is served beside 16 silent sockets"
        );
        // The hostile peer's sockets past its share (4) were answered 503 when they spoke.
        let mut past_share = hostile.pop().unwrap();
        past_share
            .write_all(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .unwrap();
        let answer = answer_within(&mut past_share).await;
        assert_code(&answer, 503, "ServiceUnavailable");
        assert_eq!(answer.header("retry-after"), Some("1"));
    }
}

mod stop {
    use super::*;

    /// `GET /slow`: says it has started, then answers when released.
    fn gated() -> (Router, mpsc::UnboundedReceiver<()>, Arc<Notify>) {
        let (started, entered) = mpsc::unbounded_channel();
        let release = Arc::new(Notify::new());
        let gate = release.clone();
        let app = Router::new()
            .route(
                "/slow",
                get(move || {
                    let started = started.clone();
                    let gate = gate.clone();
                    async move {
                        let _ = started.send(());
                        gate.notified().await;
                        "done"
                    }
                }),
            )
            .route("/fast", get(|| async { "fast" }));
        (app, entered, release)
    }

    #[tokio::test]
    async fn a_request_in_flight_is_answered_after_the_stop_closed_the_listener() {
        let (app, mut entered, release) = gated();
        let mut server = Running::app(app, short_limits()).await;
        let mut stream = server.connect().await;
        stream
            .write_all(b"GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .unwrap();
        entered.recv().await.unwrap();
        server.stop_accepting().await;
        release.notify_one();
        let answer = answer_within(&mut stream).await;
        assert_eq!((answer.status, answer.body.as_slice()), (200, &b"done"[..]));
        assert_eq!(answer.header("connection"), Some("close"));
        server.stopped().await;
    }

    #[tokio::test]
    async fn a_connection_taken_before_the_stop_has_its_first_request_answered() {
        let (app, _entered, _release) = gated();
        let mut server = Running::app(
            app,
            ServerLimits {
                header_read_timeout: PATIENCE,
                ..short_limits()
            },
        )
        .await;
        let mut early = server.connect().await;
        server.stop_accepting().await;
        early
            .write_all(b"GET /fast HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .unwrap();
        let answer = answer_within(&mut early).await;
        assert_eq!((answer.status, answer.body.as_slice()), (200, &b"fast"[..]));
        closed_within(&mut early).await;
        server.stopped().await;
    }

    #[tokio::test]
    async fn the_grace_bounds_a_request_that_never_finishes() {
        let (app, mut entered, _release) = gated();
        let mut server = Running::app(
            app,
            ServerLimits {
                shutdown_grace: SHORT,
                ..short_limits()
            },
        )
        .await;
        let mut stream = server.connect().await;
        stream
            .write_all(b"GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .unwrap();
        entered.recv().await.unwrap();
        server.stop_accepting().await;
        server.stopped().await;
        assert!(
            closed_within(&mut stream).await.is_empty(),
            "dropped unanswered"
        );
    }

    #[tokio::test]
    async fn limits_that_cannot_be_served_with_are_refused_up_front() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let limits = ServerLimits {
            header_read_timeout: Duration::ZERO,
            ..ServerLimits::default()
        };
        let error = wow_http::serve(listener, Router::new(), limits, async {})
            .await
            .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert!(error.to_string().contains("header_read_timeout"), "{error}");
    }
}

mod slow_readers {
    use super::*;

    use axum::body::Bytes;
    use axum::response::sse::{Event, KeepAlive, Sse};
    use axum::response::IntoResponse;
    use futures::StreamExt;

    /// More than the kernel's buffers on both sides hold (a few MiB on loopback), so that a
    /// client that does not read stalls the server's write.
    const BIG: usize = 32 * 1024 * 1024;

    /// More than the kernel holds unsent for a client on Linux (`TCP_NOTSENT_LOWAT`), less
    /// than [`BIG`]: what a slow reader is given.
    const MEDIUM: usize = 4 * 1024 * 1024;

    const GET_BIG: &[u8] = b"GET /big HTTP/1.1\r\nHost: test\r\n\r\n";
    const GET_HEALTH: &[u8] = b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n";

    fn stops_reading(write_timeout: Duration, max_connections: usize) -> ServerLimits {
        ServerLimits {
            write_timeout,
            max_connections,
            // One peer stands for many clients here.
            max_connections_per_peer: Some(max_connections),
            // Longer than any test: only the write timeout ends a connection here.
            header_read_timeout: PATIENCE * 2,
            ..short_limits()
        }
    }

    /// Says when it is dropped: the answer's body it is part of has been released.
    struct DropSignal(Option<oneshot::Sender<()>>);

    impl Drop for DropSignal {
        fn drop(&mut self) {
            if let Some(dropped) = self.0.take() {
                let _ = dropped.send(());
            }
        }
    }

    /// `GET /big`: [`BIG`] bytes of one shared buffer (no copy per answer); `GET /medium`:
    /// [`MEDIUM`] bytes of the same. `GET /events`: an SSE answer that never ends, an event
    /// of 16 KiB after another. `GET /quiet`: an SSE answer with no event, only keep-alive
    /// comments of 16 KiB every millisecond (axum's `KeepAlive`, as the command route's). Both
    /// SSE answers tell `released` when their stream is dropped.
    fn slow_reader_routes() -> (Router, mpsc::UnboundedReceiver<&'static str>) {
        let (released, dropped) = mpsc::unbounded_channel();
        let big = Bytes::from(vec![b'x'; BIG]);
        let medium = big.slice(..MEDIUM);
        let signal = move |name: &'static str| {
            let (sender, receiver) = oneshot::channel();
            let released = released.clone();
            tokio::spawn(async move {
                if receiver.await.is_ok() {
                    let _ = released.send(name);
                }
            });
            DropSignal(Some(sender))
        };
        let on_events = signal.clone();
        let on_quiet = signal;
        let routes = Router::new()
            .route("/big", get(move || std::future::ready(big.clone())))
            .route("/medium", get(move || std::future::ready(medium.clone())))
            .route(
                "/events",
                get(move || {
                    let guard = on_events("events");
                    let data = "e".repeat(16 * 1024);
                    let events = futures::stream::repeat_with(move || {
                        let _held = &guard;
                        Ok::<_, std::convert::Infallible>(Event::default().data(data.clone()))
                    });
                    std::future::ready(Sse::new(events).into_response())
                }),
            )
            .route(
                "/quiet",
                get(move || {
                    let guard = on_quiet("quiet");
                    let events =
                        futures::stream::pending::<Result<Event, std::convert::Infallible>>().map(
                            move |event| {
                                let _held = &guard;
                                event
                            },
                        );
                    let keep_alive = KeepAlive::new()
                        .interval(Duration::from_millis(1))
                        .text("k".repeat(16 * 1024));
                    std::future::ready(Sse::new(events).keep_alive(keep_alive).into_response())
                }),
            );
        (routes, dropped)
    }

    async fn server(limits: ServerLimits) -> (Running, mpsc::UnboundedReceiver<&'static str>) {
        let (routes, released) = slow_reader_routes();
        let server = Running::bank_and(limits, HttpConfig::default(), routes).await;
        (server, released)
    }

    /// Waits for `name`'s stream to be dropped, within [`PATIENCE`].
    async fn released_within(released: &mut mpsc::UnboundedReceiver<&'static str>, name: &str) {
        let dropped = timeout(PATIENCE, released.recv())
            .await
            .unwrap_or_else(|_| panic!("the {name} stream is released in time"));
        assert_eq!(dropped, Some(name));
    }

    #[tokio::test]
    async fn two_hundred_connections_that_stop_reading_leave_health_and_new_commands_served() {
        // As many connections as the limit, each stalled on an answer it does not read.
        let (server, _released) = server(stops_reading(SHORT, 200)).await;
        let mut stalled = Vec::new();
        for _ in 0..200 {
            stalled.push(server.not_reading(GET_BIG).await);
        }
        let started = Instant::now();
        let (health, _) = server.served(GET_HEALTH).await;
        assert_eq!(health.status, 200);
        assert_eq!(health.json()["status"], "UP");
        let (open, _) = server
            .served(&command(
                "/account/open",
                &[("Command-Request-Id", b"open-carol")],
                br#"{"name":"Carol","balance":1}"#,
            ))
            .await;
        assert_code(&open, 200, "Ok");
        assert!(started.elapsed() < PATIENCE, "served while the 200 stay");
        // 200 new clients are served at once and keep their connections: the server let go
        // of every stalled one, though each is still open on the client's side.
        let mut fresh = Vec::new();
        for _ in 0..200 {
            let (answer, stream) = server.served(GET_HEALTH).await;
            assert_eq!(answer.status, 200);
            fresh.push(stream);
        }
        for mut stream in stalled {
            let received = closed_within(&mut stream).await;
            assert!(received.len() < BIG, "cut off: {} bytes", received.len());
        }
    }

    #[tokio::test]
    async fn a_connection_that_stops_reading_is_closed_at_the_write_timeout() {
        // One connection at a time: a new one is served only once the stalled one is gone.
        let (server, _released) = server(stops_reading(SHORT, 1)).await;
        let mut stalled = server.not_reading(GET_BIG).await;
        let started = Instant::now();
        let (health, _) = server.served(GET_HEALTH).await;
        assert_eq!(health.status, 200);
        assert!(
            started.elapsed() >= SHORT - Duration::from_millis(50),
            "not before the write timeout: {:?}",
            started.elapsed()
        );
        let received = closed_within(&mut stalled).await;
        assert!(
            received.starts_with(b"HTTP/1.1 200 OK\r\n"),
            "the answer had begun"
        );
        assert!(received.len() < BIG, "cut off: {} bytes", received.len());
    }

    #[tokio::test]
    async fn a_slow_but_steady_reader_gets_the_whole_answer() {
        // Each pause takes a quarter of the write timeout, leaving the rest as a margin.
        let (server, _released) = server(stops_reading(SHORT * 4, 4)).await;
        let mut stream = server
            .not_reading(b"GET /medium HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            .await;
        let mut received = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        let mut pauses = 0;
        timeout(PATIENCE, async {
            loop {
                let read = stream.read(&mut chunk).await.unwrap();
                if read == 0 {
                    return;
                }
                received.extend_from_slice(&chunk[..read]);
                // Four pauses along the way.
                if pauses < 4 && received.len() > (pauses + 1) * MEDIUM / 5 {
                    pauses += 1;
                    tokio::time::sleep(SHORT).await;
                }
            }
        })
        .await
        .expect("the whole answer in time");
        assert_eq!(pauses, 4);
        let head = received.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert!(received.starts_with(b"HTTP/1.1 200 OK\r\n"));
        assert_eq!(received.len() - head, MEDIUM, "the whole body");
    }

    #[tokio::test]
    async fn an_sse_answer_whose_reader_stops_is_ended() {
        let (server, mut released) = server(stops_reading(SHORT, 4)).await;
        let mut stream = server
            .not_reading(b"GET /events HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n\r\n")
            .await;
        // The reader takes the head and the first event, then stops.
        let mut received = Vec::new();
        let mut chunk = [0u8; 1024];
        while !received.windows(6).any(|w| w == b"data: ") {
            let read = timeout(PATIENCE, stream.read(&mut chunk))
                .await
                .expect("the first event")
                .unwrap();
            assert_ne!(read, 0);
            received.extend_from_slice(&chunk[..read]);
        }
        assert!(received.starts_with(b"HTTP/1.1 200 OK\r\n"));
        released_within(&mut released, "events").await;
        closed_within(&mut stream).await;
    }

    #[tokio::test]
    async fn keep_alive_comments_do_not_keep_a_stopped_sse_reader_alive() {
        let (server, mut released) = server(stops_reading(SHORT, 4)).await;
        let mut stream = server
            .not_reading(b"GET /quiet HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n\r\n")
            .await;
        released_within(&mut released, "quiet").await;
        let received = closed_within(&mut stream).await;
        assert!(received.starts_with(b"HTTP/1.1 200 OK\r\n"));
    }
}
