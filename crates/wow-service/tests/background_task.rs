//! A team's background task runs beside the service, sends commands through its gateway,
//! and is stopped with it: asked first, cut off if it does not return.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use wow_core::aggregate::Aggregate;
use wow_core::testing_example::{Counter, CounterCommand};
use wow_core::CommandMessage;
use wow_runtime::command::WaitPlan;
use wow_service::Service;

#[tokio::test]
async fn a_background_task_sends_commands_and_stops_with_the_service() {
    let (started, stopped) = (
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let (task_started, task_stopped) = (started.clone(), stopped.clone());
    let running = Service::builder()
        .aggregate::<Counter>()
        .store("memory://")
        .background_task("starter", move |ctx| async move {
            let id = Counter::named_aggregate().aggregate_id("c-1", "t1");
            let start = CommandMessage::of(id, CounterCommand::Start)
                .into_json()
                .unwrap();
            ctx.gateway
                .send_and_wait(start, WaitPlan::processed())
                .await
                .unwrap();
            task_started.fetch_add(1, Ordering::SeqCst);
            ctx.shutdown().await;
            task_stopped.store(true, Ordering::SeqCst);
        })
        .build()
        .await
        .unwrap();
    let id = Counter::named_aggregate().aggregate_id("c-1", "t1");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while running.stores().events.last(&id).await.unwrap().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task never sent"
        );
        tokio::task::yield_now().await;
    }
    assert!(!stopped.load(Ordering::SeqCst));
    running.stop().await;
    assert_eq!(started.load(Ordering::SeqCst), 1);
    assert!(
        stopped.load(Ordering::SeqCst),
        "stop waits for the task to return"
    );
}

#[tokio::test(start_paused = true)]
async fn a_task_that_ignores_the_shutdown_is_cut_off_and_the_service_stops() {
    let running = Service::builder()
        .aggregate::<Counter>()
        .store("memory://")
        .background_task("stubborn", |_ctx| async move {
            std::future::pending::<()>().await;
        })
        .background_task("panics", |_ctx| async move {
            panic!("a task's own bug");
        })
        .build()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), running.stop())
        .await
        .expect("stop returns once the grace period runs out");
}
