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

use wow_core::command::{CommandResult, CommandStage, WaitFunction};

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

/// Where a chained wait stands, as its handle sees it: the saga's own signal not yet seen,
/// then the commands it sent, each until its tail signal.
#[derive(Debug)]
pub(crate) struct ChainProgress {
    tail: CommandStage,
    /// `None` until the saga's signal was yielded; then the commands still awaited.
    awaited: Option<BTreeSet<String>>,
    /// The linked commands whose `PROCESSED` was yielded (their later stages may follow).
    processed: BTreeSet<String>,
}

impl ChainProgress {
    pub(crate) fn new(tail: &WaitTail) -> Self {
        Self {
            tail: tail.stage,
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
        let complete = !result.succeeded || sent.is_empty() || self.tail == CommandStage::Sent;
        self.awaited = Some(sent);
        complete
    }

    /// Takes a link's signal, `last` when it ends that command's wait under the tail: whether
    /// the chain is complete with it (every command reached the tail, or one of them failed on
    /// the way).
    pub(crate) fn on_link_signal(&mut self, result: &CommandResult, last: bool) -> bool {
        if result.stage >= CommandStage::Processed {
            self.processed.insert(result.command_id.clone());
        }
        let Some(awaited) = &mut self.awaited else {
            return false;
        };
        if last {
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
    use super::*;

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
