//! What a caught panic said (SPEC PX-1).
//!
//! Panics in a team's code (a handler, an `apply`, a consumer) are caught where that code is
//! called, with `std::panic::catch_unwind` or `futures::FutureExt::catch_unwind`, and turned
//! into an ordinary failure of that one command or delivery. The process's panic hook still
//! runs first (by default it prints the message and location to stderr); the framework adds
//! its own `tracing` error with the aggregate or consumer the panic belongs to.

use std::any::Any;

/// The message of a caught panic: the `&str` or `String` it was raised with (what `panic!`,
/// `unwrap`, `expect` and an arithmetic overflow raise), or a placeholder for any other
/// payload.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&'static str>() {
        (*message).to_owned()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "a panic with a payload that is not a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_str_and_string_payloads() {
        let caught = std::panic::catch_unwind(|| panic!("plain")).unwrap_err();
        assert_eq!(panic_message(caught.as_ref()), "plain");
        let n = 7;
        let caught = std::panic::catch_unwind(|| panic!("formatted {n}")).unwrap_err();
        assert_eq!(panic_message(caught.as_ref()), "formatted 7");
        let caught = std::panic::catch_unwind(|| std::panic::panic_any(42_u8)).unwrap_err();
        assert_eq!(
            panic_message(caught.as_ref()),
            "a panic with a payload that is not a message"
        );
    }
}
