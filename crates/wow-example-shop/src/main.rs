//! `wow-shop`: the shop example over HTTP, with the flags, `WOW_*` variables and TOML file of
//! `wow serve` (`wow serve --example shop` serves the same service):
//!
//! ```sh
//! cargo run -p wow-example-shop --features service -- --store memory:// --listen 127.0.0.1:8099
//! ```

fn main() -> std::process::ExitCode {
    wow_example_shop::service::service()
        .store("sqlite://./data/shop.db")
        .run()
}
