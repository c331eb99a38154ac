//! The one table of the view store's methods: the forwarding base
//! ([`ViewStoreDecorator`](super::ViewStoreDecorator)), the recording store
//! ([`RecordingViewStore`](super::RecordingViewStore)) and the enum of the methods
//! ([`ViewStoreMethod`](super::ViewStoreMethod)) are written from it.

/// Calls `$then!` with every method of [`ViewStore`](super::ViewStore): its name, its
/// parameters, its answer and its [`ViewStoreMethod`](super::ViewStoreMethod) variant. The
/// names it uses must be in scope where it is called.
macro_rules! view_store_methods {
    ($then:ident) => {
        $then! {
            update(key: &ViewKey, message_id: &str, work: ViewUpdate) -> Result<Processed, ProcessError> => Update;
            put_newer(row: ViewRow) -> Result<bool, ViewStoreError> => PutNewer;
            load(key: &ViewKey) -> Result<Option<ViewRow>, ViewStoreError> => Load;
            list(view: &str, tenant_id: &str, filter: &ViewFilter, after: Option<&str>, limit: usize) -> Result<Vec<ViewRow>, ViewStoreError> => List;
            query(view: &str, tenant_id: &str, query: &DocumentQuery) -> Result<Vec<ViewRow>, ViewStoreError> => Query;
            count(view: &str, tenant_id: &str, filter: &Filter) -> Result<u64, ViewStoreError> => Count;
            scan(view: &str, after: Option<&ViewKey>, limit: usize) -> Result<Vec<ViewRow>, ViewStoreError> => Scan;
            clear(view: &str) -> Result<(), ViewStoreError> => Clear;
            declare_query_index(view: &str) -> Result<(), ViewStoreError> => DeclareQueryIndex;
            declare_field_index(view: &str, field: &str) -> Result<(), ViewStoreError> => DeclareFieldIndex;
        }
    };
}
