//! Tests that need something outside the process (a PostgreSQL or NATS server, a browser):
//! when it is missing they either fail (the run requires it) or skip **loudly**.
//!
//! The test harness captures what `print!` and `eprint!` write and shows it only for a test
//! that fails, so a skipped test that says why with `eprintln!` shows nothing in a passing
//! run. [`unavailable`] writes its line to the process's stderr through [`std::io::Write`],
//! past the capture: `cargo test` shows it whether the test passes or not.
//!
//! ```no_run
//! # fn connect() -> Result<(), String> { Ok(()) }
//! use wow_tck::skip::{unavailable, Requirement};
//! if let Err(error) = connect() {
//!     // Panics under WOW_REQUIRE_BACKENDS=1; else one `SKIPPED ...` line on stderr.
//!     unavailable(Requirement::Backends, &format!("no PostgreSQL ({error})"));
//!     return;
//! }
//! ```

use std::io::Write as _;

/// What a run may require, each by its own variable set to `1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Requirement {
    /// PostgreSQL and NATS: `WOW_REQUIRE_BACKENDS=1` (`.ci/run` sets it).
    Backends,
    /// Chromium, Node and playwright-core for the operations page's browser test:
    /// `WOW_REQUIRE_BROWSER=1` (`.ci/run` sets it under `CI=true`).
    Browser,
}

impl Requirement {
    /// The variable that requires it.
    pub fn variable(self) -> &'static str {
        match self {
            Requirement::Backends => "WOW_REQUIRE_BACKENDS",
            Requirement::Browser => "WOW_REQUIRE_BROWSER",
        }
    }

    /// Whether this run requires it: its variable is `1`.
    pub fn required(self) -> bool {
        std::env::var(self.variable()).is_ok_and(|value| value.trim() == "1")
    }
}

/// Whether this run requires the backends (`WOW_REQUIRE_BACKENDS=1`).
pub fn backends_required() -> bool {
    Requirement::Backends.required()
}

/// The line [`unavailable`] writes for the running test: `SKIPPED`, the package and the test,
/// what is `missing`, and how to make the run require it.
pub fn skip_line(requirement: Requirement, missing: &str) -> String {
    format!(
        "SKIPPED {}: {missing}. Set {}=1 to fail instead of skipping (.ci/run sets it).",
        running_test(),
        requirement.variable()
    )
}

/// Says that the running test cannot run because `missing` (what is absent, where it was
/// looked for, and why it was not usable): when the run requires it ([`Requirement::required`])
/// this panics with that, failing the test; else it writes one [`skip_line`] to stderr
/// directly, past the test harness's capture, and returns so that the test can return.
#[track_caller]
pub fn unavailable(requirement: Requirement, missing: &str) {
    if requirement.required() {
        panic!(
            "{missing}, and {}=1 requires it: start it (.ci/run starts PostgreSQL and NATS, and installs the browser)",
            requirement.variable()
        );
    }
    let line = skip_line(requirement, missing);
    // Locked and written at once, so that parallel tests' lines do not interleave.
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{line}");
    let _ = stderr.flush();
}

/// The running test as `package test-binary::test`, from what cargo and the test harness
/// tell the process: `CARGO_PKG_NAME` (set by `cargo test`), the test binary's name without
/// its hash, and the thread the harness runs the test on (named after the test; `main` when
/// tests run one at a time, which names none).
fn running_test() -> String {
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
    let binary = std::env::args()
        .next()
        .map(|path| {
            let name = std::path::Path::new(&path)
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default();
            // `target/debug/deps/lease-0123abcd`: cargo's hash after the last `-`.
            match name.rsplit_once('-') {
                Some((stem, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => {
                    stem.to_owned()
                }
                _ => name,
            }
        })
        .unwrap_or_default();
    let thread = std::thread::current();
    let test = thread.name().filter(|name| *name != "main");
    let mut said = package;
    if !binary.is_empty() && binary.replace('_', "-") != said {
        if !said.is_empty() {
            said.push(' ');
        }
        said.push_str(&binary);
    }
    match test {
        Some(test) if said.is_empty() => test.to_owned(),
        Some(test) => format!("{said}::{test}"),
        None if said.is_empty() => "a test".to_owned(),
        None => format!("{said} (a test)"),
    }
}

#[cfg(test)]
mod tests {
    use super::{skip_line, Requirement};

    #[test]
    fn a_skip_line_names_the_test_what_is_missing_and_the_variable() {
        let line = skip_line(Requirement::Backends, "no PostgreSQL at postgres://x");
        assert!(line.starts_with("SKIPPED wow-tck"), "{line}");
        // The harness names the thread after the test, unless it runs tests one at a time.
        if std::thread::current().name() != Some("main") {
            assert!(
                line.contains("a_skip_line_names_the_test_what_is_missing_and_the_variable"),
                "{line}"
            );
        }
        assert!(line.contains("no PostgreSQL at postgres://x"), "{line}");
        assert!(line.contains("WOW_REQUIRE_BACKENDS=1"), "{line}");
        assert!(skip_line(Requirement::Browser, "no Chromium").contains("WOW_REQUIRE_BROWSER=1"));
    }
}
