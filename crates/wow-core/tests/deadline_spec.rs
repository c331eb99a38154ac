//! The test kit controls time for deadlines (SPEC DM-2): given now, advance, expect the fired
//! command.

use std::time::Duration;

use wow_core::aggregate::AggregateSpec;
use wow_core::deadline::DeadlineChange;
use wow_core::testing_example::{Hold, HoldCommand, HoldEvent, HoldPlaced, Nothing, PlaceHold};
use wow_core::ErrorCode;

const T0: i64 = 1_800_000_000_000;

#[test]
fn placing_a_hold_schedules_its_expiry_and_advancing_past_it_fires_the_command() {
    let placed = AggregateSpec::<Hold>::new()
        .given_nothing()
        .at(T0)
        .when(HoldCommand::Place(PlaceHold { minutes: 15 }))
        .expect_events([HoldEvent::Placed(HoldPlaced {
            expires_at: T0 + 15 * 60_000,
        })])
        .expect_deadlines(|deadlines| {
            assert_eq!(deadlines.len(), 1);
            assert_eq!(deadlines[0].name, "expire");
            assert_eq!(deadlines[0].due_at, T0 + 15 * 60_000);
        });
    match placed.deadline_changes() {
        [DeadlineChange::Schedule(row)] => {
            assert_eq!(row.command, "expire");
            assert_eq!(row.request_id, "deadline/expire/1");
        }
        other => panic!("expected one schedule, got {other:?}"),
    }
    let early = placed
        .advance(Duration::from_secs(14 * 60))
        .expect_fired([]);
    early
        .advance(Duration::from_secs(60))
        .expect_fired([HoldCommand::Expire(Nothing {})])
        .expect_events([HoldEvent::Expired(Nothing {})])
        .expect_state(|state| assert!(state.expired))
        .expect_deadlines(|deadlines| assert!(deadlines.is_empty()));
}

#[test]
fn a_confirmed_hold_cancels_its_expiry_and_nothing_fires() {
    let confirmed = AggregateSpec::<Hold>::new()
        .given([HoldEvent::Placed(HoldPlaced {
            expires_at: T0 + 60_000,
        })])
        .at(T0)
        .when(HoldCommand::Confirm(Nothing {}))
        .expect_events([HoldEvent::Confirmed(Nothing {})]);
    assert_eq!(
        confirmed.deadline_changes(),
        &[DeadlineChange::Cancel {
            name: "expire".to_owned()
        }]
    );
    confirmed
        .advance(Duration::from_secs(3600))
        .expect_fired([])
        .expect_deadlines(|deadlines| assert!(deadlines.is_empty()));
}

#[test]
fn an_expire_that_comes_late_is_a_business_rejection() {
    AggregateSpec::<Hold>::new()
        .given([
            HoldEvent::Placed(HoldPlaced { expires_at: T0 }),
            HoldEvent::Confirmed(Nothing {}),
        ])
        .at(T0)
        .when(HoldCommand::Expire(Nothing {}))
        .expect_error_code(ErrorCode::Domain("NotPending".into()));
}

#[tokio::test]
async fn a_saga_spec_shows_what_the_saga_scheduled() {
    use wow_core::saga::SagaSpec;
    use wow_core::testing_example::AutoConfirm;
    let expect = SagaSpec::new(AutoConfirm)
        .with_id("h-1")
        .given([HoldEvent::Placed(HoldPlaced { expires_at: T0 })])
        .when_all_succeed()
        .await
        .expect_ok()
        .expect_no_commands();
    let scheduled = expect.expect_scheduled();
    assert_eq!(scheduled.len(), 1);
    assert_eq!(scheduled[0].name, "auto-confirm/confirm");
    assert_eq!(scheduled[0].command, "confirm");
    assert_eq!(scheduled[0].owner.id, "h-1");
    assert_eq!(
        scheduled[0].due_at, 30_000,
        "the stream's time and thirty seconds"
    );
    assert_eq!(scheduled[0].request_id, "spec-event-1-0/0");
}

