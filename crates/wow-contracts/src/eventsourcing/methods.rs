//! The one table of the event store's methods, by narrow trait: the forwarding base
//! ([`EventStoreDecorator`](super::EventStoreDecorator)), the recording store
//! ([`RecordingEventStore`](super::RecordingEventStore)) and the enum of the methods
//! ([`EventStoreMethod`](super::EventStoreMethod)) are written from it, so a method added to
//! a narrow trait is added to all of them by one line here.

/// Calls `$then!` with every method of the narrow event-store traits, grouped by trait: each
/// method's name, its parameters, what it answers on success and its
/// [`EventStoreMethod`](super::EventStoreMethod) variant. The names it uses must be in scope
/// where it is called.
macro_rules! event_store_methods {
    ($then:ident) => {
        $then! {
            History {
                append(stream: &DomainEventStream) -> () => Append;
                append_with(stream: &DomainEventStream, changes: &AppendChanges) -> () => AppendWith;
                load(aggregate_id: &AggregateId, head: u64, tail: u64) -> Vec<DomainEventStream> => Load;
                load_by_time(aggregate_id: &AggregateId, start: i64, end: i64) -> Vec<DomainEventStream> => LoadByTime;
                last(aggregate_id: &AggregateId) -> Option<DomainEventStream> => Last;
                scan_aggregate_ids(named: &NamedAggregate, after: Option<&AggregateId>, limit: usize) -> Vec<AggregateId> => ScanAggregateIds;
            }
            RequestLog {
                find_request(aggregate_id: &AggregateId, request_id: &str) -> Option<RequestRecord> => FindRequest;
                find_decision(aggregate_id: &AggregateId, request_id: &str) -> Option<RequestDecision> => FindDecision;
                record_rejection(aggregate_id: &AggregateId, request_id: &str, rejection: &RejectionRecord) -> () => RecordRejection;
            }
            EventFeed {
                read_feed(after: GlobalPosition, limit: usize) -> Vec<FeedEntry> => ReadFeed;
            }
            StreamQueries {
                query_streams(streams: TenantStreams<'_>, query: &DocumentQuery) -> Vec<DomainEventStream> => QueryStreams;
                count_streams(streams: TenantStreams<'_>, filter: &Filter) -> u64 => CountStreams;
            }
            KeyIndex {
                find_key(tenant_id: &str, key: &UniqueKey) -> Option<KeyHolder> => FindKey;
                claim_keys(claim: KeysToClaim<'_>) -> Vec<KeyClaim> => ClaimKeys;
                release_key(tenant_id: &str, key: &UniqueKey) -> Option<KeyHolder> => ReleaseKey;
            }
        }
    };
}
