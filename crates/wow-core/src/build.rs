//! How a crate was compiled, measured from code compiled in it (SPEC PX-1): whether an
//! arithmetic overflow there panics, as PX-1 needs, or wraps silently, as Cargo's
//! default release profile has it. The service refuses to start on a crate that wraps.
//! See [`CrateBuild`] and [`crate_build!`](crate::crate_build).
pub use wow_model::build::CrateBuild;

/// How the framework was compiled: wow-core, with the model and the contracts it is built
/// from, measured in each and read as one (named `wow-core`), by the same profile as the
/// team's crates unless a per-package profile sets one apart. The service asks it as the
/// measure of the framework's own arithmetic and of the team's code that no derive reaches
/// (views, sagas, consumers).
pub fn of_wow_core() -> CrateBuild {
    let own = crate::crate_build!();
    CrateBuild::all_of(
        own.package,
        &[
            own,
            CrateBuild::of_wow_model(),
            wow_contracts::crate_build(),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crate_build;

    #[test]
    fn the_probe_reports_the_overflow_checks_of_the_crate_it_is_expanded_in() {
        // Whether `+` panics here, asked directly: the probe must say the same.
        let direct =
            std::panic::catch_unwind(|| std::hint::black_box(u8::MAX) + std::hint::black_box(1_u8))
                .is_err();
        let build = crate_build!();
        assert_eq!(build.package, "wow-core");
        assert_eq!(build.overflow_checks, Some(direct));
        // The workspace's profiles check overflows in debug and in release alike.
        assert_eq!(build.overflow_checks, Some(true));
        assert_eq!(of_wow_core(), build);
    }

    #[test]
    fn the_command_derive_measures_the_crate_that_declares_the_enum() {
        use crate::command::CommandBody;
        use crate::testing_example::CounterCommand;
        assert_eq!(
            CounterCommand::crate_build(),
            Some(CrateBuild {
                package: "wow-core",
                overflow_checks: Some(true),
                panic_unwinds: true,
            })
        );
    }
}
