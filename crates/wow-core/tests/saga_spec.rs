//! The saga test kit: given a stream, scripted replies, expect the commands a saga sends with
//! the request ids a service derives (SPEC DS-3), with no store and no bus.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use async_trait::async_trait;
use wow_core::aggregate::DecodeDomainError;
use wow_core::event::ConsumerError;
use wow_core::saga::{saga_request_id, Saga, SagaContext, SagaReply, SagaSpec, StepError};
use wow_core::testing_example::{Add, Added, Counter, CounterCommand, CounterError, CounterEvent};
use wow_core::{AggregateId, DomainError, DomainEventStream, ErrorCode};

/// Mirrors every addition on the counter `<id>-mirror` of the same tenant; when the mirror
/// does not exist yet, starts it instead. Any other rejection fails the saga.
#[derive(Debug)]
struct Mirror;

#[async_trait]
impl Saga for Mirror {
    type Aggregate = Counter;

    fn name(&self) -> &str {
        "mirror"
    }

    async fn on_event(
        &self,
        event: &CounterEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let CounterEvent::Added(Added { by }) = event else {
            return Ok(());
        };
        let mut mirror = stream.aggregate_id.clone();
        mirror.id = format!("{}-mirror", mirror.id);
        match ctx
            .send_to::<Counter>(mirror.clone(), CounterCommand::Add(Add { by: *by }))
            .await
        {
            Ok(_) => Ok(()),
            Err(StepError::NotFound(_)) => {
                ctx.send_to::<Counter>(mirror, CounterCommand::Start)
                    .await?;
                Ok(())
            }
            Err(error) => Err(error.into()),
        }
    }
}

fn added(by: u64) -> CounterEvent {
    CounterEvent::Added(Added { by })
}

mod sends {
    use super::*;

    #[tokio::test]
    async fn one_command_per_event_to_the_same_tenant_with_derived_request_ids() {
        let given = SagaSpec::new(Mirror)
            .with_id("c-1")
            .with_tenant("tenant-a")
            .with_version(4)
            .given([added(2), added(3)]);
        let events: Vec<String> = given.stream().body.iter().map(|e| e.id.clone()).collect();
        assert_eq!(given.stream().version, 4);
        let expect = given
            .when_all_succeed()
            .await
            .expect_ok()
            .expect_command_names(&["add", "add"]);
        for (index, sent) in expect.expect_commands().iter().enumerate() {
            assert_eq!(
                sent.aggregate_id,
                AggregateId::new("demo", "counter", "c-1-mirror", "tenant-a")
            );
            assert_eq!(sent.request_id, saga_request_id(&events[index], 0));
        }
        assert_eq!(expect.expect_command(1).body["by"], 3);
        let CounterCommand::Add(add) = expect.expect_command(0).decode::<CounterCommand>().unwrap()
        else {
            panic!("the mirror is sent an add");
        };
        assert_eq!(add.by, 2);
    }

    #[tokio::test]
    async fn the_same_stream_derives_the_same_request_ids_on_every_run() {
        let run = || async {
            SagaSpec::new(Mirror)
                .given([added(1)])
                .when_replying(|_| SagaReply::Rejected(ErrorCode::NotFound))
                .await
                .expect_commands()
                .to_vec()
        };
        let (first, second) = (run().await, run().await);
        assert_eq!(first.len(), 2);
        assert_eq!(first, second, "a redelivery sends the same intents");
        assert_ne!(first[0].request_id, first[1].request_id);
    }

    #[tokio::test]
    async fn a_given_stream_is_run_as_given() {
        let stream = SagaSpec::new(Mirror).given([added(7)]).stream().clone();
        let mut stream = DomainEventStream {
            id: "s-9".into(),
            header: BTreeMap::from([("origin".into(), "test".into())]),
            ..stream
        };
        stream.body[0].id = "event-from-the-store".into();
        let expect = SagaSpec::new(Mirror)
            .given_stream(stream.clone())
            .when_all_succeed()
            .await;
        assert_eq!(expect.stream(), &stream);
        assert_eq!(
            expect.expect_command(0).request_id,
            saga_request_id("event-from-the-store", 0)
        );
    }

    #[test]
    fn a_run_can_move_between_threads() {
        fn assert_send<T: Send>(_: &T) {}
        let run = SagaSpec::new(Mirror).given([added(1)]).when_all_succeed();
        assert_send(&run);
    }

    #[tokio::test]
    async fn an_event_the_saga_ignores_sends_nothing() {
        SagaSpec::new(Mirror)
            .given([CounterEvent::Started])
            .when_replying(|command| panic!("nothing should be sent, got {command:?}"))
            .await
            .expect_ok()
            .expect_no_commands();
    }
}

mod replies {
    use super::*;

