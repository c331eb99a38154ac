//! An example aggregate, written the way a team writes one, and what the framework does with
//! it: the test kit, the JSON runtime of the registry, and the derive macros' contracts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use wow_core::aggregate::{
    AggregateError, AggregateRegistry, AggregateSpec, CommandContext, DuplicateAggregateName,
};
use wow_core::command::{CommandBody, CommandKind, EventBody};
use wow_core::{id, AggregateId, DomainError, DomainEvent, DomainEventStream, ErrorCode};

mod support;

use support::*;

fn opened(balance: u64) -> AccountEvent {
    AccountEvent::AccountOpened(AccountOpened {
        name: "Ann".into(),
        balance,
    })
}

fn spec() -> AggregateSpec<Account> {
    AggregateSpec::new()
}

// ---- the test kit ----

#[test]
fn open_creates_the_account() {
    spec()
        .given_nothing()
        .when(AccountCommand::Open(Open {
            name: "Ann".into(),
            balance: 10,
        }))
        .expect_events([opened(10)])
        .expect_state(|s| assert_eq!((s.name.as_str(), s.balance), ("Ann", 10)));
}

#[test]
fn withdraw_beyond_the_balance_is_a_business_rule() {
    let expect = spec()
        .given([opened(10)])
        .when(AccountCommand::Withdraw(Amount { amount: 11 }))
        .expect_error_code(ErrorCode::domain("InsufficientBalance"))
        .expect_state(|s| assert_eq!(s.balance, 10));
    assert_eq!(expect.version(), 1, "a rejected command records nothing");
}

#[test]
fn a_frozen_account_rejects_deposits() {
    spec()
        .given([opened(10), AccountEvent::AccountFrozen])
        .when(AccountCommand::Deposit(Amount { amount: 1 }))
        .expect_error_code(ErrorCode::domain("AccountFrozen"));
}

#[test]
fn validation_fails_before_the_handler_runs() {
    spec()
        .given([opened(10), AccountEvent::AccountFrozen])
        .when(AccountCommand::Deposit(Amount { amount: 0 }))
        .expect_error_code(ErrorCode::CommandValidation)
        .expect_binding_errors(&["amount"]);
    spec()
        .given_nothing()
        .when(AccountCommand::Open(Open {
            name: String::new(),
            balance: 0,
        }))
        .expect_binding_errors(&["name"]);
}

#[test]
fn check_succeeds_without_recording_anything() {
    let expect = spec()
        .given([opened(10)])
        .when(AccountCommand::Check)
        .expect_no_events();
    assert_eq!(expect.version(), 1);
}

#[test]
fn existence_rules_apply_in_the_test_kit() {
    spec()
        .given_nothing()
        .when(AccountCommand::Deposit(Amount { amount: 1 }))
        .expect_error_code(ErrorCode::NotFound);
    spec()
        .given([opened(1)])
        .when(AccountCommand::Open(Open {
            name: "Bob".into(),
            balance: 0,
        }))
        .expect_error_code(ErrorCode::DuplicateAggregateId);
    spec()
        .given_nothing()
        .when(AccountCommand::SetBalance(Amount { amount: 7 }))
        .expect_events([AccountEvent::Set(Moved { amount: 7 })]);
    spec()
        .given([opened(1)])
        .when(AccountCommand::Audit)
        .expect_error_code(ErrorCode::IllegalArgument);
}

#[test]
fn domain_error_codes_follow_variant_names_or_the_attribute() {
    assert_eq!(
        AccountError::InsufficientBalance {
            balance: 1,
            amount: 2
        }
        .error_code(),
        ErrorCode::domain("InsufficientBalance")
    );
    assert_eq!(
        AccountError::NotForAccount.error_code(),
        ErrorCode::IllegalState
    );
}

// ---- the derive macros ----

