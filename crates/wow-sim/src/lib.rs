//! # wow-sim
//!
//! A deterministic simulation of the wow-rs pipeline under faults, in the manner of
//! FoundationDB's and TigerBeetle's simulators: the **real** wow-core parts — gateway,
//! processing nodes with their Bloom-filter request-id checks, in-memory event store, event
//! bus, dispatcher, a projection and an outbox processor over `InMemoryProcessedMessages`, a
//! saga — wired together with fault-injecting decorators of the production traits in between
//! (`EventStore`, `CommandBus`, `DomainEventBus`, `WaitNotifier`, `EventConsumer`, `Saga`).
//!
//! One seed drives every decision through one random source, and each run has its own
//! single-threaded tokio runtime with paused (virtual) time, so a seed replays the same run.
//! After each run the system is brought to quiet (faults off, in-flight work lands, consumers
//! catch up from the store) and the invariants of SPEC ID/ST/RQ/ES/RS/TO/DS are checked —
//! among them that no intent is answered rejected and applied later (ID-6), that no applied
//! intent is answered with a business error (ID-7), and that the wallets' money is
//! conserved through the saga-driven transfers; see [`run_seed`] and `docs/reliability.md`.
//!
//! ```no_run
//! let report = wow_sim::run_seed(42, wow_sim::SimConfig::default());
//! assert!(report.held(), "{}", report.explain());
//! ```

mod chaos;
mod client;
mod consumers;
mod domain;
mod harness;
mod invariants;
mod nodes;
mod quiet;
mod sim_config;
mod store;
mod wiring;

pub use chaos::FaultKind;
pub use domain::{
    Amount, Held, HoldEnded, HoldRef, Moved, Open, Receive, Received, Transfer, Wallet,
    WalletCommand, WalletError, WalletEvent, WalletState,
};
pub use harness::{run_seed, RunReport, SimConfig};
pub use invariants::IntentTally;
