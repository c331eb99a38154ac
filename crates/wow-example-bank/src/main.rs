//! `wow-bank`: the bank example over HTTP, with the flags, `WOW_*` variables and TOML file of
//! `wow serve` (`wow serve --example bank` serves the same service):
//!
//! ```sh
//! cargo run -p wow-example-bank --features service -- --store memory:// --listen 127.0.0.1:8099
//! ```

fn main() -> std::process::ExitCode {
    wow_example_bank::service::service()
        .store("sqlite://./data/bank.db")
        .run()
}
