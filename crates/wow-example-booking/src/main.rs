//! `wow-booking`: the booking example over HTTP, with the flags, `WOW_*` variables and TOML
//! file of `wow serve` (`wow serve --example booking` serves the same service):
//!
//! ```sh
//! cargo run -p wow-example-booking --features service -- --store memory:// --listen 127.0.0.1:8099
//! ```

fn main() -> std::process::ExitCode {
    wow_example_booking::service::service()
        .store("sqlite://./data/booking.db")
        .run()
}
