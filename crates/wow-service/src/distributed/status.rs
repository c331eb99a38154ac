//! What `/health` reports of a gateway or processor: role, node, NATS connection, partitions.

use std::sync::{Arc, Mutex};

use async_nats::connection::State;
use serde_json::json;
use wow_http::NodeStatus;
use wow_nats::StalledPartitions;

use crate::settings::Role;

/// What `/health` says of a gateway or processor, under `details.node`: `role`, `nodeId`,
/// `nats` (`CONNECTED`, `DISCONNECTED`, `CONNECTING`), `ready` (NATS connected and, on a
/// processor, every owned partition consumed: a node that is not ready takes or handles
/// no commands, or not those of its stalled partitions), `partitionCount`, and a
/// processor's `partitions` and `stalled` (owned partitions whose consumer stopped hearing
/// from its server or is being made again).
///
/// A hung NATS server shows as `DISCONNECTED` within about three ping intervals (the client
/// then moves to another server of the cluster); before, the connection looked fine for
/// minutes.
#[derive(Debug)]
pub(super) struct Status {
    pub(super) role: Role,
    pub(super) node_id: String,
    pub(super) client: async_nats::Client,
    pub(super) owned: Arc<Mutex<Vec<u32>>>,
    pub(super) stalled: StalledPartitions,
    pub(super) partitions: u32,
}

impl NodeStatus for Status {
    fn status(&self) -> serde_json::Value {
        let state = self.client.connection_state();
        let stalled = self.stalled.now();
        let ready = state == State::Connected && stalled.is_empty();
        let nats = match state {
            State::Connected => "CONNECTED",
            State::Disconnected => "DISCONNECTED",
            State::Pending => "CONNECTING",
        };
        let mut status = json!({
            "role": self.role.as_str(),
            "nodeId": self.node_id,
            "nats": nats,
            "ready": ready,
            "partitionCount": self.partitions,
        });
        if self.role == Role::Processor {
            let owned = self.owned.lock().unwrap_or_else(|p| p.into_inner()).clone();
            status["partitions"] = json!(owned);
            status["stalled"] = json!(stalled);
        }
        status
    }
}
