//! The shares and the budget of the heavy reads, apart from how a request finds its own
//! (the parent module's extractor): what the server's state holds.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use tokio::time::Instant;
use wow_core::query::{SharePlace, TenantShare};
use wow_core::ErrorCode;

use crate::config::ReadLimits;
use crate::error::ApiError;

/// The address of the client a request came from, as [`serve`](crate::serve) accepted it.
/// Absent when the router is served otherwise (axum's own `serve`, a test calling it
/// directly): then axum's `ConnectInfo<SocketAddr>` stands for it when the server gives one,
/// and a request from no known address holds a place in its tenant's share only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeerAddr(pub(crate) SocketAddr);

/// The shares the heavy reads hold places in.
#[derive(Debug)]
pub(crate) struct ReadGate {
    tenants: TenantShare,
    peers: TenantShare,
    limits: ReadLimits,
}

impl ReadGate {
    /// The gate of `limits`.
    pub(crate) fn new(limits: ReadLimits) -> Self {
        Self {
            tenants: TenantShare::new(limits.per_tenant, limits.wait),
            peers: TenantShare::new(limits.per_peer, limits.wait),
            limits,
        }
    }

    /// A place for one heavy read of `tenant` from `peer`; 429 `TooManyRequests` (with
    /// `Retry-After`) when either share stayed full for the whole wait.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped wait holds no place.
    pub(crate) async fn enter(
        &self,
        tenant: &str,
        peer: Option<IpAddr>,
    ) -> Result<ReadPlace, ApiError> {
        let by_peer = match peer {
            Some(peer) => Some(
                self.peers
                    .enter(&peer.to_string())
                    .await
                    .map_err(|_| busy(format!("this client ({peer}) already runs {} heavy reads (queries, history ranges, time travel) at once; try again shortly", self.limits.per_peer)))?,
            ),
            None => None,
        };
        let by_tenant = self
            .tenants
            .enter(tenant)
            .await
            .map_err(|_| busy(format!("this tenant already runs {} heavy reads (queries, history ranges, time travel) at once; try again shortly", self.limits.per_tenant)))?;
        Ok(ReadPlace {
            held: Arc::new((by_tenant, by_peer)),
            deadline: Instant::now() + self.limits.budget,
            budget: self.limits.budget,
        })
    }
}

/// 429 `TooManyRequests`, try again in a second.
fn busy(message: String) -> ApiError {
    ApiError::read(
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::TooManyRequests,
        message,
    )
    .with_header(header::RETRY_AFTER, HeaderValue::from_static("1"))
}

/// One heavy read's place in its tenant's and its peer's shares, and the time it has left.
/// The places are given back when the read and any shaping it started have ended.
#[derive(Debug)]
pub(crate) struct ReadPlace {
    held: Arc<(SharePlace, Option<SharePlace>)>,
    deadline: Instant,
    budget: Duration,
}

impl ReadPlace {
    /// `work` (the read's store calls), stopped at the read's deadline: 503 `QueryTimeout`.
    pub(crate) async fn within<T>(
        &self,
        work: impl Future<Output = Result<T, ApiError>>,
    ) -> Result<T, ApiError> {
        tokio::time::timeout_at(self.deadline, work)
            .await
            .unwrap_or_else(|_| Err(self.timed_out()))
    }

    /// `shape` run on the blocking pool, given a [`Budget`] to check between steps; answered
    /// 503 `QueryTimeout` at the read's deadline. The places stay held until `shape` returns.
    pub(crate) async fn shaped<T, F>(&self, shape: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Budget) -> Result<T, ApiError> + Send + 'static,
    {
        let held = self.held.clone();
        let budget = Budget {
            deadline: self.deadline,
            budget: self.budget,
        };
        let shaping = tokio::task::spawn_blocking(move || {
            let _held = held;
            shape(&budget)
        });
        match tokio::time::timeout_at(self.deadline, shaping).await {
            Ok(Ok(shaped)) => shaped,
            Ok(Err(panicked)) => {
                tracing::error!(error = %panicked, "shaping a read's answer panicked");
                Err(ApiError::read(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    ErrorCode::InternalServerError,
                    "shaping the answer failed; the server's log has the details",
                ))
            }
            Err(_) => Err(self.timed_out()),
        }
    }