mod undeclared {
    //! A deadline that names a command not declared `#[command(deadline)]`.
    use serde::{Deserialize, Serialize};
    use wow_core::aggregate::{Aggregate, CommandContext};
    use wow_core::deadline::Deadline;
    use wow_core::{Command, DomainError, Event};

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
    pub(crate) struct Empty {}

    #[derive(Debug, Clone, PartialEq, Command)]
    pub(crate) enum ReminderCommand {
        #[command(create)]
        Start(Empty),
        /// Not declared `#[command(deadline)]`.
        Remind(Empty),
    }

    #[derive(Debug, Clone, PartialEq, Event)]
    pub(crate) enum ReminderEvent {
        Started(Empty),
    }

    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, DomainError)]
    pub(crate) enum ReminderError {
        #[error("never")]
        Never,
    }

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
    pub(crate) struct ReminderState {
        started: bool,
    }

    #[derive(Debug)]
    pub(crate) struct Reminder;

    impl Aggregate for Reminder {
        const CONTEXT_NAME: &'static str = "demo";
        const AGGREGATE_NAME: &'static str = "reminder";
        type State = ReminderState;
        type Command = ReminderCommand;
        type Event = ReminderEvent;
        type Error = ReminderError;

        fn handle(
            _: &ReminderState,
            command: ReminderCommand,
            _: &CommandContext<'_>,
        ) -> Result<Vec<ReminderEvent>, ReminderError> {
            match command {
                ReminderCommand::Start(_) => Ok(vec![ReminderEvent::Started(Empty {})]),
                ReminderCommand::Remind(_) => Err(ReminderError::Never),
            }
        }

        fn apply(state: &mut ReminderState, event: &ReminderEvent) {
            match event {
                ReminderEvent::Started(_) => state.started = true,
            }
        }

        fn deadlines(state: &ReminderState) -> Option<Vec<Deadline<ReminderCommand>>> {
            Some(if state.started {
                vec![Deadline::new(
                    "remind",
                    1,
                    ReminderCommand::Remind(Empty {}),
                )]
            } else {
                Vec::new()
            })
        }
    }
}

/// SPEC DM-6: a deadline may fire only a command declared `#[command(deadline)]` (internal
/// unless declared `public`); a decision that schedules another fails as a fault of the
/// domain's code, caught by the team's first test, and records nothing.
#[test]
fn a_deadline_that_fires_an_undeclared_command_fails_the_decision() {
    use undeclared::{Empty, Reminder, ReminderCommand};
    AggregateSpec::<Reminder>::new()
        .given_nothing()
        .at(T0)
        .when(ReminderCommand::Start(Empty {}))
        .expect_error_code(ErrorCode::InternalServerError);
}

/// `#[command(deadline)]` makes a command internal; `#[command(deadline, public)]` keeps it
/// routed.
#[test]
fn a_deadline_command_is_internal_unless_declared_public() {
    use wow_core::command::CommandBody;
    let info = |name: &str| {
        *HoldCommand::COMMANDS
            .iter()
            .find(|c| c.name == name)
            .expect("the hold's command")
    };
    assert!(info("expire").deadline && info("expire").internal);
    assert!(info("confirm").deadline && !info("confirm").internal);
    assert!(!info("place").deadline && !info("place").internal);
}

mod cancel_from_elsewhere {
    //! A saga cancels a deadline of another aggregate, and every aggregate's of one name
    //! (SPEC DM-2): Axon's `cancelAll`.
    use wow_core::aggregate::Aggregate;
    use wow_core::deadline::ScheduledCommand;
    use wow_core::event::ConsumerError;
    use wow_core::saga::{Saga, SagaContext, SagaSpec};
    use wow_core::testing_example::{Hold, HoldEvent, HoldPlaced, Nothing};
    use wow_core::{AggregateId, DomainEventStream, ErrorCode};

