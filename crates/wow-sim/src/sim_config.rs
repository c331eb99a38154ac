//! The size of a simulated run.

/// The size of a run. Small on purpose: many short runs find more than a few long ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// Concurrent callers.
    pub clients: usize,
    /// Intents per caller.
    pub intents_per_client: usize,
    /// Wallets the callers use (besides the rewards wallet the saga credits); at least 2
    /// are used, since a transfer needs two.
    pub wallets: usize,
    /// Processing nodes.
    pub nodes: usize,
    /// The mutation of the mutation test: the store answers `Ok` to every rejection record
    /// and records nothing (SPEC ID-6 switched off). The campaign must then find violations;
    /// `false` in every real run.
    pub forget_rejections: bool,
}

impl Default for SimConfig {
    /// 3 callers × 8 intents over 3 wallets and 2 nodes, the store intact.
    fn default() -> Self {
        Self {
            clients: 3,
            intents_per_client: 8,
            wallets: 3,
            nodes: 2,
            forget_rejections: false,
        }
    }
}
