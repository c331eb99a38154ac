//! The check at start that every crate the service runs code of was compiled so that SPEC
//! PX-1 can hold: an arithmetic overflow panics (and is caught: one command fails) rather
//! than wrapping silently into a wrong value that is stored for good.
//!
//! Cargo applies the profile of the workspace being built, the team's: wow-rs's own
//! `overflow-checks = true` does not reach a team's release build, whose default wraps. The
//! crates are measured, not guessed ([`CrateBuild`]): each registered aggregate's crate
//! through its command enum (`#[derive(Command)]` writes the probe into it), and wow-core
//! itself, which stands for the code no derive reaches (views, sagas, consumers, the
//! framework's own arithmetic) since it is built by the same profile unless a per-package
//! profile sets it apart.
//!
//! What the service does about a crate that wraps is a setting ([`OverflowChecks`]):
//! refuse to start, by default, or start with a loud warning.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;
use wow_core::build::CrateBuild;

/// What a service does at start when a crate it runs code of was compiled so that an
/// arithmetic overflow wraps silently (or with `panic = "abort"`): `WOW_OVERFLOW_CHECKS`,
/// `overflow_checks` in the TOML file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverflowChecks {
    /// Refuse to start with [`ServiceError::UncheckedBuild`](crate::ServiceError::UncheckedBuild),
    /// which names each crate and the `Cargo.toml` lines that fix it. The default.
    #[default]
    Require,
    /// Start anyway: log an error naming each crate at start, and list them in `/health`
    /// (`details.warnings`). For a build that cannot be fixed at once; a wrapped value is
    /// still stored as if it were true.
    Warn,
}

impl OverflowChecks {
    /// The value's name as the settings spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            OverflowChecks::Require => "require",
            OverflowChecks::Warn => "warn",
        }
    }
}

impl fmt::Display for OverflowChecks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OverflowChecks {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "require" => Ok(OverflowChecks::Require),
            "warn" => Ok(OverflowChecks::Warn),
            other => Err(format!(
                "`{other}` is not an overflow-checks mode: use require or warn"
            )),
        }
    }
}

/// A crate the service runs code of, compiled so that SPEC PX-1 cannot hold there.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UncheckedCrate {
    /// How it was compiled, as measured in it.
    pub build: CrateBuild,
    /// The registered aggregates whose command enums it declares; empty for wow-core, which
    /// stands for the framework and for the views, sagas and consumers.
    pub aggregates: Vec<&'static str>,
}

impl fmt::Display for UncheckedCrate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.build.package)?;
        match self.aggregates.as_slice() {
            [] => write!(
                f,
                " (the framework's, and with it the views, sagas and consumers)"
            )?,
            [one] => write!(f, " (aggregate `{one}`)")?,
            many => write!(f, " (aggregates `{}`)", many.join("`, `"))?,
        }
        if !self.build.panic_unwinds {
            write!(f, " was compiled with panic = \"abort\"")
        } else {
            write!(f, " was compiled without overflow checks")
        }
    }
}

