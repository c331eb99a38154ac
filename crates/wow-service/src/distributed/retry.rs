//! Start-up steps that need NATS, tried again with backoff while the failure is one that
//! time can mend (a server away, no stream leader yet) instead of ending the process.

use std::future::Future;
use std::time::Duration;

use wow_nats::NatsError;

/// The first pause after a failed attempt.
const FIRST_PAUSE: Duration = Duration::from_millis(250);

/// The longest pause between attempts.
const LONGEST_PAUSE: Duration = Duration::from_secs(5);

/// Runs `attempt` until it succeeds or fails with an error that is not
/// [transient](NatsError::is_transient), pausing between attempts from 250 ms, doubling, up
/// to 5 s. Each failure is logged with `what` was being done.
///
/// # Cancel safety
///
/// Cancel safe when each attempt is: dropping the future drops the attempt in flight.
pub(super) async fn with_backoff<T, F, Fut>(what: &str, mut attempt: F) -> Result<T, NatsError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, NatsError>>,
{
    let mut pause = FIRST_PAUSE;
    let mut attempts = 1u32;
    loop {
        match attempt().await {
            Ok(value) => {
                if attempts > 1 {
                    tracing::info!(what, attempts, "done after retrying");
                }
                return Ok(value);
            }
            Err(error) if error.is_transient() => {
                let retry_in_ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX);
                tracing::warn!(what, attempts, %error, retry_in_ms, "NATS is not ready; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LONGEST_PAUSE);
                attempts = attempts.saturating_add(1);
            }
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn retries_a_transient_failure_until_it_succeeds() {
        let calls = AtomicU32::new(0);
        let result = with_backoff("test", || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 3 {
                Err(NatsError::Stream {
                    stream: "S".into(),
                    source: "no leader".into(),
                })
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(result.ok(), Some(7));
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_at_once_on_a_settings_error() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = with_backoff("test", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(NatsError::Config("bad".into()))
        })
        .await;
        assert!(matches!(result, Err(NatsError::Config(_))));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