#[test]
fn commands_are_named_in_snake_case_with_their_kinds() {
    let names: Vec<_> = AccountCommand::COMMANDS
        .iter()
        .map(|c| (c.name, c.kind))
        .collect();
    assert_eq!(
        names,
        vec![
            ("open", CommandKind::Create),
            ("deposit", CommandKind::Normal),
            ("withdraw", CommandKind::Normal),
            ("freeze", CommandKind::Normal),
            ("check", CommandKind::Normal),
            ("upsert_balance", CommandKind::AllowCreate),
            ("audit", CommandKind::Void),
        ]
    );
    assert_eq!(AccountCommand::Freeze.command_name(), "freeze");
    assert_eq!(AccountCommand::Audit.kind(), CommandKind::Void);
}

#[test]
fn events_keep_their_names_and_revisions() {
    assert_eq!(
        AccountEvent::EVENTS,
        &[
            "AccountOpened",
            "Deposited",
            "Withdrawn",
            "AccountFrozen",
            "BalanceSet"
        ]
    );
    let withdrawn = DomainEvent::of(&AccountEvent::Withdrawn(Moved { amount: 3 })).unwrap();
    assert_eq!(
        (withdrawn.name.as_str(), withdrawn.revision.as_str()),
        ("Withdrawn", "0.0.2")
    );
    assert_eq!(withdrawn.body, json!({"amount": 3}));
    assert_eq!(
        withdrawn.decode::<AccountEvent>().unwrap(),
        AccountEvent::Withdrawn(Moved { amount: 3 })
    );
    let frozen = DomainEvent::of(&AccountEvent::AccountFrozen).unwrap();
    assert_eq!(frozen.body, json!({}));
}

// ---- the JSON runtime ----

#[test]
fn registry_refuses_two_aggregates_with_one_name() {
    let mut registry = registry();
    assert_eq!(
        registry.register::<Account>().unwrap_err(),
        DuplicateAggregateName("account".into()).into()
    );
}

#[test]
fn runtime_decodes_validates_and_rejects_bad_bodies() {
    let registry = registry();
    let account = registry.get("account").unwrap();
    assert_eq!(account.named_aggregate().context_name, "bank");

    let unknown = account.decode_command("close", &json!({})).unwrap_err();
    assert_eq!(unknown.error_code(), ErrorCode::NotFound);

    let wrong_type = account
        .decode_command("deposit", &json!({"amount": "ten"}))
        .unwrap_err();
    assert_eq!(wrong_type.error_code(), ErrorCode::BadRequest);
    assert_eq!(wrong_type.binding_errors()[0].name, "amount");

    let missing = account.decode_command("deposit", &json!({})).unwrap_err();
    assert_eq!(missing.error_code(), ErrorCode::BadRequest);
    assert_eq!(missing.binding_errors()[0].name, "amount");

    let negative = account
        .decode_command("deposit", &json!({"amount": -5}))
        .unwrap_err();
    assert_eq!(negative.error_code(), ErrorCode::BadRequest);

    let unknown_field = account
        .decode_command("deposit", &json!({"amount": 5, "extra": 1}))
        .unwrap_err();
    assert_eq!(unknown_field.binding_errors()[0].name, "extra");

    let invalid = account
        .decode_command("deposit", &json!({"amount": 0}))
        .unwrap_err();
    assert!(matches!(&invalid, AggregateError::Validation(errors) if errors[0].name == "amount"));
    assert_eq!(invalid.error_code(), ErrorCode::CommandValidation);

    let unit_with_fields = account
        .decode_command("freeze", &json!({"now": true}))
        .unwrap_err();
    assert_eq!(unit_with_fields.error_code(), ErrorCode::BadRequest);
    assert!(account.decode_command("freeze", &json!({})).is_ok());
    assert!(account.decode_command("freeze", &json!(null)).is_ok());
}

fn stream_of(
    aggregate_id: &AggregateId,
    version: u64,
    events: Vec<DomainEvent>,
) -> DomainEventStream {
    DomainEventStream {
        id: id::new_id(),
        request_id: id::new_id(),
        command_id: id::new_id(),
        aggregate_id: aggregate_id.clone(),
        version,
        create_time: id::now_millis(),
        fingerprint: String::new(),
        header: Default::default(),
        body: events,
    }
}

