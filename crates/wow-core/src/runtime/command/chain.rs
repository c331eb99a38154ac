//! Chained waits, as Wow's `Command-Wait-Tail-*` headers ask for them: wait until a saga has
//! handled a command's stream (`SAGA_HANDLED`), then until every command that saga sent has
//! reached a tail stage (say `PROJECTED` of the target's view).
//!
//! How the signals find the caller:
//!
//! - The gateway writes the tail into the command's header ([`TAIL_STAGE_HEADER`], ...), and
//!   the command's stream inherits the header.
//! - A saga handling that stream marks each command it sends as a link of the chain
//!   ([`link_headers`]): the waiting command's id, the tail stage, and (in the distributed
//!   mode) the subject where the waiting gateway listens.
//! - Every component that signals a stage of a linked command delivers the signal twice
//!   ([`notify_signal`]): to the command's own waiter (the saga) and to the chain's waiter.
//! - The chain's wait handle holds the links' signals until the saga's own signal says which
//!   commands it sent, then yields them in stage order per command ([`ChainProgress`]).
//!
//! A lost link signal costs the chain's caller a timeout, as any lost signal does: it looks
//! the outcome up by request id. Nothing of the commands themselves depends on the chain.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::command::{CommandResult, CommandStage, WaitFunction};

use super::wait::{WaitNotifier, WaitPlan};

/// The command header with the tail stage of the command's chained wait.
pub const TAIL_STAGE_HEADER: &str = "wow.wait.tail_stage";
/// The command header with the tail's bounded context (absent: any).
pub const TAIL_CONTEXT_HEADER: &str = "wow.wait.tail_context";
/// The command header with the tail's processor (absent: the whole tail stage).
pub const TAIL_PROCESSOR_HEADER: &str = "wow.wait.tail_processor";
/// The command header with the tail's function (absent: any).
pub const TAIL_FUNCTION_HEADER: &str = "wow.wait.tail_function";
/// On a command a saga sent: the id of the command whose chained wait it belongs to.
pub const CHAIN_HEADER: &str = "wow.wait.chain";
/// On a command a saga sent: the last stage the chain's waiter needs signals of.
pub const CHAIN_STAGE_HEADER: &str = "wow.wait.chain_stage";
/// On a command a saga sent: where the chain's waiter listens (the distributed mode).
pub const CHAIN_REPLY_HEADER: &str = "wow.wait.chain_reply";
/// The command header naming where a command's signals go in the distributed mode (the
/// subject its gateway listens on); the NATS command bus writes it.
pub const WAIT_REPLY_HEADER: &str = "wow.wait.reply";

type Header = BTreeMap<String, String>;

/// The tail of a chained wait: the stage, and optionally the consumer, that every command
/// the saga sent must reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitTail {
    /// The stage each of the saga's commands must reach.
    pub stage: CommandStage,
    /// The consumer of that stage whose signal counts; `None`: the whole stage.
    pub function: Option<WaitFunction>,
}

impl WaitTail {
    /// Every command the saga sends must reach `stage`.
    pub fn new(stage: CommandStage) -> Self {
        Self {
            stage,
            function: None,
        }
    }

    /// The signal of the consumer `function` matches counts (a downstream stage only).
    pub fn for_wait_function(mut self, function: WaitFunction) -> Self {
        self.function = Some(function);
        self
    }

    /// Writes the tail into a command's header.
    pub(crate) fn write(&self, header: &mut Header) {
        header.insert(TAIL_STAGE_HEADER.to_owned(), self.stage.as_str().to_owned());
        if let Some(function) = &self.function {
            for (key, part) in [
                (TAIL_CONTEXT_HEADER, &function.context),
                (TAIL_PROCESSOR_HEADER, &function.processor),
                (TAIL_FUNCTION_HEADER, &function.name),
            ] {
                if !part.is_empty() {
                    header.insert(key.to_owned(), part.clone());
                }
            }
        }
    }

    /// The plan one of the saga's commands is waited under.
    fn plan(&self) -> WaitPlan {
        WaitPlan {
            stage: self.stage,
            timeout: super::wait::DEFAULT_WAIT_TIMEOUT,
            function: self.function.clone(),
            tail: None,
        }
    }
}

/// The headers a saga puts on a command it sends while handling a stream with `stream_header`
/// of the command `command_id`: empty unless that command waits with a tail.
pub(crate) fn link_headers(stream_header: &Header, command_id: &str) -> Vec<(String, String)> {
    let Some(stage) = stream_header.get(TAIL_STAGE_HEADER) else {
        return Vec::new();
    };
    let mut link = vec![
        (CHAIN_HEADER.to_owned(), command_id.to_owned()),
        (CHAIN_STAGE_HEADER.to_owned(), stage.clone()),
    ];
    if let Some(reply) = stream_header.get(WAIT_REPLY_HEADER) {
        link.push((CHAIN_REPLY_HEADER.to_owned(), reply.clone()));
    }
    link
}

