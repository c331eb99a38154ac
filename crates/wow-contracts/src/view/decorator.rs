//! The forwarding base of view store decorators, made as the event store's is (its module
//! doc, [`EventStoreDecorator`](crate::eventsourcing::EventStoreDecorator), says why): a
//! wrapper states the methods whose behaviour it changes, and every other one reaches the
//! view store it wraps, the query methods and
//! [`declare_query_index`](ViewStore::declare_query_index) included.

use async_trait::async_trait;

use crate::event::{ProcessError, Processed};
use crate::view::{ViewFilter, ViewStore, ViewStoreError, ViewUpdate};
use wow_model::query::{DocumentQuery, Filter};
use wow_model::view::{ViewKey, ViewRow};

/// Writes the forwarding base from the table of [`view_store_methods!`]: the decorator trait,
/// each method forwarding to `inner` by default, and the blanket impl that makes every
/// decorator a view store.
macro_rules! forwarding_base {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $variant:ident;)*) => {
        /// A wrapper that adds one concern to the [`ViewStore`] it wraps: every type that
        /// implements it is a [`ViewStore`] whose methods are these, each forwarding to
        /// [`inner`](Self::inner) unless the wrapper states it. Each method's contract is that
        /// of the [`ViewStore`] method of its name.
        #[async_trait]
        pub trait ViewStoreDecorator: Send + Sync + std::fmt::Debug {
            /// The store this wrapper adds its concern to: every method it does not state is
            /// this store's.
            fn inner(&self) -> &dyn ViewStore;

            $(
                #[doc = concat!("[`ViewStore::", stringify!($name), "`]; by default the inner store's.")]
                async fn $name(&self, $($arg: $ty),*) -> $ret {
                    self.inner().$name($($arg),*).await
                }
            )*
        }

        /// Every view store decorator is a view store: each method is the decorator's own.
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<T: ViewStoreDecorator> ViewStore for T {
            $(
                async fn $name(&self, $($arg: $ty),*) -> $ret {
                    ViewStoreDecorator::$name(self, $($arg),*).await
                }
            )*
        }
    };
}

view_store_methods!(forwarding_base);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{RecordingViewStore, ViewStoreMethod};

    /// States nothing but its inner store.
    #[derive(Debug, Default)]
    struct Plain(RecordingViewStore);

    impl ViewStoreDecorator for Plain {
        fn inner(&self) -> &dyn ViewStore {
            &self.0
        }
    }

    #[tokio::test]
    async fn every_view_store_method_of_a_decorator_that_states_none_reaches_the_inner_store() {
        let plain = Plain::default();
        assert_eq!(
            plain.0.trace(&plain).await,
            ViewStoreMethod::forwarded_trace()
        );
    }
}
