//! The reference the HTTP benchmarks compare `wow serve` with: a bare axum service that
//! decodes a JSON body and answers JSON, on the same machine, with no event sourcing behind it.
//!
//! ```sh
//! cargo run --release -p wow-http --example echo -- 127.0.0.1:9200
//! wrk -t2 -c64 -d10s -s docs/bench/deposit.lua http://127.0.0.1:9200
//! ```

use axum::extract::Path;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::Value;

async fn echo(
    Path((aggregate, id, command)): Path<(String, String, String)>,
    Json(body): Json<Value>,
) -> Json<Value> {
    Json(serde_json::json!({ "aggregate": aggregate, "id": id, "command": command, "body": body }))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let listen = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9200".to_owned());
    let app = Router::new().route("/{aggregate}/{id}/{command}", post(echo));
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    axum::serve(listener, app).await
}