    #[tokio::test]
    async fn a_rejected_step_reaches_the_saga_and_the_next_command_gets_the_next_request_id() {
        let expect = SagaSpec::new(Mirror)
            .given([added(1)])
            .when_replying(|command| match command.name.as_str() {
                "add" => SagaReply::Rejected(ErrorCode::NotFound),
                _ => SagaReply::Succeeded,
            })
            .await
            .expect_ok()
            .expect_command_names(&["add", "start"]);
        let event = &expect.stream().body[0].id;
        assert_eq!(
            expect.expect_command(1).request_id,
            saga_request_id(event, 1)
        );
    }

    #[tokio::test]
    async fn a_duplicate_answer_counts_as_done_as_in_a_service() {
        SagaSpec::new(Mirror)
            .given([added(1)])
            .when_replying(|_| SagaReply::Rejected(ErrorCode::DuplicateRequestId))
            .await
            .expect_ok()
            .expect_command_names(&["add"]);
    }

    #[tokio::test]
    async fn another_rejection_fails_the_saga_and_stops_at_that_event() {
        let expect = SagaSpec::new(Mirror)
            .given([added(1), added(2)])
            .when_replying(|_| SagaReply::Rejected(ErrorCode::ServiceUnavailable))
            .await
            .expect_failure(ErrorCode::ServiceUnavailable)
            .expect_command_names(&["add"]);
        assert_eq!(
            expect.error().map(|e| &e.code),
            Some(&ErrorCode::ServiceUnavailable)
        );
    }

    #[tokio::test]
    async fn a_domain_rejection_is_named_by_the_typed_error() {
        SagaSpec::new(Mirror)
            .given([added(1)])
            .when_replying(|_| SagaReply::Rejected(CounterError::Overflow.error_code()))
            .await
            .expect_failure(ErrorCode::domain("Overflow"));
        SagaSpec::new(Mirror)
            .given([added(1)])
            .when_replying(|_| SagaReply::rejected_by(&CounterError::Overflow))
            .await
            .expect_failure(ErrorCode::domain("Overflow"));
    }

    #[tokio::test]
    async fn a_timed_out_step_fails_the_saga_with_request_timeout() {
        SagaSpec::new(Mirror)
            .given([added(1)])
            .when_replying(|_| SagaReply::TimedOut)
            .await
            .expect_failure(ErrorCode::RequestTimeout);
    }

    #[tokio::test]
    async fn the_replier_sees_each_command_once_in_order() {
        let mut seen = Vec::new();
        let expect = SagaSpec::new(Mirror)
            .given([added(1), added(2)])
            .when_replying(|command| {
                seen.push(command.request_id.clone());
                SagaReply::Succeeded
            })
            .await;
        let sent: Vec<String> = expect
            .expect_commands()
            .iter()
            .map(|c| c.request_id.clone())
            .collect();
        assert_eq!(seen, sent);
    }
}

mod failures {
    use super::*;

    #[tokio::test]
    #[should_panic(expected = "expected a command at index 1")]
    async fn a_missing_command_fails_the_test() {
        let expect = SagaSpec::new(Mirror)
            .given([added(1)])
            .when_all_succeed()
            .await;
        expect.expect_command(1);
    }

    #[tokio::test]
    #[should_panic(expected = "expected the saga to succeed")]
    async fn an_unexpected_failure_fails_the_test() {
        SagaSpec::new(Mirror)
            .given([added(1)])
            .when_replying(|_| SagaReply::Rejected(ErrorCode::IllegalState))
            .await
            .expect_ok();
    }

    #[tokio::test]
    #[should_panic(expected = "expected no commands")]
    async fn an_unexpected_command_fails_the_test() {
        SagaSpec::new(Mirror)
            .given([added(1)])
            .when_all_succeed()
            .await
            .expect_no_commands();
    }

    #[test]
    #[should_panic(expected = "at least one event")]
    fn an_empty_stream_is_refused() {
        SagaSpec::new(Mirror).given([]);
    }

    #[tokio::test]
    #[should_panic(expected = "other than Ok")]
    async fn a_rejection_with_ok_is_refused() {
        SagaSpec::new(Mirror)
            .given([added(1)])
            .when_replying(|_| SagaReply::Rejected(ErrorCode::Ok))
            .await;
    }
}

mod typed {
    use super::*;
    use wow_core::testing_example::CounterErrorKind;

    /// Sends an add to an aggregate of another type: the typed send refuses it unsent.
    #[derive(Debug)]
    struct Misrouted;

    #[async_trait]
    impl Saga for Misrouted {
        type Aggregate = Counter;

        fn name(&self) -> &str {
            "misrouted"
        }

