//! SPEC DS-6 through the Rust client: a reader that is not the command's caller reads the
//! bank's view at least as fresh as a deposit, by its request id or its version, and is told
//! how far behind the view is when its wait runs out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;
use wow_client::{CommandRequest, Fresh, Outcome, ViewRead, WowClient};
use wow_core::{CommandStage, Stores};

const VIEW: (&str, &str, &str) = ("account", "acc-1", "account_balance");

#[tokio::test]
async fn a_reader_gets_the_view_at_least_as_fresh_as_the_append_it_names() {
    let running = wow_example_bank::service::service()
        .stores(Stores::in_memory())
        .build()
        .await
        .unwrap();
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
    let _ = stop.send(());
    task.await.unwrap();
}