    /// On a confirmed hold, cancels the reminder of the hold named in its tenant `h-9`; on
    /// an expired one, every hold's reminder; on a placed one, the reminder of `h-9` in
    /// another tenant (refused).
    #[derive(Debug)]
    struct Reminders;

    fn hold(id: &str, tenant: &str) -> AggregateId {
        Hold::named_aggregate().aggregate_id(id.to_owned(), tenant.to_owned())
    }

    fn reminder(owner: AggregateId, saga: &str) -> ScheduledCommand {
        ScheduledCommand {
            target: owner.clone(),
            owner,
            name: format!("{saga}/remind"),
            due_at: 1_000,
            command: "confirm".to_owned(),
            body: serde_json::json!({}),
            request_id: "earlier-event/0".to_owned(),
            held_to: None,
        }
    }

    #[async_trait::async_trait]
    impl Saga for Reminders {
        type Aggregate = Hold;

        fn name(&self) -> &str {
            "reminders"
        }

        async fn on_event(
            &self,
            event: &HoldEvent,
            stream: &DomainEventStream,
            ctx: &SagaContext<'_>,
        ) -> Result<(), ConsumerError> {
            let tenant = &stream.aggregate_id.tenant_id;
            match event {
                HoldEvent::Confirmed(_) => ctx
                    .cancel_scheduled_for(&hold("h-9", tenant), "remind")
                    .await
                    .map(drop),
                HoldEvent::Expired(_) => ctx.cancel_all_scheduled("remind").await.map(drop),
                HoldEvent::Placed(_) => ctx
                    .cancel_scheduled_for(&hold("h-9", "elsewhere"), "remind")
                    .await
                    .map(drop),
            }
        }
    }

    #[tokio::test]
    async fn an_event_of_one_aggregate_cancels_the_deadline_of_another() {
        let tenant = wow_core::DEFAULT_TENANT_ID;
        let expect = SagaSpec::new(Reminders)
            .with_id("h-1")
            .given([HoldEvent::Confirmed(Nothing {})])
            .with_scheduled([
                reminder(hold("h-9", tenant), "reminders"),
                reminder(hold("h-8", tenant), "reminders"),
            ])
            .when_all_succeed()
            .await
            .expect_ok();
        let cancelled = expect.expect_cancelled();
        assert_eq!(cancelled.len(), 1, "only h-9's: {cancelled:?}");
        assert_eq!(cancelled[0].owner.id, "h-9");
        assert!(expect.expect_scheduled().is_empty());
    }

    #[tokio::test]
    async fn cancel_all_takes_the_sagas_rows_of_the_name_in_its_tenant_only() {
        let tenant = wow_core::DEFAULT_TENANT_ID;
        let expect = SagaSpec::new(Reminders)
            .with_id("h-1")
            .given([HoldEvent::Expired(Nothing {})])
            .with_scheduled([
                reminder(hold("h-9", tenant), "reminders"),
                reminder(hold("h-8", tenant), "reminders"),
                reminder(hold("h-7", tenant), "another-saga"),
                reminder(hold("h-9", "elsewhere"), "reminders"),
            ])
            .when_all_succeed()
            .await
            .expect_ok();
        let cancelled: Vec<(&str, &str)> = expect
            .expect_cancelled()
            .iter()
            .map(|row| (row.owner.id.as_str(), row.owner.tenant_id.as_str()))
            .collect();
        assert_eq!(cancelled, [("h-9", tenant), ("h-8", tenant)]);
    }

    #[tokio::test]
    async fn a_deadline_of_another_tenant_is_never_cancelled() {
        let expect = SagaSpec::new(Reminders)
            .with_id("h-1")
            .given([HoldEvent::Placed(HoldPlaced { expires_at: 0 })])
            .with_scheduled([reminder(hold("h-9", "elsewhere"), "reminders")])
            .when_all_succeed()
            .await
            .expect_failure(ErrorCode::IllegalArgument);
        assert!(expect.expect_cancelled().is_empty());
    }
}