        async fn on_event(
            &self,
            _: &CounterEvent,
            _: &DomainEventStream,
            ctx: &SagaContext<'_>,
        ) -> Result<(), ConsumerError> {
            let elsewhere = AggregateId::new("demo", "gauge", "g-1", "tenant-a");
            match ctx
                .send_to::<Counter>(elsewhere, CounterCommand::Start)
                .await
            {
                Err(error @ StepError::NotSent { .. }) => Err(error.into()),
                other => panic!("expected the send to be refused, got {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_command_for_an_aggregate_of_another_type_is_not_sent() {
        SagaSpec::new(Misrouted)
            .given([added(1)])
            .when_replying(|command| panic!("nothing should be sent, got {command:?}"))
            .await
            .expect_failure(ErrorCode::IllegalArgument)
            .expect_no_commands();
    }

    #[test]
    fn a_rejection_code_tells_the_kind_and_other_codes_none() {
        assert_eq!(
            CounterError::kind_of(&CounterError::Overflow.error_code()),
            Some(CounterErrorKind::Overflow)
        );
        assert_eq!(CounterError::kind_of(&ErrorCode::NotFound), None);
        assert_eq!(CounterError::kind_of(&ErrorCode::domain("Other")), None);
    }
}

/// SPEC TN-2: a saga acts for the owner and space of the aggregate whose event it reacts to,
/// unless it declares that it acts across owners.
mod owners {
    use super::*;
    use wow_core::command::{OWNER_ID_HEADER, SPACE_ID_HEADER};
    use wow_core::CommandMessage;

    /// Mirrors as [`Mirror`] does, naming `alice` and her space `s9` in the message it sends
    /// (what a saga that tries to act for another owner would write); across owners when
    /// `across` says so.
    #[derive(Debug)]
    struct Claiming {
        across: bool,
    }

    #[async_trait]
    impl Saga for Claiming {
        type Aggregate = Counter;

        fn name(&self) -> &str {
            "claiming"
        }

        fn acts_across_owners(&self) -> bool {
            self.across
        }

        async fn on_event(
            &self,
            event: &CounterEvent,
            stream: &DomainEventStream,
            ctx: &SagaContext<'_>,
        ) -> Result<(), ConsumerError> {
            let CounterEvent::Added(Added { by }) = event else {
                return Ok(());
            };
            let mut mirror = stream.aggregate_id.clone();
            mirror.id = "mirror".into();
            let mut message = CommandMessage::of(mirror, CounterCommand::Add(Add { by: *by }));
            message
                .header
                .insert(OWNER_ID_HEADER.to_owned(), "alice".into());
            message
                .header
                .insert(SPACE_ID_HEADER.to_owned(), "s9".into());
            ctx.send_message::<Counter>(message).await?;
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_sagas_commands_name_the_owner_and_space_of_the_event_whatever_the_saga_wrote() {
        let bob = SagaSpec::new(Mirror)
            .with_owner("bob")
            .with_space("s1")
            .given([added(2)])
            .when_all_succeed()
            .await
            .expect_ok();
        let sent = bob.expect_command(0);
        assert_eq!(
            (sent.owner_id(), sent.space_id()),
            (Some("bob"), Some("s1"))
        );

        // What the saga named in its message gives way to the event's owner and space.
        let claiming = SagaSpec::new(Claiming { across: false })
            .with_owner("bob")
            .with_space("s1")
            .given([added(2)])
            .when_all_succeed()
            .await
            .expect_ok();
        let sent = claiming.expect_command(0);
        assert_eq!(
            (sent.owner_id(), sent.space_id()),
            (Some("bob"), Some("s1"))
        );

        // An owner with no space: the command names the owner, and keeps the space the saga
        // narrowed it to.
        let spaceless = SagaSpec::new(Claiming { across: false })
            .with_owner("bob")
            .given([added(2)])
            .when_all_succeed()
            .await
            .expect_ok();
        let sent = spaceless.expect_command(0);
        assert_eq!(
            (sent.owner_id(), sent.space_id()),
            (Some("bob"), Some("s9"))
        );

        // An aggregate of no owner gives its saga none to carry.
        let unowned = SagaSpec::new(Mirror)
            .given([added(2)])
            .when_all_succeed()
            .await
            .expect_ok();
        let sent = unowned.expect_command(0);
        assert_eq!((sent.owner_id(), sent.space_id()), (None, None));
    }

    #[tokio::test]
    async fn a_saga_that_acts_across_owners_sends_what_it_wrote_and_nothing_of_the_event() {
        let across = SagaSpec::new(Claiming { across: true })
            .with_owner("bob")
            .with_space("s1")
            .given([added(2)])
            .when_all_succeed()
            .await
            .expect_ok();
        let sent = across.expect_command(0);
        assert_eq!(
            (sent.owner_id(), sent.space_id()),
            (Some("alice"), Some("s9"))
        );
        assert!(!Mirror.acts_across_owners(), "held to the owner by default");
    }

    #[tokio::test]
    async fn a_refusal_of_another_owners_aggregate_fails_the_saga_with_its_code() {
        SagaSpec::new(Mirror)
            .with_owner("bob")
            .given([added(2)])
            .when_replying(|sent| {
                assert_eq!(sent.owner_id(), Some("bob"));
                SagaReply::Rejected(ErrorCode::IllegalAccessOwnerAggregate)
            })
            .await
            .expect_failure(ErrorCode::IllegalAccessOwnerAggregate)
            .expect_command_names(&["add"]);
    }
}
