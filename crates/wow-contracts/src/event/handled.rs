//! What one consumer handled of one aggregate's history: the position, and the runs handled
//! past a gap, which the position takes in once the gap is filled.

use std::fmt;

/// The versions one consumer handled of one aggregate: every version up to
/// [`position`](Self::position), and the runs handled past the first version it did not
/// handle ([`ahead`](Self::ahead)).
///
/// Adding a run is order-free: the same runs added in any order, any number of times, give
/// the same value, so runs written late (by a slower writer, another node, or after a retry
/// filled the gap) lose nothing. The position is the highest version with no gap below it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandledVersions {
    position: u64,
    /// Sorted, disjoint and not touching each other or the position: each starts at least
    /// two past the end of what is before it.
    ahead: Vec<(u64, u64)>,
}

/// Why a stored list of runs could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a list of version runs (`from-to,from-to`, in order)")]
pub struct BadRuns(pub String);

impl HandledVersions {
    /// Nothing handled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every version up to `position` handled, and the runs `ahead` past it (any order,
    /// overlapping or not); runs that touch the position are taken in.
    pub fn with_runs(position: u64, ahead: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut handled = Self {
            position,
            ahead: Vec::new(),
        };
        for (from, to) in ahead {
            handled.add(from, to);
        }
        handled
    }

    /// The highest version such that every version up to it was handled; 0 before version 1.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The runs `(from, to)` handled past the first gap, in version order, each past a gap.
    pub fn ahead(&self) -> &[(u64, u64)] {
        &self.ahead
    }

    /// Every run handled, in version order: `1..=position` (when the position is past 0),
    /// then the runs ahead.
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (self.position > 0)
            .then_some((1, self.position))
            .into_iter()
            .chain(self.ahead.iter().copied())
    }

    /// Records that every version in `from..=to` was handled (version 0 counts as 1); returns
    /// whether that changed anything. The position takes in the run when the run reaches it,
    /// and with it every run ahead that the run joins up with.
    pub fn add(&mut self, from: u64, to: u64) -> bool {
        let from = from.max(1);
        if to < from || to <= self.position {
            return false;
        }
        if from <= self.position + 1 {
            self.position = to;
            let joined = self
                .ahead
                .iter()
                .take_while(|(start, _)| *start <= self.position + 1)
                .count();
            if let Some(&(_, end)) = self.ahead[..joined].last() {
                self.position = self.position.max(end);
            }
            self.ahead.drain(..joined);
            return true;
        }
        // Past a gap: merge into the runs ahead, keeping them sorted and apart.
        let first = self.ahead.partition_point(|(_, end)| end + 1 < from);
        let last = self.ahead.partition_point(|(start, _)| *start <= to + 1);
        if first < last {
            let (start, end) = (self.ahead[first].0, self.ahead[last - 1].1);
            if last - first == 1 && start <= from && end >= to {
                return false;
            }
            self.ahead
                .splice(first..last, [(start.min(from), end.max(to))]);
        } else {
            self.ahead.insert(first, (from, to));
        }
        true
    }

    /// Reads back runs written by [`Display`](fmt::Display) of [`ahead`](Self::ahead) (see
    /// [`RunsText`]): `from-to` pairs separated by commas; empty for none.
    pub fn parse_runs(text: &str) -> Result<Vec<(u64, u64)>, BadRuns> {
        if text.is_empty() {
            return Ok(Vec::new());
        }
        text.split(',')
            .map(|run| {
                let (from, to) = run
                    .split_once('-')
                    .ok_or_else(|| BadRuns(text.to_owned()))?;
                match (from.parse::<u64>(), to.parse::<u64>()) {
                    (Ok(from), Ok(to)) if from <= to => Ok((from, to)),
                    _ => Err(BadRuns(text.to_owned())),
                }
            })
            .collect()
    }

    /// The runs ahead as text, for a store that keeps them in a text column.
    pub fn runs_text(&self) -> RunsText<'_> {
        RunsText(&self.ahead)
    }
}

/// Runs written as `from-to,from-to` (empty for none); read back by
/// [`HandledVersions::parse_runs`].
#[derive(Debug, Clone, Copy)]
pub struct RunsText<'a>(&'a [(u64, u64)]);

