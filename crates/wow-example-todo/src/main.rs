//! `wow-todo`: the todo example over HTTP, with the flags, `WOW_*` variables and TOML file of
//! `wow serve`:
//!
//! ```sh
//! cargo run -p wow-example-todo -- --store memory:// --listen 127.0.0.1:8099
//! cargo run -p wow-example-todo -- --store sqlite://./data/todo.db --config todo.toml
//! ```

use wow_example_todo::{OpenItems, TodoList};
use wow_service::Service;

fn main() -> std::process::ExitCode {
    Service::builder()
        .aggregate::<TodoList>()
        .view::<OpenItems>()
        .store("sqlite://./data/todo.db")
        .run()
}
