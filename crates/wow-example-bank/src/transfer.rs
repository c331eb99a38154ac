//! The `transfer` saga: after `TransferPrepared`, credit the target, then confirm the
//! transfer at the source, or cancel it when the target is missing, frozen or full.
//!
//! Every command it sends carries a request id derived from the event, so a redelivered
//! `TransferPrepared` resends the same intents and they come back as duplicates, never as a
//! second transfer.

use async_trait::async_trait;
use wow_core::command::CommandResultError;
use wow_core::event::ConsumerError;
use wow_core::saga::{Saga, SagaContext};
use wow_core::{AggregateId, CommandMessage, DomainEvent, DomainEventStream, ErrorCode};

use crate::account::{AccountCommand, AccountEvent, ReceiveTransfer, Transfer, TransferStep};

/// The saga.
#[derive(Debug)]
pub struct TransferSaga;

fn failed(error: impl std::fmt::Display, code: ErrorCode) -> ConsumerError {
    ConsumerError::new(code, error.to_string())
}

fn to_json(
    aggregate: AggregateId,
    command: AccountCommand,
) -> Result<wow_core::command::JsonCommand, ConsumerError> {
    CommandMessage::of(aggregate, command)
        .into_json()
        .map_err(|e| failed(e, ErrorCode::InternalServerError))
}

#[async_trait]
impl Saga for TransferSaga {
    fn name(&self) -> &str {
        "transfer"
    }

    async fn on_event(
        &self,
        event: &DomainEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        if event.name != "TransferPrepared" {
            return Ok(());
        }
        let AccountEvent::TransferPrepared(TransferStep {
            account: to,
            amount,
        }) = event
            .decode::<AccountEvent>()
            .map_err(|e| failed(e, ErrorCode::InternalServerError))?
        else {
            return Ok(());
        };
        let source = stream.aggregate_id.clone();
        let mut target = source.clone();
        target.id = to.clone();
        let receive = AccountCommand::ReceiveTransfer(ReceiveTransfer {
            from: source.id.clone(),
            amount,
        });
        let settle = match ctx.send(to_json(target, receive)?).await {
            Ok(_) => AccountCommand::ConfirmTransfer(Transfer { to, amount }),
            Err(CommandResultError::Failed(result))
                if result.error_code == ErrorCode::NotFound
                    || result.error_code == ErrorCode::domain("AccountFrozen")
                    || result.error_code == ErrorCode::domain("BalanceOverflow") =>
            {
                AccountCommand::CancelTransfer(Transfer { to, amount })
            }
            Err(error) => return Err(error.into()),
        };
        ctx.send(to_json(source, settle)?).await?;
        Ok(())
    }
}