impl fmt::Display for RunsText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, (from, to)) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{from}-{to}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_past_a_gap_are_kept_and_taken_in_once_it_is_filled() {
        let mut handled = HandledVersions::new();
        assert!(handled.add(6, 7));
        assert!(handled.add(3, 4));
        assert!(handled.add(9, 9));
        assert_eq!(handled.position(), 0);
        assert_eq!(handled.ahead(), &[(3, 4), (6, 7), (9, 9)]);
        assert!(handled.add(1, 2));
        assert_eq!(
            (handled.position(), handled.ahead()),
            (4, &[(6, 7), (9, 9)][..])
        );
        assert!(handled.add(5, 5));
        assert_eq!((handled.position(), handled.ahead()), (7, &[(9, 9)][..]));
        assert!(!handled.add(2, 6), "already handled");
        assert!(!handled.add(9, 9), "already kept");
        assert!(handled.add(8, 12));
        assert_eq!((handled.position(), handled.ahead()), (12, &[][..]));
    }

    #[test]
    fn runs_ahead_merge_when_they_touch_or_overlap() {
        let mut handled = HandledVersions::with_runs(1, [(10, 12), (4, 5), (14, 20)]);
        assert!(handled.add(6, 9));
        assert_eq!(handled.ahead(), &[(4, 12), (14, 20)]);
        assert!(handled.add(13, 13));
        assert_eq!(handled.ahead(), &[(4, 20)]);
        assert!(handled.add(3, 3));
        assert_eq!((handled.position(), handled.ahead()), (1, &[(3, 20)][..]));
        assert!(handled.add(2, 2));
        assert_eq!((handled.position(), handled.ahead()), (20, &[][..]));
    }

    #[test]
    fn every_order_of_the_same_runs_gives_the_same_versions() {
        let runs = [(1, 2), (3, 3), (5, 8), (4, 4), (10, 11), (7, 9), (13, 13)];
        let reference = HandledVersions::with_runs(0, runs);
        assert_eq!(
            (reference.position(), reference.ahead()),
            (11, &[(13, 13)][..])
        );
        // Every rotation and its reverse.
        for shift in 0..runs.len() {
            let mut order = runs;
            order.rotate_left(shift);
            assert_eq!(HandledVersions::with_runs(0, order), reference);
            order.reverse();
            assert_eq!(HandledVersions::with_runs(0, order), reference);
        }
    }

    #[test]
    fn random_runs_give_what_a_set_of_versions_gives() {
        let mut seed: u64 = 0x5eed;
        let mut next = |below: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % below
        };
        for _ in 0..500 {
            let mut handled = HandledVersions::new();
            let mut versions = std::collections::BTreeSet::new();
            for _ in 0..12 {
                let from = next(40) + 1;
                let to = from + next(4);
                let added = (from..=to).any(|v| !versions.contains(&v));
                versions.extend(from..=to);
                assert_eq!(handled.add(from, to), added, "{from}..={to} on {handled:?}");
                let position = (1..).take_while(|v| versions.contains(v)).count() as u64;
                assert_eq!(handled.position(), position);
                let ahead: Vec<u64> = handled
                    .ahead()
                    .iter()
                    .flat_map(|&(from, to)| from..=to)
                    .collect();
                let expected: Vec<u64> = versions.range(position + 1..).copied().collect();
                assert_eq!(ahead, expected);
                assert!(handled.ahead().windows(2).all(|w| w[0].1 + 1 < w[1].0));
            }
        }
    }

    #[test]
    fn runs_read_back_as_written() {
        let handled = HandledVersions::with_runs(2, [(9, 9), (5, 7)]);
        let text = handled.runs_text().to_string();
        assert_eq!(text, "5-7,9-9");
        assert_eq!(HandledVersions::parse_runs(&text), Ok(vec![(5, 7), (9, 9)]));
        assert_eq!(HandledVersions::parse_runs(""), Ok(vec![]));
        assert!(HandledVersions::parse_runs("5-").is_err());
        assert!(HandledVersions::parse_runs("7-5").is_err());
    }
}
