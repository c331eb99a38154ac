//! A view store that records which of its methods were called: the inner store of the
//! forwarding tests of view store decorators (see
//! [`ViewStoreDecorator`](crate::view::ViewStoreDecorator)).

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::event::{ProcessError, Processed};
use crate::eventsourcing::recording::Calls;
use crate::view::{InMemoryViewStore, ViewFilter, ViewStore, ViewStoreError, ViewUpdate};
use wow_model::id::new_id;
use wow_model::query::{DocumentQuery, Filter};
use wow_model::view::{ViewKey, ViewRow};

/// Declares [`ViewStoreMethod`] from the table of [`view_store_methods!`]: one variant per
/// method of [`ViewStore`], in the table's order.
macro_rules! method_enum {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $answer:ty => $variant:ident;)*) => {
        /// A method of [`ViewStore`], by name: what a [`RecordingViewStore`] records.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum ViewStoreMethod {
            $(
                #[doc = concat!("[`ViewStore::", stringify!($name), "`].")]
                $variant,
            )*
        }

        impl ViewStoreMethod {
            /// Every method of [`ViewStore`], in the order of its table.
            pub const ALL: &'static [ViewStoreMethod] = &[$(ViewStoreMethod::$variant,)*];
        }
    };
}

view_store_methods!(method_enum);

impl ViewStoreMethod {
    /// What [`RecordingViewStore::trace`] answers through a decorator that changes nothing:
    /// each method reaches the inner store once, as itself. A test of a wrapper that keeps a
    /// method from the inner store on purpose changes that method's entry.
    pub fn forwarded_trace() -> BTreeMap<Self, Vec<Self>> {
        Self::ALL
            .iter()
            .map(|&method| (method, vec![method]))
            .collect()
    }

    /// Calls this method once on `store`, on a view of its own (`recording-` and a new id),
    /// with arguments an empty store accepts (an update that stores nothing), and answers
    /// whether the call succeeded.
    pub async fn call(self, store: &dyn ViewStore) -> Result<(), ViewStoreError> {
        let view = format!("recording-{}", new_id());
        let key = ViewKey::new(view.as_str(), "tenant", new_id());
        match self {
            Self::Update => store
                .update(&key, &new_id(), Box::new(|_| Ok(None)))
                .await
                .map(drop)
                .map_err(|error| ViewStoreError::Internal(error.to_string().into())),
            Self::PutNewer => store
                .put_newer(ViewRow {
                    key,
                    version: 1,
                    state: serde_json::Value::Null,
                    updated_at: 0,
                })
                .await
                .map(drop),
            Self::Load => store.load(&key).await.map(drop),
            Self::List => store
                .list(&view, "tenant", &ViewFilter::new(), None, 10)
                .await
                .map(drop),
            Self::Query => store
                .query(&view, "tenant", &DocumentQuery::new(Filter::All, 10))
                .await
                .map(drop),
            Self::Count => store.count(&view, "tenant", &Filter::All).await.map(drop),
            Self::Scan => store.scan(&view, None, 10).await.map(drop),
            Self::Clear => store.clear(&view).await,
            Self::DeclareQueryIndex => store.declare_query_index(&view).await,
            Self::DeclareFieldIndex => store.declare_field_index(&view, "field").await,
        }
    }
}

/// An [`InMemoryViewStore`] that records each of its methods that is called, in call order;
/// every call is then answered by the in-memory store.
#[derive(Debug, Default)]
pub struct RecordingViewStore {
    store: InMemoryViewStore,
    calls: Calls<ViewStoreMethod>,
}

impl RecordingViewStore {
    /// An empty store that has recorded nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The methods called since the last take, in call order; the record is then empty.
    pub fn take_calls(&self) -> Vec<ViewStoreMethod> {
        self.calls.take()
    }

    /// Calls each method of [`ViewStore`] once on `outer`, a wrapper (or a stack of them)
    /// over this store, and answers, for each, the methods of this store the call reached, in
    /// order. The answers of the calls are not judged: a wrapper that fails a call without
    /// asking this store shows as a method that reached nothing. Compare with
    /// [`ViewStoreMethod::forwarded_trace`].
    pub async fn trace(
        &self,
        outer: &dyn ViewStore,
    ) -> BTreeMap<ViewStoreMethod, Vec<ViewStoreMethod>> {
        self.calls.take();
        let mut traced = BTreeMap::new();
        for &method in ViewStoreMethod::ALL {
            // Whether the call succeeded is the wrapper's business; what it reached is ours.
            let _answer = method.call(outer).await;
            traced.insert(method, self.calls.take());
        }
        traced
    }
}

/// Writes the recording view store's impl from the table of [`view_store_methods!`]: each
/// method records its [`ViewStoreMethod`], then asks the in-memory store.
macro_rules! recording_impl {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $variant:ident;)*) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl ViewStore for RecordingViewStore {
            $(
                async fn $name(&self, $($arg: $ty),*) -> $ret {
                    self.calls.push(ViewStoreMethod::$variant);
                    self.store.$name($($arg),*).await
                }
            )*
        }
    };
}

view_store_methods!(recording_impl);
