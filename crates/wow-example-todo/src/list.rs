//! The `todo` aggregate: a titled list of items, each open until it is completed.

use serde::{Deserialize, Serialize};
use validator::Validate;
use wow_core::aggregate::{Aggregate, CommandContext};
use wow_core::schemars;
use wow_core::{Command, DomainError, Event};

/// The todo list aggregate (context `todo`, aggregate `todo`).
#[derive(Debug)]
pub struct TodoList;

/// One item of a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// What is to be done.
    pub text: String,
    /// Whether it is done.
    pub done: bool,
}

/// What a list is now (`GET /todo/{id}/state` answers it bare, its version in `ETag`).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoState {
    /// The list's title.
    pub title: String,
    /// The items in the order they were added; item `n` is `items[n - 1]`.
    pub items: Vec<Item>,
}

/// `create_list`: a title of 1 to 200 characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateList {
    /// The title.
    #[validate(length(min = 1, max = 200))]
    pub title: String,
}

/// `add_item`: a text of 1 to 500 characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddItem {
    /// What is to be done.
    #[validate(length(min = 1, max = 500))]
    pub text: String,
}

/// `complete_item`: the number of an open item (items are numbered from 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteItem {
    /// The item's number.
    #[validate(range(min = 1))]
    pub item: u64,
}

/// The list's commands.
#[derive(Debug, Clone, Command)]
pub enum TodoCommand {
    /// Creates the list.
    #[command(create, validate)]
    CreateList(CreateList),
    /// Adds an open item.
    #[command(validate)]
    AddItem(AddItem),
    /// Completes an open item.
    #[command(validate)]
    CompleteItem(CompleteItem),
}

/// The list was created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListCreated {
    /// Its title.
    pub title: String,
}

/// An item was added, under the next number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemAdded {
    /// Its number.
    pub item: u64,
    /// Its text.
    pub text: String,
}

/// An item was completed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemCompleted {
    /// Its number.
    pub item: u64,
}

/// The list's events.
#[derive(Debug, Clone, PartialEq, Eq, Event)]
pub enum TodoEvent {
    /// Created.
    ListCreated(ListCreated),
    /// An item came in.
    ItemAdded(ItemAdded),
    /// An item was done.
    ItemCompleted(ItemCompleted),
}

/// The list's business rule (HTTP 422).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, DomainError)]
pub enum TodoError {
    /// The item is not on the list, or is done already.
    #[error("item {item} is not an open item of the list")]
    NoOpenItem {
        /// The item's number.
        item: u64,
    },
}

impl Aggregate for TodoList {
    const CONTEXT_NAME: &'static str = "todo";
    const AGGREGATE_NAME: &'static str = "todo";
    type State = TodoState;
    type Command = TodoCommand;
    type Event = TodoEvent;
    type Error = TodoError;

    fn handle(
        state: &TodoState,
        command: TodoCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<TodoEvent>, TodoError> {
        Ok(match command {
            TodoCommand::CreateList(CreateList { title }) => {
                vec![TodoEvent::ListCreated(ListCreated { title })]
            }
            TodoCommand::AddItem(AddItem { text }) => {
                let item = state.items.len() as u64 + 1;
                vec![TodoEvent::ItemAdded(ItemAdded { item, text })]
            }
            TodoCommand::CompleteItem(CompleteItem { item }) => {
                match item_index(item).and_then(|at| state.items.get(at)) {
                    Some(open) if !open.done => {
                        vec![TodoEvent::ItemCompleted(ItemCompleted { item })]
                    }
                    _ => return Err(TodoError::NoOpenItem { item }),
                }
            }
        })
    }

    fn apply(state: &mut TodoState, event: &TodoEvent) {
        match event {
            TodoEvent::ListCreated(created) => state.title = created.title.clone(),
            TodoEvent::ItemAdded(added) => state.items.push(Item {
                text: added.text.clone(),
                done: false,
            }),
            TodoEvent::ItemCompleted(completed) => {
                if let Some(item) =
                    item_index(completed.item).and_then(|at| state.items.get_mut(at))
                {
                    item.done = true;
                }
            }
        }
    }
}

/// Where item `number` sits in the list's items (numbers start at 1).
fn item_index(number: u64) -> Option<usize> {
    usize::try_from(number.checked_sub(1)?).ok()
}
