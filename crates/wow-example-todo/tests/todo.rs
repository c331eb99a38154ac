//! The todo list and its view of open items, given → when → expect.

use wow_core::aggregate::{AggregateSpec, DomainError};
use wow_core::view::ViewSpec;
use wow_core::ErrorCode;
use wow_example_todo::*;

fn created(title: &str) -> TodoEvent {
    TodoEvent::ListCreated(ListCreated {
        title: title.into(),
    })
}

fn added(item: u64, text: &str) -> TodoEvent {
    TodoEvent::ItemAdded(ItemAdded {
        item,
        text: text.into(),
    })
}

fn completed(item: u64) -> TodoEvent {
    TodoEvent::ItemCompleted(ItemCompleted { item })
}

fn complete(item: u64) -> TodoCommand {
    TodoCommand::CompleteItem(CompleteItem { item })
}

#[test]
fn create_list_records_the_title() {
    AggregateSpec::<TodoList>::new()
        .given_nothing()
        .when(TodoCommand::CreateList(CreateList {
            title: "Groceries".into(),
        }))
        .expect_events([created("Groceries")])
        .expect_state(|list| assert_eq!(list.title, "Groceries"));
}

#[test]
fn an_empty_title_or_text_is_a_binding_error() {
    AggregateSpec::<TodoList>::new()
        .given_nothing()
        .when(TodoCommand::CreateList(CreateList {
            title: String::new(),
        }))
        .expect_error_code(ErrorCode::CommandValidation)
        .expect_binding_errors(&["title"]);
    AggregateSpec::<TodoList>::new()
        .given([created("Groceries")])
        .when(TodoCommand::AddItem(AddItem {
            text: String::new(),
        }))
        .expect_binding_errors(&["text"]);
}

#[test]
fn items_are_numbered_from_one_in_the_order_added() {
    AggregateSpec::<TodoList>::new()
        .given([created("Groceries"), added(1, "Milk")])
        .when(TodoCommand::AddItem(AddItem {
            text: "Eggs".into(),
        }))
        .expect_events([added(2, "Eggs")])
        .expect_state(|list| {
            let texts: Vec<&str> = list.items.iter().map(|i| i.text.as_str()).collect();
            assert_eq!(texts, ["Milk", "Eggs"]);
        });
}

#[test]
fn completing_an_open_item_marks_it_done() {
    AggregateSpec::<TodoList>::new()
        .given([created("Groceries"), added(1, "Milk"), added(2, "Eggs")])
        .when(complete(2))
        .expect_events([completed(2)])
        .expect_state(|list| {
            let done: Vec<bool> = list.items.iter().map(|i| i.done).collect();
            assert_eq!(done, [false, true]);
        });
}

#[test]
fn completing_a_missing_or_done_item_is_no_open_item() {
    let rejected = TodoError::NoOpenItem { item: 1 }.error_code();
    AggregateSpec::<TodoList>::new()
        .given([created("Groceries")])
        .when(complete(1))
        .expect_error_code(rejected.clone());
    AggregateSpec::<TodoList>::new()
        .given([created("Groceries"), added(1, "Milk"), completed(1)])
        .when(complete(1))
        .expect_error_code(rejected);
}

#[test]
fn item_zero_is_a_binding_error() {
    AggregateSpec::<TodoList>::new()
        .given([created("Groceries")])
        .when(complete(0))
        .expect_binding_errors(&["item"]);
}

#[test]
fn the_view_holds_the_title_and_the_open_items() {
    ViewSpec::<OpenItems>::new()
        .given([
            created("Groceries"),
            added(1, "Milk"),
            added(2, "Eggs"),
            completed(1),
        ])
        .expect_state(OpenItemsState {
            title: "Groceries".into(),
            open: vec![OpenItem {
                item: 2,
                text: "Eggs".into(),
            }],
        })
        .expect_version(4);
}
