//! The `transfer` saga: after `TransferPrepared`, credit the target, then confirm the
//! transfer at the source, or cancel it when the target is missing, frozen or full.
//!
//! Every command it sends carries a request id derived from the event, so a redelivered
//! `TransferPrepared` resends the same intents and they come back as duplicates (or as the
//! same recorded rejection), never as a second transfer. The saga reads the account's typed
//! events and the target's typed rejections: no event or error is matched by its name.

use wow_core::event::ConsumerError;
use wow_core::saga::{Saga, SagaContext, StepError};
use wow_core::DomainEventStream;

use crate::account::{
    Account, AccountCommand, AccountErrorKind, AccountEvent, ReceiveTransfer, Transfer,
    TransferStep,
};

/// The saga.
#[derive(Debug)]
pub struct TransferSaga;

#[wow_core::async_trait]
impl Saga for TransferSaga {
    type Aggregate = Account;

    fn name(&self) -> &str {
        "transfer"
    }

    /// A transfer credits the target account whoever owns it (SPEC TN-2): paying another
    /// customer is what a transfer is for. The owner's own check holds on the source: only
    /// its owner (or a caller of the whole tenant) prepares a transfer from it.
    fn acts_across_owners(&self) -> bool {
        true
    }

    async fn on_event(
        &self,
        event: &AccountEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let AccountEvent::TransferPrepared(TransferStep {
            account: to,
            amount,
        }) = event
        else {
            return Ok(());
        };
        let (to, amount) = (to.clone(), *amount);
        let source = stream.aggregate_id.clone();
        let mut target = source.clone();
        target.id = to.clone();
        let receive = AccountCommand::ReceiveTransfer(ReceiveTransfer {
            from: source.id.clone(),
            amount,
        });
        let settle = match ctx.send_to::<Account>(target, receive).await {
            Ok(_) => AccountCommand::ConfirmTransfer(Transfer { to, amount }),
            // The target cannot take it, for good: release the hold.
            Err(StepError::NotFound(_))
            | Err(StepError::Rejected {
                kind: AccountErrorKind::AccountFrozen | AccountErrorKind::BalanceOverflow,
                ..
            }) => AccountCommand::CancelTransfer(Transfer { to, amount }),
            Err(error) => return Err(error.into()),
        };
        ctx.send_to::<Account>(source, settle).await?;
        Ok(())
    }
}
