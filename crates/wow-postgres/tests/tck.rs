//! The PostgreSQL store passes the whole conformance suite, each case in a schema of its own,
//! the race and duplicate-storm cases over separate pooled connections.

mod support;

mod event_store {
    wow_tck::event_store_tck!(optional: super::support::fresh);
}

mod snapshot_store {
    wow_tck::snapshot_store_tck!(optional: super::support::fresh);
}
