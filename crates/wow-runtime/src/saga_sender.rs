//! The gateway is where a running service's sagas send their commands.

use async_trait::async_trait;
use wow_core::command::{CommandResultError, JsonCommand};
use wow_core::saga::SagaSender;
use wow_core::CommandResult;

use crate::command::{CommandGateway, WaitPlan};

#[async_trait]
impl SagaSender for CommandGateway {
    async fn process(&self, command: JsonCommand) -> Result<CommandResult, CommandResultError> {
        self.send_and_wait(command, WaitPlan::processed()).await
    }
}
