//! A chained wait's handle (Wow's `Command-Wait-Tail-*`): the signals of the commands a saga
//! sent are held until the saga's own signal names them, then yielded in stage order per
//! command; the chain ends when every one reached the tail, at the first that failed, or at
//! the saga's signal when it sent nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use wow_core::command::{CommandKind, CommandMessage, CommandResult, CommandStage, FunctionInfo};
use wow_core::{AggregateId, ErrorCode};
use wow_runtime::command::{WaitCoordinator, WaitHandle, WaitNotifier, WaitPlan, WaitTail};

fn command(id: &str) -> CommandMessage<()> {
    CommandMessage::new(
        AggregateId::new("bank", "account", id, "t"),
        "transfer",
        CommandKind::Normal,
        (),
    )
}

/// A signal of `link`, a command the saga sent, as its components copy it to `waiting`.
fn linked(link: &CommandMessage<()>, waiting: &str, stage: CommandStage) -> CommandResult {
    let mut result = CommandResult::success(link, stage);
    result.wait_command_id = waiting.to_owned();
    result
}

fn saga_signal(main: &CommandMessage<()>, sent: &[&CommandMessage<()>]) -> CommandResult {
    let commands: Vec<_> = sent.iter().map(|c| json!({"commandId": c.id})).collect();
    CommandResult::success(main, CommandStage::SagaHandled)
        .with_function(FunctionInfo::event("bank", "transfer"))
        .with_result("commands", commands)
}

fn chain_plan() -> WaitPlan {
    WaitPlan::new(CommandStage::SagaHandled)
        .for_function("transfer")
        .with_tail(WaitTail::new(CommandStage::Projected))
}

async fn drain(handle: &mut WaitHandle) -> Vec<(String, CommandStage)> {
    let mut seen = Vec::new();
    while let Some(result) = handle.next().await {
        seen.push((result.aggregate_id, result.stage));
    }
    seen
}

#[tokio::test]
async fn links_signalled_before_the_saga_are_held_then_yielded_in_stage_order() {
    let coordinator = WaitCoordinator::new();
    let (main, to_b, to_a) = (command("a"), command("b"), command("a2"));
    let other_saga = command("c");
    let mut handle = coordinator.register(&main.id, chain_plan());
    coordinator.notify(CommandResult::success(&main, CommandStage::Sent));
    coordinator.notify(CommandResult::success(&main, CommandStage::Processed));
    // The links' signals race the saga's own: a PROJECTED before its PROCESSED, and a
    // command of another saga on the same stream.
    coordinator.notify(linked(&to_b, &main.id, CommandStage::Projected));
    coordinator.notify(linked(&to_b, &main.id, CommandStage::Processed));
    coordinator.notify(linked(&other_saga, &main.id, CommandStage::Processed));
    coordinator.notify(linked(&to_a, &main.id, CommandStage::Processed));
    coordinator.notify(saga_signal(&main, &[&to_b, &to_a]));
    coordinator.notify(linked(&to_a, &main.id, CommandStage::Projected));
    let seen = drain(&mut handle).await;
    let stages = |id: &str| -> Vec<CommandStage> {
        seen.iter()
            .filter(|(a, _)| a == id)
            .map(|(_, s)| *s)
            .collect()
    };
    assert_eq!(
        stages("a"),
        [
            CommandStage::Sent,
            CommandStage::Processed,
            CommandStage::SagaHandled
        ]
    );
    assert_eq!(
        stages("b"),
        [CommandStage::Processed, CommandStage::Projected]
    );
    assert_eq!(
        stages("a2"),
        [CommandStage::Processed, CommandStage::Projected]
    );
    assert!(
        stages("c").is_empty(),
        "another saga's command is no link: {seen:?}"
    );
    let saga_at = seen
        .iter()
        .position(|(_, s)| *s == CommandStage::SagaHandled);
    assert_eq!(saga_at, Some(2), "links follow the saga's signal: {seen:?}");
    assert_eq!(seen.last().map(|(_, s)| *s), Some(CommandStage::Projected));
}

#[tokio::test]
async fn the_chain_waits_for_every_link_and_ends_at_a_failed_one() {
    let coordinator = WaitCoordinator::new();
    let (main, to_b, to_a) = (command("a"), command("b"), command("a2"));
    let mut handle = coordinator.register(&main.id, chain_plan());
    coordinator.notify(CommandResult::success(&main, CommandStage::Sent));
    coordinator.notify(CommandResult::success(&main, CommandStage::Processed));
    coordinator.notify(saga_signal(&main, &[&to_b, &to_a]));
    coordinator.notify(linked(&to_a, &main.id, CommandStage::Processed));
    coordinator.notify(linked(&to_a, &main.id, CommandStage::Projected));
    for _ in 0..5 {
        assert!(handle.next().await.is_some());
    }
    assert!(!handle.is_finished(), "one link has not reached the tail");
    let mut failed =
        CommandResult::failure(&to_b, CommandStage::Processed, ErrorCode::NotFound, "none");
    failed.wait_command_id = main.id.clone();
    coordinator.notify(failed);
    let last = handle.next().await.unwrap();
    assert!(handle.is_finished());
    assert_eq!((last.aggregate_id.as_str(), last.succeeded), ("b", false));
    assert!(handle.next().await.is_none());
}

#[tokio::test]
async fn a_saga_that_sent_nothing_ends_the_chain_at_its_signal() {
    let coordinator = WaitCoordinator::new();
    let main = command("a");
    let mut handle = coordinator.register(&main.id, chain_plan());
    coordinator.notify(CommandResult::success(&main, CommandStage::Sent));
    coordinator.notify(CommandResult::success(&main, CommandStage::Processed));
    coordinator.notify(saga_signal(&main, &[]));
    let seen = drain(&mut handle).await;
    assert_eq!(
        seen.last().map(|(_, s)| *s),
        Some(CommandStage::SagaHandled)
    );
}