/// The last stage a chain's waiter needs signals of, for a command or stream with `header`.
pub(crate) fn chain_stage(header: &Header) -> Option<CommandStage> {
    header.get(CHAIN_HEADER)?;
    header.get(CHAIN_STAGE_HEADER)?.parse().ok()
}

/// Delivers `result`, a signal of the command or stream with `header`, to its own waiter and,
/// when the command is a link of a chained wait, to the chain's waiter too.
pub(crate) fn notify_signal(notifier: &dyn WaitNotifier, header: &Header, result: CommandResult) {
    if let (Some(waiting), Some(stage)) = (header.get(CHAIN_HEADER), chain_stage(header)) {
        if result.stage <= stage {
            let mut linked = result.clone();
            linked.wait_command_id = waiting.clone();
            notifier.notify(linked);
        }
    }
    notifier.notify(result);
}

/// Where a chained wait stands, as its handle sees it: the saga's own signal not yet seen,
/// then the commands it sent, each until its tail signal.
#[derive(Debug)]
pub(crate) struct ChainProgress {
    tail: WaitTail,
    /// `None` until the saga's signal was yielded; then the commands still awaited.
    awaited: Option<BTreeSet<String>>,
    /// The linked commands whose `PROCESSED` was yielded (their later stages may follow).
    processed: BTreeSet<String>,
}

impl ChainProgress {
    pub(crate) fn new(tail: WaitTail) -> Self {
        Self {
            tail,
            awaited: None,
            processed: BTreeSet::new(),
        }
    }

    /// Whether a link's `result` may be yielded now; `None`: it belongs to no command of
    /// this chain (another saga's, once the awaited saga's commands are known) and is dropped.
    pub(crate) fn releasable(&self, result: &CommandResult) -> Option<bool> {
        let Some(awaited) = &self.awaited else {
            return Some(false);
        };
        if !awaited.contains(&result.command_id) {
            return None;
        }
        Some(result.stage <= CommandStage::Processed || self.processed.contains(&result.command_id))
    }

    /// Takes the saga's signal: whether the chain is complete with it (the saga failed or
    /// sent nothing, or the tail is `SENT`, which every command it sent has reached).
    pub(crate) fn on_saga_signal(&mut self, result: &CommandResult) -> bool {
        let sent: BTreeSet<String> = result
            .result
            .get("commands")
            .and_then(|commands| commands.as_array())
            .map(|commands| {
                commands
                    .iter()
                    .filter_map(|command| command.get("commandId")?.as_str())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let complete =
            !result.succeeded || sent.is_empty() || self.tail.stage == CommandStage::Sent;
        self.awaited = Some(sent);
        complete
    }

    /// Takes a link's signal: whether the chain is complete with it (every command reached
    /// the tail, or one of them failed on the way).
    pub(crate) fn on_link_signal(&mut self, result: &CommandResult) -> bool {
        if result.stage >= CommandStage::Processed {
            self.processed.insert(result.command_id.clone());
        }
        let Some(awaited) = &mut self.awaited else {
            return false;
        };
        if self.tail.plan().is_final(result) {
            if !result.succeeded {
                return true;
            }
            awaited.remove(&result.command_id);
        }
        awaited.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::aggregate_id::AggregateId;
    use crate::model::command::{CommandKind, CommandMessage, FunctionInfo};
    use crate::model::error_code::ErrorCode;
    use crate::runtime::command::WaitCoordinator;

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

    async fn drain(
        handle: &mut crate::runtime::command::WaitHandle,
    ) -> Vec<(String, CommandStage)> {
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
        handle.push(CommandResult::success(&main, CommandStage::Sent));
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
        handle.push(CommandResult::success(&main, CommandStage::Sent));
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
        handle.push(CommandResult::success(&main, CommandStage::Sent));
        coordinator.notify(CommandResult::success(&main, CommandStage::Processed));
        coordinator.notify(saga_signal(&main, &[]));
        let seen = drain(&mut handle).await;
        assert_eq!(
            seen.last().map(|(_, s)| *s),
            Some(CommandStage::SagaHandled)
        );
    }

    #[test]
    fn a_saga_links_its_commands_only_to_a_command_with_a_tail() {
        let mut header = Header::new();
        assert!(link_headers(&header, "c-1").is_empty());
        WaitTail::new(CommandStage::Projected)
            .for_wait_function(WaitFunction::processor("account_balance"))
            .write(&mut header);
        header.insert(WAIT_REPLY_HEADER.to_owned(), "wow.wait.gw".to_owned());
        let link: Header = link_headers(&header, "c-1").into_iter().collect();
        assert_eq!(link.get(CHAIN_HEADER).map(String::as_str), Some("c-1"));
        assert_eq!(chain_stage(&link), Some(CommandStage::Projected));
        assert_eq!(
            link.get(CHAIN_REPLY_HEADER).map(String::as_str),
            Some("wow.wait.gw")
        );
        assert!(
            !link.contains_key(TAIL_STAGE_HEADER),
            "links do not chain on"
        );
    }
}
