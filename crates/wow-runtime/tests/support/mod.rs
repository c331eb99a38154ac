//! The example `account` aggregate of wow-core's tests, and helpers to run it through the
//! gateway.
#![allow(dead_code, unreachable_pub, missing_docs, clippy::expect_used)]

#[path = "../../../wow-core/tests/support/mod.rs"]
mod domain;

pub use domain::*;

use wow_core::command::JsonCommand;
use wow_core::{AggregateId, CommandResult};
use wow_runtime::command::{CommandGateway, WaitPlan};

/// Sends `command` through `gateway` and waits for PROCESSED; panics unless it succeeded.
pub async fn send_ok(gateway: &CommandGateway, command: JsonCommand) -> CommandResult {
    gateway
        .send_and_wait(command, WaitPlan::processed())
        .await
        .expect("the command succeeds")
}

/// A fresh account in `t1`, opened with `balance` through `gateway`.
pub async fn opened(gateway: &CommandGateway, balance: u64) -> AggregateId {
    let id = account_id();
    send_ok(gateway, open(&id, balance)).await;
    id
}
