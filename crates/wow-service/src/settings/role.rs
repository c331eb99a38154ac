//! What a process does in a deployment: the role.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

/// What a process does in a deployment (docs/distributed.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything in one process, joined by in-memory buses; NATS is not used.
    #[default]
    Monolith,
    /// Serves HTTP and sends commands over NATS; checks request ids against its Bloom
    /// filters only (SPEC RQ-3); reads the store for look-ups, history and state.
    Gateway,
    /// Owns command partitions (leases in NATS), processes their commands on the store, runs
    /// the consumers, and answers signals to the gateways. Serves HTTP too.
    Processor,
}

impl Role {
    /// The role's name as the settings spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Monolith => "monolith",
            Role::Gateway => "gateway",
            Role::Processor => "processor",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "monolith" => Ok(Role::Monolith),
            "gateway" => Ok(Role::Gateway),
            "processor" => Ok(Role::Processor),
            other => Err(format!(
                "`{other}` is not a role: use monolith, gateway or processor"
            )),
        }
    }
}
