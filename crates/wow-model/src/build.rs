//! How a crate was compiled, measured from code compiled in it (SPEC PX-1).
//!
//! PX-1 holds only where an arithmetic overflow panics: the panic is caught and fails that
//! one command (or quarantines the aggregate whose `apply` overflowed). Cargo turns overflow
//! checks off in a release build unless the profile turns them on, and the profile that
//! counts is the one of the workspace being built (the team's), not wow-rs's: a team's
//! release build would then wrap a balance silently and store the wrong value for good.
//!
//! So the service asks each crate it runs code of how that crate was built, and refuses to
//! start when overflows wrap there. The question is asked by code expanded into the crate:
//! [`crate_build!`](crate::crate_build) (which `#[derive(Command)]` writes into every
//! command enum, see [`CommandBody::crate_build`](crate::command::CommandBody::crate_build))
//! adds `u8::MAX + 1` there, compiled with that crate's own flags, and sees whether it
//! panics or wraps. Why a measurement and not a `cfg`: `cfg(overflow_checks)` is not stable
//! Rust, `cfg(debug_assertions)` is not the same switch (`[profile.release] overflow-checks =
//! true` leaves debug assertions off), and a proc macro cannot see the profile. Measuring the
//! code as compiled is what the promise is about anyway.
//!
//! A crate built with `panic = "abort"` cannot be measured this way (the panic would end the
//! process), nor can PX-1 hold there: a panic in a handler ends the process. It is reported
//! as such ([`CrateBuild::panic_unwinds`] is `false`, [`CrateBuild::overflow_checks`] `None`).
//!
//! # Concurrency
//!
//! A measurement panics on purpose, once, on the calling thread. For its duration the
//! process's panic hook is wrapped so that this one panic prints nothing (the probe's
//! thread is silenced, every other thread's panic reaches the hook as before), then the
//! hook that was set is put back. Measurements are serialised by a lock; one that meets a
//! hook set by another thread in that window puts back the hook it found (so call it at
//! start, as the service does, not while something else installs a hook).

use std::cell::Cell;
use std::panic::{self, PanicHookInfo};
use std::sync::{Arc, Mutex};

/// How one crate was compiled, as [`crate_build!`](crate::crate_build) measured it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CrateBuild {
    /// The crate's package (`CARGO_PKG_NAME` when it was compiled; `"?"` without Cargo):
    /// the name a per-package profile (`[profile.release.package.NAME]`) takes.
    pub package: &'static str,
    /// Whether an arithmetic overflow in the crate panics (`Some(true)`) or wraps silently
    /// (`Some(false)`); `None` when it could not be measured (a build whose panics abort).
    pub overflow_checks: Option<bool>,
    /// Whether a panic unwinds and can be caught (Cargo's default, `panic = "unwind"`);
    /// `false` under `panic = "abort"`, where a panic in a handler ends the process.
    pub panic_unwinds: bool,
}

/// The build of the crate this is expanded in, as a [`CrateBuild`]: its package name, and
/// whether an arithmetic overflow there panics or wraps, measured by running one overflowing
/// `+` compiled in that crate (see the [module](crate::build)).
///
/// `#[derive(Command)]` writes it into [`CommandBody::crate_build`](crate::command::CommandBody::crate_build)
/// for you. A command enum that implements `CommandBody` by hand returns
/// `Some(wow_core::crate_build!())` there, so that the service checks its crate too.
///
/// ```
/// let build = wow_core::crate_build!();
/// assert!(build.panic_unwinds);
/// // This doctest is built by the dev profile, whose overflow checks are on.
/// assert_eq!(build.overflow_checks, Some(true));
/// ```
#[macro_export]
macro_rules! crate_build {
    () => {
        $crate::build::CrateBuild::measure(
            match ::std::option_env!("CARGO_PKG_NAME") {
                ::std::option::Option::Some(package) => package,
                ::std::option::Option::None => "?",
            },
            ::std::cfg!(panic = "unwind"),
            || ::std::hint::black_box(u8::MAX) + ::std::hint::black_box(1_u8),
        )
    };
}

impl CrateBuild {
    /// Measures the crate `probe` was compiled in: `probe` must compute `u8::MAX + 1` with
    /// the plain `+` (behind [`std::hint::black_box`], so the compiler cannot fold it).
    /// `panic_unwinds` is `cfg!(panic = "unwind")` as seen in that crate; when it is
    /// `false` the probe is not run. What [`crate_build!`](crate::crate_build) expands to;
    /// call that instead.
    pub fn measure(package: &'static str, panic_unwinds: bool, probe: fn() -> u8) -> Self {
        let overflow_checks = panic_unwinds.then(|| panics_silently(probe));
        Self {
            package,
            overflow_checks,
            panic_unwinds,
        }
    }