    fn timed_out(&self) -> ApiError {
        timed_out(self.budget)
    }
}

/// The time a read's shaping has left: checked between steps, so that work past the deadline
/// stops instead of running on for nobody.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    deadline: Instant,
    budget: Duration,
}

impl Budget {
    /// 503 `QueryTimeout` once the read's deadline has passed.
    pub(crate) fn check(&self) -> Result<(), ApiError> {
        if Instant::now() >= self.deadline {
            return Err(timed_out(self.budget));
        }
        Ok(())
    }
}

/// 503 `QueryTimeout`: the read ran past `budget`.
fn timed_out(budget: Duration) -> ApiError {
    ApiError::read(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::QueryTimeout,
        format!(
            "the read ran past its time budget of {} ms and was stopped; a narrower read answers",
            budget.as_millis()
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const ONE: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    const TWO: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));

    fn gate(per_tenant: usize, per_peer: usize) -> ReadGate {
        ReadGate::new(ReadLimits {
            per_tenant,
            per_peer,
            wait: Duration::from_millis(20),
            budget: Duration::from_secs(60),
        })
    }

    fn status(refused: Result<ReadPlace, ApiError>) -> (StatusCode, String) {
        let response = axum::response::IntoResponse::into_response(refused.unwrap_err());
        let retry = response
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap_or_default().to_owned())
            .unwrap_or_default();
        (response.status(), retry)
    }

    #[tokio::test]
    async fn a_peer_naming_many_tenants_holds_only_its_own_share() {
        let gate = gate(2, 2);
        let _a = gate.enter("attacker-1", ONE).await.unwrap();
        let _b = gate.enter("attacker-2", ONE).await.unwrap();
        assert_eq!(
            status(gate.enter("attacker-3", ONE).await),
            (StatusCode::TOO_MANY_REQUESTS, "1".to_owned()),
            "a third tenant from the same peer waits, then is refused"
        );
        let _victim = gate.enter("victim", TWO).await.unwrap();
    }

    #[tokio::test]
    async fn a_tenant_from_many_peers_holds_only_its_share() {
        let gate = gate(2, 2);
        let _a = gate.enter("attacker", ONE).await.unwrap();
        let _b = gate.enter("attacker", TWO).await.unwrap();
        assert_eq!(
            status(
                gate.enter("attacker", Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))))
                    .await
            )
            .0,
            StatusCode::TOO_MANY_REQUESTS
        );
        let _victim = gate.enter("victim", None).await.unwrap();
    }

    #[tokio::test]
    async fn a_place_is_held_until_its_shaping_ends_even_past_the_deadline() {
        let gate = ReadGate::new(ReadLimits {
            per_tenant: 1,
            per_peer: 1,
            wait: Duration::from_millis(20),
            budget: Duration::from_millis(50),
        });
        let place = gate.enter("t", ONE).await.unwrap();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let answer = place
            .shaped(move |_| {
                let _ = released.recv();
                Ok(())
            })
            .await;
        let refused = axum::response::IntoResponse::into_response(answer.unwrap_err());
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        drop(place);
        assert_eq!(
            status(gate.enter("t", ONE).await).0,
            StatusCode::TOO_MANY_REQUESTS,
            "the shaping still runs: its place is still held"
        );
        release.send(()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while gate.enter("t", ONE).await.is_err() {
            assert!(Instant::now() < deadline, "the place is given back");
        }
    }

    #[test]
    fn a_budget_past_its_deadline_stops_the_shaping() {
        let budget = Budget {
            deadline: Instant::now(),
            budget: Duration::from_millis(1),
        };
        assert!(budget.check().is_err());
    }
}
