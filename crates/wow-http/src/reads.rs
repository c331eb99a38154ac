//! The heavy reads' bounds (SPEC TN-1): Wow's queries, history ranges and time travel each hold
//! a place in their tenant's share and in their peer's share of the server's read work while
//! they run, end within a time budget, and shape their answers on the blocking pool, so that
//! neither one tenant, nor one client naming many tenants, nor one huge answer slows anyone
//! else's reads or commands.
//!
//! A read enters with [`ReadPlace`] (an extractor); its store calls run
//! [`within`](ReadPlace::within) the budget, and its CPU-heavy work (upcasting, projecting,
//! folding) runs [`shaped`](ReadPlace::shaped) off the async workers, holding the place until
//! it ends even when the caller has gone.

pub(crate) mod gate;

use std::net::SocketAddr;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use gate::PeerAddr;
pub(crate) use gate::ReadPlace;

use crate::error::ApiError;
use crate::extract::CallerTenant;
use crate::state::HttpState;

impl FromRequestParts<HttpState> for ReadPlace {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, ApiError> {
        let CallerTenant(tenant) = CallerTenant::from_request_parts(parts, state).await?;
        let peer = parts
            .extensions
            .get::<PeerAddr>()
            .map(|PeerAddr(address)| address.ip())
            .or_else(|| {
                parts
                    .extensions
                    .get::<axum::extract::ConnectInfo<SocketAddr>>()
                    .map(|axum::extract::ConnectInfo(address)| address.ip())
            });
        state.reads().enter(&tenant, peer).await
    }
}