/// Every crate of `measured` (each registered aggregate's name and what its command enum
/// measured, `None` for an unmeasured one) and wow-core, once per package, that does not hold
/// PX-1: the aggregates' crates in the order first registered, then wow-core.
pub(crate) fn unchecked_crates(
    measured: &[(&'static str, Option<CrateBuild>)],
) -> Vec<UncheckedCrate> {
    let mut crates: Vec<UncheckedCrate> = Vec::new();
    for (aggregate, build) in measured {
        let Some(build) = build else { continue };
        match crates.iter_mut().find(|known| known.build == *build) {
            Some(known) => known.aggregates.push(aggregate),
            None => crates.push(UncheckedCrate {
                build: *build,
                aggregates: vec![aggregate],
            }),
        }
    }
    let framework = wow_core::build::of_wow_core();
    if !crates.iter().any(|known| known.build == framework) {
        crates.push(UncheckedCrate {
            build: framework,
            aggregates: Vec::new(),
        });
    }
    crates.retain(|known| !known.build.is_checked());
    crates
}

/// What is wrong with `crates`, what it costs, and the lines of `Cargo.toml` that fix it.
pub(crate) fn describe(crates: &[UncheckedCrate]) -> String {
    let listed = crates
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    let aborts = crates.iter().any(|known| !known.build.panic_unwinds);
    let abort_fix = if aborts {
        " and remove `panic = \"abort\"` from it (a panic there ends the process instead of failing one command)"
    } else {
        ""
    };
    format!(
        "{listed}: an arithmetic overflow in a handler, an apply or a consumer would wrap silently and a wrong value would be stored for good, instead of failing that one command (SPEC PX-1). \
         Add `[profile.release] overflow-checks = true` to the Cargo.toml at the root of the workspace that builds this service{abort_fix}, then build again"
    )
}

/// The message of a refused start: [`describe`], and how to start anyway.
pub(crate) fn refusal(crates: &[UncheckedCrate]) -> String {
    format!(
        "{}; or set WOW_OVERFLOW_CHECKS=warn (overflow_checks = \"warn\" in the settings file) to start anyway",
        describe(crates)
    )
}

/// What `/health` lists under [`OverflowChecks::Warn`]: one sentence per crate.
pub(crate) fn warnings(crates: &[UncheckedCrate]) -> Vec<String> {
    crates
        .iter()
        .map(|known| {
            format!("{known}: an arithmetic overflow there wraps silently and stores a wrong value (SPEC PX-1); build it with [profile.release] overflow-checks = true")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn wrapping(package: &'static str) -> CrateBuild {
        CrateBuild {
            package,
            overflow_checks: Some(false),
            panic_unwinds: true,
        }
    }

    fn checked(package: &'static str) -> CrateBuild {
        CrateBuild {
            package,
            overflow_checks: Some(true),
            panic_unwinds: true,
        }
    }

    #[test]
    fn crates_built_with_overflow_checks_pass_the_check() {
        // wow-core's own tests run in the workspace's profiles, which check overflows.
        assert!(unchecked_crates(&[]).is_empty());
        assert!(
            unchecked_crates(&[("member", Some(checked("loyalty"))), ("todo", None)]).is_empty()
        );
    }

    #[test]
    fn a_wrapping_crate_is_named_once_with_its_aggregates_and_the_fix() {
        let unchecked = unchecked_crates(&[
            ("member", Some(wrapping("loyalty"))),
            ("order", Some(checked("shop"))),
            ("card", Some(wrapping("loyalty"))),
        ]);
        assert_eq!(unchecked.len(), 1);
        assert_eq!(unchecked[0].build.package, "loyalty");
        assert_eq!(unchecked[0].aggregates, ["member", "card"]);
        let message = refusal(&unchecked);
        assert!(
            message.starts_with(
                "`loyalty` (aggregates `member`, `card`) was compiled without overflow checks"
            ),
            "{message}"
        );
        assert!(
            message.contains("Add `[profile.release] overflow-checks = true` to the Cargo.toml"),
            "{message}"
        );
        assert!(message.contains("WOW_OVERFLOW_CHECKS=warn"), "{message}");
        assert!(!message.contains("abort"), "{message}");
    }

    #[test]
    fn a_crate_whose_panics_abort_is_named_with_its_own_fix() {
        let aborting = CrateBuild {
            package: "loyalty",
            overflow_checks: None,
            panic_unwinds: false,
        };
        let unchecked = unchecked_crates(&[("member", Some(aborting))]);
        let message = refusal(&unchecked);
        assert!(
            message
                .starts_with("`loyalty` (aggregate `member`) was compiled with panic = \"abort\""),
            "{message}"
        );
        assert!(message.contains("remove `panic = \"abort\"`"), "{message}");
    }

    #[test]
    fn the_mode_reads_require_and_warn_and_names_a_wrong_value() {
        assert_eq!("require".parse(), Ok(OverflowChecks::Require));
        assert_eq!(" warn ".parse(), Ok(OverflowChecks::Warn));
        assert_eq!(OverflowChecks::default(), OverflowChecks::Require);
        let wrong = "off".parse::<OverflowChecks>().unwrap_err();
        assert!(wrong.contains("`off`"), "{wrong}");
    }
}
