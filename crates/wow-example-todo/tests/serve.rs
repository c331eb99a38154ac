//! The `wow-todo` binary end to end: started on a free port over a SQLite file, driven over
//! HTTP, stopped with SIGTERM, started again on the same file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Lines};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};

/// A `wow-todo` process, killed if the test ends before it stopped it (a failed assertion).
struct Served {
    child: Option<Child>,
    /// `http://ADDRESS`, from its first line.
    base: String,
    /// The rest of its standard output, kept open so that the server can still write.
    _stdout: Lines<BufReader<ChildStdout>>,
}

impl Served {
    /// Starts `wow-todo` on `database` and an ephemeral port, and waits for the line that
    /// says where it listens.
    fn start(database: &Path) -> Self {
        let store = format!("sqlite://{}", database.display());
        let mut child = Command::new(env!("CARGO_BIN_EXE_wow-todo"))
            .args(["--listen", "127.0.0.1:0", "--store", &store])
            .env_remove("WOW_CONFIG")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            panic!("no standard output");
        };
        let mut stdout = BufReader::new(stdout).lines();
        let first = match stdout.next() {
            Some(Ok(line)) => line,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("wow-todo did not start: {other:?}");
            }
        };
        let mut served = Self {
            child: Some(child),
            base: String::new(),
            _stdout: stdout,
        };
        let address = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {first}"));
        served.base = format!("http://{address}");
        served
    }

    /// Sends SIGTERM and waits for the exit.
    fn stop(mut self) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let killed = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        child.wait().unwrap()
    }

    /// `POST /todo/{id}/{command}` with `body`, `Command-Request-Id: request_id`, waiting
    /// until the view has the change; the status, the `Wow-Error-Code` and the body.
    async fn send(
        &self,
        id: &str,
        command: &str,
        body: Value,
        request_id: &str,
    ) -> (StatusCode, String, Value) {
        let response = Client::new()
            .post(format!("{}/todo/{id}/{command}", self.base))
            .header("Command-Request-Id", request_id)
            .header("Command-Wait-Stage", "PROJECTED")
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let code = response
            .headers()
            .get("Wow-Error-Code")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        (status, code, response.json().await.unwrap())
    }

    /// `GET path`: the status and the JSON body.
    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = reqwest::get(format!("{}{path}", self.base)).await.unwrap();
        (response.status(), response.json().await.unwrap())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// An answer of 200 `Ok`.
#[track_caller]
fn assert_ok((status, code, body): (StatusCode, String, Value)) {
    assert_eq!((status, code.as_str()), (StatusCode::OK, "Ok"), "{body}");
}

/// Creates the groceries list, adds milk and eggs, and completes the milk.
async fn fill_the_groceries_list(served: &Served) {
    assert_ok(
        served
            .send(
                "groceries",
                "create_list",
                json!({"title": "Groceries"}),
                "create-1",
            )
            .await,
    );
    assert_ok(
        served
            .send("groceries", "add_item", json!({"text": "Milk"}), "add-1")
            .await,
    );
    assert_ok(
        served
            .send("groceries", "add_item", json!({"text": "Eggs"}), "add-2")
            .await,
    );
    assert_ok(
        served
            .send("groceries", "complete_item", json!({"item": 1}), "done-1")
            .await,
    );
}

/// A business rule: item 1 is done already; the same intent again is not applied twice.
async fn a_done_item_is_refused_and_a_resend_is_not_applied_twice(served: &Served) {
    let (status, code, _) = served
        .send(
            "groceries",
            "complete_item",
            json!({"item": 1}),
            "done-1-again",
        )
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "NoOpenItem")
    );
    // The same intent again: not applied twice.
    let (status, code, body) = served
        .send("groceries", "complete_item", json!({"item": 1}), "done-1")
        .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "DuplicateRequestId")
    );
    assert_eq!(body["aggregateVersion"], 4);
}

/// The OpenAPI document lists the view and the commands.
async fn the_document_lists_the_view_and_the_commands(served: &Served) {
    let (status, document) = served.get("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    for path in [
        "/todo/{id}/view/open_items",
        "/todo/{id}/add_item",
        "/todo/create_list",
    ] {
        assert!(
            document["paths"][path].is_object(),
            "{path} is not in the document"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn serves_the_todo_list_and_keeps_its_view_across_a_restart() {
    let folder = tempfile::tempdir().unwrap();
    let database = folder.path().join("todo.db");
    let served = Served::start(&database);
    fill_the_groceries_list(&served).await;
    a_done_item_is_refused_and_a_resend_is_not_applied_twice(&served).await;

    let expected = json!({"aggregateId": "groceries", "version": 4,
        "state": {"title": "Groceries", "open": [{"item": 2, "text": "Eggs"}]}});
    let (status, view) = served.get("/todo/groceries/view/open_items").await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view, expected);
    the_document_lists_the_view_and_the_commands(&served).await;

    assert!(served.stop().success(), "SIGTERM is a clean stop");

    let again = Served::start(&database);
    let (status, view) = again.get("/todo/groceries/view/open_items").await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view, expected);
    assert_ok(
        again
            .send("groceries", "complete_item", json!({"item": 2}), "done-2")
            .await,
    );
    let (_, view) = again.get("/todo/groceries/view/open_items").await;
    assert_eq!(view["state"]["open"], json!([]));
    assert!(again.stop().success());
}
