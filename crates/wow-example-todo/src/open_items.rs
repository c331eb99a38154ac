//! The `open_items` view: what is left to do on each list.

use serde::{Deserialize, Serialize};
use wow_core::schemars;
use wow_core::view::View;

use crate::{TodoEvent, TodoList};

/// The view of a list's open items (`GET /todo/{id}/view/open_items`).
#[derive(Debug)]
pub struct OpenItems;

/// One open item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpenItem {
    /// Its number.
    pub item: u64,
    /// What is to be done.
    pub text: String,
}

/// A list's title and its open items, in the order they were added.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpenItemsState {
    /// The list's title.
    pub title: String,
    /// The items not done yet.
    pub open: Vec<OpenItem>,
}

impl View for OpenItems {
    type Aggregate = TodoList;
    type State = OpenItemsState;
    const NAME: &'static str = "open_items";

    fn apply(state: &mut OpenItemsState, event: &TodoEvent) {
        match event {
            TodoEvent::ListCreated(created) => state.title = created.title.clone(),
            TodoEvent::ItemAdded(added) => state.open.push(OpenItem {
                item: added.item,
                text: added.text.clone(),
            }),
            TodoEvent::ItemCompleted(completed) => {
                state.open.retain(|open| open.item != completed.item);
            }
        }
    }
}
