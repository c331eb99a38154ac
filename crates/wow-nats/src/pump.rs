//! Handing a partition's messages to the node, and telling a consumer that stopped hearing
//! from its server from one that merely has no work.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::stalled::StalledPartitions;

/// Reads in a row that brought only errors after which a consumer counts as stalled.
const STALLED_AFTER: u32 = 2;

/// How handing a stream of messages to the node ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pumped {
    /// The node no longer consumes the partition.
    Stopped,
    /// The stream ended.
    Ended,
    /// The server stopped sending heartbeats; `delivered` says whether any message came
    /// before.
    Stalled { delivered: bool },
}

/// Hands each read of `reads` (what was ready at once: messages and errors) to `handle`,
/// messages only, until `stop`, the end of the stream, or a stall: [`STALLED_AFTER`] reads
/// in a row that brought only errors (missed heartbeats, failed pull requests) with no quiet
/// stretch of three `heartbeat`s between them.
///
/// A missed-heartbeat error right after a long batch is not a stall: the messages that came
/// meanwhile follow it in the same read. `partition` leaves `stalled` once a message comes,
/// or once three heartbeats pass with no error (the server is heard, work or no work).
pub(crate) async fn pump<M, E, H, F>(
    partition: u32,
    mut reads: impl Stream<Item = Vec<Result<M, E>>> + Unpin,
    heartbeat: Duration,
    stalled: &StalledPartitions,
    stop: &CancellationToken,
    mut handle: H,
) -> Pumped
where
    E: Display,
    H: FnMut(Vec<M>) -> F,
    F: Future<Output = ()>,
{
    let quiet = heartbeat.saturating_mul(3);
    let mut failed_reads = 0u32;
    let mut delivered = false;
    let settled = tokio::time::sleep(quiet);
    tokio::pin!(settled);
    let mut settling = true;
    loop {
        let read = tokio::select! {
            biased;
            () = stop.cancelled() => return Pumped::Stopped,
            () = &mut settled, if settling => {
                settling = false;
                failed_reads = 0;
                stalled.clear(partition);
                continue;
            }
            read = reads.next() => read,
        };
        let Some(read) = read else {
            return Pumped::Ended;
        };
        let mut received = Vec::with_capacity(read.len());
        for message in read {
            match message {
                Ok(message) => received.push(message),
                Err(error) => tracing::warn!(%error, partition, "reading commands failed"),
            }
        }
        if received.is_empty() {
            failed_reads += 1;
            if failed_reads >= STALLED_AFTER {
                return Pumped::Stalled { delivered };
            }
            settled.as_mut().reset(tokio::time::Instant::now() + quiet);
            settling = true;
            continue;
        }
        failed_reads = 0;
        if !delivered {
            delivered = true;
            stalled.clear(partition);
        }
        tokio::select! {
            biased;
            () = stop.cancelled() => return Pumped::Stopped,
            () = handle(received) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use futures::channel::mpsc;

    use super::*;

    const HEARTBEAT: Duration = Duration::from_secs(1);

    type Read = Vec<Result<u32, String>>;

    fn missed() -> Result<u32, String> {
        Err("missed idle heartbeat".to_owned())
    }

    /// Pumps what `reads` sends, recording what was handed on.
    fn pumping(
        stalled: StalledPartitions,
        stop: CancellationToken,
    ) -> (
        mpsc::UnboundedSender<Read>,
        Arc<Mutex<Vec<u32>>>,
        tokio::task::JoinHandle<Pumped>,
    ) {
        let (reads, received) = mpsc::unbounded();
        let handled = Arc::new(Mutex::new(Vec::new()));
        let recorded = handled.clone();
        let task = tokio::spawn(async move {
            pump(
                7,
                received,
                HEARTBEAT,
                &stalled,
                &stop,
                |batch: Vec<u32>| {
                    recorded.lock().unwrap().extend(batch);
                    async {}
                },
            )
            .await
        });
        (reads, handled, task)
    }

    #[tokio::test(start_paused = true)]
    async fn two_reads_of_errors_only_in_a_row_are_a_stall() {
        let stalled = StalledPartitions::default();
        let (reads, handled, task) = pumping(stalled.clone(), CancellationToken::new());
        reads.unbounded_send(vec![Ok(1), Ok(2)]).unwrap();
        reads.unbounded_send(vec![missed()]).unwrap();
        reads.unbounded_send(vec![missed()]).unwrap();
        assert_eq!(task.await.unwrap(), Pumped::Stalled { delivered: true });
        assert_eq!(*handled.lock().unwrap(), [1, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_missed_heartbeat_followed_by_messages_is_not_a_stall() {
        let stalled = StalledPartitions::default();
        let stop = CancellationToken::new();
        let (reads, handled, task) = pumping(stalled.clone(), stop.clone());
        // What a long batch leaves: the heartbeat timer ran out, the messages came meanwhile.
        reads.unbounded_send(vec![missed(), Ok(1)]).unwrap();
        reads.unbounded_send(vec![missed()]).unwrap();
        reads.unbounded_send(vec![Ok(2)]).unwrap();
        reads.unbounded_send(vec![missed()]).unwrap();
        tokio::time::sleep(HEARTBEAT * 10).await;
        stop.cancel();
        assert_eq!(task.await.unwrap(), Pumped::Stopped);
        assert_eq!(*handled.lock().unwrap(), [1, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn errors_apart_by_a_quiet_stretch_are_not_a_stall() {
        let stalled = StalledPartitions::default();
        let stop = CancellationToken::new();
        let (reads, _, task) = pumping(stalled.clone(), stop.clone());
        for _ in 0..3 {
            reads.unbounded_send(vec![missed()]).unwrap();
            tokio::time::sleep(HEARTBEAT * 4).await;
        }
        stop.cancel();
        assert_eq!(task.await.unwrap(), Pumped::Stopped);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_partition_is_cleared_once_its_server_is_heard_again() {
        let stalled = StalledPartitions::default();
        stalled.mark(7);
        let stop = CancellationToken::new();
        let (_reads, _, task) = pumping(stalled.clone(), stop.clone());
        tokio::time::sleep(HEARTBEAT * 2).await;
        assert_eq!(
            stalled.now(),
            [7],
            "not cleared before three quiet heartbeats"
        );
        tokio::time::sleep(HEARTBEAT * 2).await;
        assert!(stalled.is_empty(), "cleared after three quiet heartbeats");
        stop.cancel();
        assert_eq!(task.await.unwrap(), Pumped::Stopped);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_partition_is_cleared_by_a_message() {
        let stalled = StalledPartitions::default();
        stalled.mark(7);
        let stop = CancellationToken::new();
        let (reads, handled, task) = pumping(stalled.clone(), stop.clone());
        reads.unbounded_send(vec![Ok(1)]).unwrap();
        tokio::time::timeout(HEARTBEAT, async {
            while !stalled.is_empty() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        stop.cancel();
        assert_eq!(task.await.unwrap(), Pumped::Stopped);
        assert_eq!(*handled.lock().unwrap(), [1]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_end_of_the_stream_is_told_from_a_stall() {
        let stalled = StalledPartitions::default();
        let (reads, _, task) = pumping(stalled, CancellationToken::new());
        drop(reads);
        assert_eq!(task.await.unwrap(), Pumped::Ended);
    }
}
