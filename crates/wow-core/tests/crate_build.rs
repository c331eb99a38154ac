//! Measuring a crate's build panics on purpose (SPEC PX-1): that panic reaches no panic hook,
//! and the hook the process had is back afterwards. Alone in its binary: the panic hook is
//! the process's.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn measuring_a_build_keeps_its_panic_quiet_and_puts_the_panic_hook_back() {
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&seen);
    std::panic::set_hook(Box::new(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
    }));

    let build = wow_core::crate_build!();
    assert_eq!(build.package, "wow-core");
    assert_eq!(build.overflow_checks, Some(true), "the probe did panic");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "the probe's panic reached the hook"
    );

    // The team's hook is the process's again: the next panic reaches it.
    let caught = std::panic::catch_unwind(|| panic!("a handler's panic"));
    assert!(caught.is_err());
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    drop(std::panic::take_hook());
}
