//! SPEC DS-6 through the Rust client: a reader that is not the command's caller reads the
//! bank's view at least as fresh as a deposit, by its request id or its version, and is told
//! how far behind the view is when its wait runs out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::json;
use wow_client::{CommandRequest, Fresh, Outcome, ViewRead, WowClient};
use wow_core::{CommandStage, Stores};

const VIEW: (&str, &str, &str) = ("account", "acc-1", "account_balance");

/// Serves `running` on a free loopback port: its base URL, the sender that stops it, and its
/// task.
async fn served(
    running: wow_service::RunningService,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = running
            .serve_on(listener, async {
                let _ = stopped.await;
            })
            .await;
    });
    (base, stop, task)
}

#[tokio::test]
async fn a_reader_gets_the_view_at_least_as_fresh_as_the_append_it_names() {
    let running = wow_example_bank::service::service()
        .stores(Stores::in_memory())
        .build()
        .await
        .unwrap();
    let (base, stop, task) = served(running).await;

    let writer = WowClient::new(&base).unwrap();
    let open = CommandRequest::new(
        "account",
        "acc-1",
        "open",
        json!({"name": "Ann", "balance": 10}),
    )
    .request_id("open-acc-1");
    assert!(matches!(
        writer.send_safely(&open).await,
        Outcome::Completed(_)
    ));
    for n in 1..=10 {
        let request_id = format!("dep-{n}");
        let deposit = CommandRequest::new("account", "acc-1", "deposit", json!({"amount": 1}))
            .request_id(&request_id)
            .wait(CommandStage::Sent, Duration::from_secs(5));
        assert!(matches!(
            writer.send_safely(&deposit).await,
            Outcome::Completed(_)
        ));

        let reader = WowClient::new(&base).unwrap();
        let fresh = Fresh::Request(request_id);
        match reader
            .read_view(VIEW, None, Some((&fresh, Duration::from_secs(5))))
            .await
        {
            ViewRead::Row { version, state } => {
                assert!(version > n, "deposit {n}: version {version}");
                assert!(
                    state["balance"].as_i64().unwrap() >= 10 + n as i64,
                    "{state}"
                );
            }
            other => panic!("deposit {n}: {other:?}"),
        }
    }

    let reader = WowClient::new(&base).unwrap();
    let ahead = Fresh::Version(99);
    assert_eq!(
        reader
            .read_view(VIEW, None, Some((&ahead, Duration::from_millis(20))))
            .await,
        ViewRead::NotFresh {
            version: 11,
            wanted: Some(99)
        }
    );
    assert_eq!(
        reader
            .read_view(("account", "nobody", "account_balance"), None, None)
            .await,
        ViewRead::NotFound
    );
    the_cli_reads_at_least_as_fresh_as_an_append(&base).await;
    let _ = stop.send(());
    task.await.unwrap();
}

/// `wow view`: the row once it includes the append (exit 0), `NOT_FRESH` when the wait runs
/// out (exit 6), an error for no row (exit 1).
async fn the_cli_reads_at_least_as_fresh_as_an_append(base: &str) {
    let run = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            support::wow(&args)
        })
    };
    let view = |id: &str, fresh: &[&str]| {
        let mut args = vec!["view", "account", id, "account_balance", "--server", base];
        args.extend_from_slice(fresh);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let (code, out) = run(view("acc-1", &["--fresh-request", "dep-10"]))
        .await
        .unwrap();
    assert_eq!(code, 0, "{out}");
    let row: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (row["version"].as_u64(), row["state"]["balance"].as_i64()),
        (Some(11), Some(20))
    );
    let ahead = ["--fresh-version", "99", "--wait", "20"];
    let (code, out) = run(view("acc-1", &ahead)).await.unwrap();
    assert_eq!(code, 6, "{out}");
    let behind: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        behind,
        json!({"status": "NOT_FRESH", "version": 11, "wanted": 99})
    );
    let (code, _) = run(view("nobody", &[])).await.unwrap();
    assert_eq!(code, 1);
}

/// A view over several aggregate types, read through the Rust client: its rows once the view
/// has handled the append named of the aggregate `{aggregate}/{id}`, else `NotFresh`.
#[tokio::test]
async fn a_reader_gets_a_view_over_several_types_at_least_as_fresh_as_an_append() {
    let running = wow_example_booking::service::service()
        .stores(Stores::in_memory())
        .build()
        .await
        .unwrap();
    let (base, stop, task) = served(running).await;
    let client = WowClient::new(&base).unwrap();
    for n in 1..=5 {
        let (room, request_id) = (format!("r-{n}"), format!("open-r-{n}"));
        let open = CommandRequest::new("room", &room, "open", json!({"name": room, "rate": 100}))
            .request_id(&request_id)
            .wait(CommandStage::Sent, Duration::from_secs(5));
        assert!(matches!(
            client.send_safely(&open).await,
            Outcome::Completed(_)
        ));
        let fresh = Fresh::Request(request_id);
        let aggregate = format!("room/{room}");
        let read = client
            .read_view_rows(
                "room_schedule",
                &[("open", "true")],
                None,
                Some((&fresh, &aggregate, Duration::from_secs(5))),
            )
            .await;
        let ViewRead::Row { state, .. } = read else {
            panic!("room {n}: {read:?}");
        };
        assert_eq!(state["rows"].as_array().unwrap().len(), n, "{state}");
    }
    let ahead = Fresh::Version(99);
    let read = client
        .read_view_rows(
            "room_schedule",
            &[],
            None,
            Some((&ahead, "room/r-1", Duration::from_millis(20))),
        )
        .await;
    assert_eq!(
        read,
        ViewRead::NotFresh {
            version: 1,
            wanted: Some(99)
        }
    );
    let _ = stop.send(());
    task.await.unwrap();
}