#[test]
fn runtime_handles_and_applies_through_json() {
    let registry = registry();
    let account = registry.get("account").unwrap();
    let aggregate_id = account_id();
    let mut state = account.initial_state();
    let command_id = id::new_id();
    let services = wow_core::aggregate::Services::new();
    let ctx = |version| CommandContext {
        aggregate_id: &aggregate_id,
        version,
        command_id: &command_id,
        request_id: &command_id,
        now: 0,
        services: &services,
        deadline: None,
        reads: None,
    };

    let open = account
        .decode_command("open", &json!({"name": "Ann", "balance": 5}))
        .unwrap();
    assert_eq!((open.name(), open.kind()), ("open", CommandKind::Create));
    let events = futures::executor::block_on(account.handle(&state, &open, &ctx(0)))
        .unwrap()
        .events;
    assert_eq!(events[0].name, "AccountOpened");
    account
        .apply(&mut state, &stream_of(&aggregate_id, 1, events))
        .unwrap();

    let deposit = account
        .decode_command("deposit", &json!({"amount": 7}))
        .unwrap();
    let events = futures::executor::block_on(account.handle(&state, &deposit, &ctx(1)))
        .unwrap()
        .events;
    account
        .apply(&mut state, &stream_of(&aggregate_id, 2, events))
        .unwrap();
    assert_eq!(state.version(), 2);
    assert_eq!(
        state.to_json().unwrap(),
        json!({"name": "Ann", "balance": 12, "frozen": false})
    );
    assert_eq!(state.downcast_ref::<AccountState>().unwrap().balance, 12);

    let withdraw = account
        .decode_command("withdraw", &json!({"amount": 100}))
        .unwrap();
    let rejected =
        futures::executor::block_on(account.handle(&state, &withdraw, &ctx(2))).unwrap_err();
    assert_eq!(
        rejected.error_code(),
        ErrorCode::domain("InsufficientBalance")
    );

    let again = futures::executor::block_on(account.handle(&state, &open, &ctx(2))).unwrap_err();
    assert_eq!(again.error_code(), ErrorCode::DuplicateAggregateId);
}

#[test]
fn corrupt_history_is_an_error_and_leaves_the_state_alone() {
    let registry = registry();
    let account = registry.get("account").unwrap();
    let aggregate_id = account_id();
    let mut state = account.initial_state();
    let opened_event = DomainEvent::of(&opened(3)).unwrap();
    account
        .apply(
            &mut state,
            &stream_of(&aggregate_id, 1, vec![opened_event.clone()]),
        )
        .unwrap();

    let gap = stream_of(&aggregate_id, 3, vec![opened_event.clone()]);
    let unknown = stream_of(
        &aggregate_id,
        2,
        vec![DomainEvent {
            name: "Vanished".into(),
            ..opened_event.clone()
        }],
    );
    let malformed = stream_of(
        &aggregate_id,
        2,
        vec![DomainEvent {
            body: json!({"amount": "x"}),
            name: "Deposited".into(),
            ..opened_event
        }],
    );
    for bad in [gap, unknown, malformed] {
        let error = account.apply(&mut state, &bad).unwrap_err();
        assert_eq!(
            error.error_code(),
            ErrorCode::InternalServerError,
            "{error}"
        );
        assert_eq!(state.version(), 1);
        assert_eq!(state.downcast_ref::<AccountState>().unwrap().balance, 3);
    }
}

#[test]
fn public_handles_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<AggregateRegistry>();
    assert_send_sync::<wow_core::eventsourcing::InMemoryEventStore>();
    assert_send_sync::<wow_core::eventsourcing::InMemorySnapshotStore>();
    assert_send_sync::<wow_core::aggregate::AggregateState>();
    assert_send_sync::<wow_core::aggregate::DecodedCommand>();
}
