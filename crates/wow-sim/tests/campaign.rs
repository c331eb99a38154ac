//! The fault campaign: a fixed set of seeds on every `cargo test`, a long one by hand.
//!
//! - `cargo test -p wow-sim` runs seeds `0..600` (four shards in parallel).
//! - `WOW_SIM_SEEDS=5000 cargo test -p wow-sim --release -- --nocapture campaign` runs
//!   seeds `0..5000` and prints the fault table.
//! - `WOW_SIM_SEED=1234 cargo test -p wow-sim -- --nocapture campaign` replays one seed and
//!   prints its trace.
//!
//! A failing seed prints its violations and the trace of its run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use wow_sim::{run_seed, FaultKind, RunReport, SimConfig};

const DEFAULT_SEEDS: u64 = 600;
const SHARDS: u64 = 4;

/// The seeds this process runs, and whether they come from the environment.
fn seeds() -> (Vec<u64>, bool) {
    if let Ok(seed) = std::env::var("WOW_SIM_SEED") {
        return (
            vec![seed.trim().parse().expect("WOW_SIM_SEED is a u64")],
            true,
        );
    }
    if let Ok(count) = std::env::var("WOW_SIM_SEEDS") {
        let count: u64 = count.trim().parse().expect("WOW_SIM_SEEDS is a u64");
        return ((0..count).collect(), true);
    }
    ((0..DEFAULT_SEEDS).collect(), false)
}

fn summary(reports: &[RunReport]) -> String {
    let mut faults: BTreeMap<FaultKind, u64> = BTreeMap::new();
    let mut with_faults = 0;
    let (mut applied, mut rejected, mut unknown_applied, mut unknown_absent, mut resends) =
        (0, 0, 0, 0, 0);
    let mut superseded = 0;
    let mut streams = 0;
    for report in reports {
        if report.faults.values().sum::<u64>() > 0 {
            with_faults += 1;
        }
        for (kind, n) in &report.faults {
            *faults.entry(*kind).or_default() += n;
        }
        applied += report.tally.applied;
        rejected += report.tally.rejected;
        unknown_applied += report.tally.unknown_then_applied;
        unknown_absent += report.tally.unknown_then_absent;
        resends += report.tally.resends;
        superseded += report.tally.rejected_then_applied;
        streams += report.streams;
    }
    let mut text = format!(
        "{} runs ({} with faults), {streams} streams; intents: {applied} applied, {rejected} rejected, \
         {unknown_applied} unknown→applied, {unknown_absent} unknown→absent; {resends} resends; \
         {superseded} rejections superseded by a later delivery\n\
         | fault | injected |\n| --- | ---: |\n",
        reports.len(),
        with_faults
    );
    for kind in FaultKind::ALL {
        text.push_str(&format!(
            "| {kind} | {} |\n",
            faults.get(&kind).copied().unwrap_or(0)
        ));
    }
    text
}

fn campaign(shard: u64) {
    let (seeds, from_env) = seeds();
    if from_env && shard != 0 {
        return;
    }
    let mine: Vec<u64> = seeds
        .into_iter()
        .filter(|seed| from_env || seed % SHARDS == shard)
        .collect();
    let mut reports = Vec::with_capacity(mine.len());
    let mut failures = Vec::new();
    for seed in mine {
        let report = run_seed(seed, SimConfig::default());
        if !report.held() {
            failures.push(report.explain());
        }
        reports.push(report);
    }
    if reports.len() == 1 {
        for line in &reports[0].trace {
            println!("{line}");
        }
    }
    println!("{}", summary(&reports));
    let with_faults = reports
        .iter()
        .filter(|r| r.faults.values().sum::<u64>() > 0)
        .count();
    assert!(
        from_env || with_faults * 10 >= reports.len() * 9,
        "most runs must inject faults ({with_faults} of {})",
        reports.len()
    );
    if !failures.is_empty() {
        let shown: Vec<&String> = failures.iter().take(3).collect();
        panic!(
            "{} run(s) broke invariants; the first:\n{}",
            failures.len(),
            shown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[test]
fn campaign_shard_0_holds_every_invariant() {
    campaign(0);
}

#[test]
fn campaign_shard_1_holds_every_invariant() {
    campaign(1);
}

#[test]
fn campaign_shard_2_holds_every_invariant() {
    campaign(2);
}

#[test]
fn campaign_shard_3_holds_every_invariant() {
    campaign(3);
}

#[test]
fn a_seed_replays_the_same_run() {
    for seed in [3, 77, 1234] {
        let first = run_seed(seed, SimConfig::default());
        let second = run_seed(seed, SimConfig::default());
        if let Some(at) = (0..first.trace.len().max(second.trace.len()))
            .find(|&i| first.trace.get(i) != second.trace.get(i))
        {
            panic!(
                "seed {seed} did not replay; line {at}:\n  {:?}\n  {:?}",
                first.trace.get(at),
                second.trace.get(at)
            );
        }
        assert_eq!(first.faults, second.faults);
    }
}