    /// How this crate, wow-model, was compiled; wow-core's
    /// `wow_core::build::of_wow_core` folds it into the framework's measure.
    pub fn of_wow_model() -> Self {
        crate_build!()
    }

    /// One measure for several crates built together, named `package`: PX-1 holds for it
    /// only where it holds for each of `builds`.
    pub fn all_of(package: &'static str, builds: &[CrateBuild]) -> Self {
        let panic_unwinds = builds.iter().all(|build| build.panic_unwinds);
        let overflow_checks = panic_unwinds.then(|| {
            builds
                .iter()
                .all(|build| build.overflow_checks == Some(true))
        });
        Self {
            package,
            overflow_checks,
            panic_unwinds,
        }
    }

    /// Whether PX-1 holds for this crate: overflows panic and panics unwind.
    pub fn is_checked(&self) -> bool {
        self.panic_unwinds && self.overflow_checks == Some(true)
    }
}

thread_local! {
    /// Set while this thread runs a probe: the wrapping hook keeps its panic quiet.
    static PROBING: Cell<bool> = const { Cell::new(false) };
}

/// One measurement at a time: each wraps the process's hook and puts it back.
static HOOK: Mutex<()> = Mutex::new(());

/// The process's panic hook, shared by the wrapper and the measurement that restores it.
type Hook = Box<dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static>;

/// Runs `probe`, which overflows: `true` when the overflow panicked, `false` when it wrapped.
fn panics_silently(probe: fn() -> u8) -> bool {
    let _serial = HOOK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let previous: Arc<Hook> = Arc::new(panic::take_hook());
    let forward = Arc::clone(&previous);
    panic::set_hook(Box::new(move |info| {
        if !PROBING.with(Cell::get) {
            forward(info);
        }
    }));
    PROBING.with(|probing| probing.set(true));
    let panicked = panic::catch_unwind(probe).is_err();
    PROBING.with(|probing| probing.set(false));
    // Dropping the wrapper releases its share of the previous hook, which goes back as it was.
    drop(panic::take_hook());
    match Arc::try_unwrap(previous) {
        Ok(hook) => panic::set_hook(hook),
        Err(shared) => panic::set_hook(Box::new(move |info| shared(info))),
    }
    panicked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_that_panics_reports_overflow_checks_on() {
        let build = CrateBuild::measure("checked", true, || panic!("attempt to add with overflow"));
        assert_eq!(build.overflow_checks, Some(true));
        assert!(build.is_checked());
    }

    #[test]
    fn a_probe_that_wraps_reports_overflow_checks_off() {
        // What `u8::MAX + 1` does in a crate compiled without overflow checks.
        let build = CrateBuild::measure("wrapping", true, || {
            std::hint::black_box(u8::MAX).wrapping_add(1)
        });
        assert_eq!(build.overflow_checks, Some(false));
        assert!(!build.is_checked());
    }

    #[test]
    fn builds_read_as_one_hold_px_1_only_where_each_does() {
        let checked = CrateBuild::measure("checked", true, || {
            std::hint::black_box(u8::MAX)
                .checked_add(1)
                .unwrap_or_else(|| panic!("overflow"))
        });
        let wrapping = CrateBuild::measure("wrapping", true, || {
            std::hint::black_box(u8::MAX).wrapping_add(1)
        });
        let aborting = CrateBuild::measure("aborting", false, || unreachable!("never run"));
        let both = CrateBuild::all_of("framework", &[checked, checked]);
        assert!(both.is_checked());
        assert_eq!(both.package, "framework");
        let one_wraps = CrateBuild::all_of("framework", &[checked, wrapping]);
        assert_eq!(one_wraps.overflow_checks, Some(false));
        assert!(!one_wraps.is_checked());
        let one_aborts = CrateBuild::all_of("framework", &[checked, aborting]);
        assert!(!one_aborts.panic_unwinds);
        assert!(!one_aborts.is_checked());
    }

    #[test]
    fn a_build_whose_panics_abort_is_not_probed_and_not_checked() {
        let build = CrateBuild::measure("aborting", false, || unreachable!("never run"));
        assert_eq!(build.overflow_checks, None);
        assert!(!build.panic_unwinds);
        assert!(!build.is_checked());
    }
}
