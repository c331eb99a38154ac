//! # The `todo` example
//!
//! A second example domain, small enough to read in one sitting: a todo list aggregate
//! ([`TodoList`]: create a list, add an item, complete an item) and a view of its open
//! items ([`OpenItems`]). `src/main.rs` serves both through `wow_service::Service`;
//! `tests/todo.rs` tests them given → when → expect, `tests/serve.rs` over HTTP.
//!
//! ```sh
//! cargo run -p wow-example-todo -- --store memory:// --listen 127.0.0.1:8099
//! curl -X POST localhost:8099/todo/groceries/create_list --json '{"title":"Groceries"}'
//! curl -X POST localhost:8099/todo/groceries/add_item --json '{"text":"Milk"}'
//! curl localhost:8099/todo/groceries/view/open_items
//! ```

mod list;
mod open_items;

pub use list::{
    AddItem, CompleteItem, CreateList, Item, ItemAdded, ItemCompleted, ListCreated, TodoCommand,
    TodoError, TodoEvent, TodoList, TodoState,
};
pub use open_items::{OpenItem, OpenItems, OpenItemsState};
