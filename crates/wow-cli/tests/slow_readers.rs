//! `wow serve` with clients that send a request and never read the answer: they are cut off
//! at `WOW_WRITE_TIMEOUT_MS`, so they cannot hold the server's connections for as long as
//! they stay (before, as many as `WOW_MAX_CONNECTIONS` had every new request answered 503).
//!
//! Linux only: there the kernel holds at most 128 KiB of an answer unsent, so the 180 KB of
//! `/openapi.json` stall a client that does not read; elsewhere the kernel may take it all,
//! and `wow_http`'s own tests (`tests/server_limits.rs`, `slow_readers`) stall on larger
//! answers.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

mod support;

use support::Served;

const PATIENCE: Duration = Duration::from_secs(10);
/// As many connections as the limit, as the issue had them.
const STALLED: usize = 64;

/// A connection with a receive buffer of about a kilobyte that has asked for `/openapi.json`
/// (some 180 KB: more than the kernel and the client's window hold) and will not read.
async fn not_reading(address: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(1024).unwrap();
    let mut stream = socket.connect(address).await.unwrap();
    stream
        .write_all(b"GET /openapi.json HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    stream
}

/// Sends `request` on new connections until one is answered other than 503, within
/// [`PATIENCE`]; that answer's status line and body.
async fn served(address: SocketAddr, request: &[u8]) -> String {
    tokio::time::timeout(PATIENCE, async {
        loop {
            let mut stream = TcpStream::connect(address).await.unwrap();
            stream.write_all(request).await.unwrap();
            let mut answer = Vec::new();
            // `Connection: close`: the answer ends with the connection.
            let _ = stream.read_to_end(&mut answer).await;
            let answer = String::from_utf8_lossy(&answer).into_owned();
            if !answer.is_empty() && !answer.starts_with("HTTP/1.1 503") {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("served within the patience")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_read_their_answers_do_not_hold_the_server() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("wow.db").display());
    let limit = STALLED.to_string();
    let served_process = Served::start(
        &["--listen", "127.0.0.1:0", "--store", &store],
        &[
            ("WOW_MAX_CONNECTIONS", limit.as_str()),
            // One peer stands for many clients here.
            ("WOW_MAX_CONNECTIONS_PER_PEER", limit.as_str()),
            ("WOW_WRITE_TIMEOUT_MS", "300"),
            // Only the write timeout may let go of them.
            ("WOW_HEADER_READ_TIMEOUT_MS", "60000"),
        ],
    );
    let address: SocketAddr = served_process.address.parse().unwrap();
    let document = served(
        address,
        b"GET /openapi.json HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(
        document.len() > 160 * 1024,
        "the answer must be larger than the 128 KiB the kernel holds unsent: {} bytes",
        document.len()
    );
    let mut stalled = Vec::new();
    for _ in 0..STALLED {
        stalled.push(not_reading(address).await);
    }
    let health = served(
        address,
        b"GET /health HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let body = r#"{"name":"Ann","balance":1}"#;
    let open = format!(
        "POST /account/ann/open HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let opened = served(address, open.as_bytes()).await;
    assert!(opened.starts_with("HTTP/1.1 200"), "{opened}");
    // They stayed open on this side all along.
    drop(stalled);
    assert!(served_process.stop().success());
}
