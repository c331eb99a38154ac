//! The account aggregate, given → when → expect.

use wow_core::aggregate::AggregateSpec;
use wow_core::ErrorCode;
use wow_example_bank::account::*;

fn opened(balance: i64) -> AccountEvent {
    AccountEvent::AccountOpened(AccountOpened {
        name: "Ann".into(),
        balance,
    })
}

fn spec() -> AggregateSpec<Account> {
    AggregateSpec::new().with_id("acc-a")
}

#[test]
fn open_sets_name_and_balance() {
    spec()
        .given_nothing()
        .when(AccountCommand::Open(Open {
            name: "Ann".into(),
            balance: 100,
        }))
        .expect_events([opened(100)])
        .expect_state(|s| {
            assert_eq!(
                (s.name.as_str(), s.balance, s.held, s.frozen),
                ("Ann", 100, 0, false)
            )
        });
}

#[test]
fn open_validates_name_and_balance() {
    spec()
        .given_nothing()
        .when(AccountCommand::Open(Open {
            name: String::new(),
            balance: -1,
        }))
        .expect_error_code(ErrorCode::CommandValidation)
        .expect_binding_errors(&["name", "balance"]);
}

#[test]
fn amounts_must_be_positive() {
    for command in [
        AccountCommand::Deposit(Amount { amount: 0 }),
        AccountCommand::Withdraw(Amount { amount: -5 }),
        AccountCommand::Transfer(Transfer {
            to: "acc-b".into(),
            amount: 0,
        }),
    ] {
        spec()
            .given([opened(10)])
            .when(command)
            .expect_binding_errors(&["amount"]);
    }
}

#[test]
fn withdraw_beyond_the_balance_is_insufficient_balance() {
    spec()
        .given([opened(10)])
        .when(AccountCommand::Withdraw(Amount { amount: 11 }))
        .expect_error_code(ErrorCode::domain("InsufficientBalance"));
}

#[test]
fn a_frozen_account_rejects_deposit_withdraw_and_transfer() {
    for command in [
        AccountCommand::Deposit(Amount { amount: 1 }),
        AccountCommand::Withdraw(Amount { amount: 1 }),
        AccountCommand::Transfer(Transfer {
            to: "acc-b".into(),
            amount: 1,
        }),
    ] {
        spec()
            .given([opened(10), AccountEvent::AccountFrozen])
            .when(command)
            .expect_error_code(ErrorCode::domain("AccountFrozen"));
    }
}

#[test]
fn transfer_holds_the_amount_until_confirmed() {
    let prepared = AccountEvent::TransferPrepared(TransferStep {
        account: "acc-b".into(),
        amount: 30,
    });
    spec()
        .given([opened(100)])
        .when(AccountCommand::Transfer(Transfer {
            to: "acc-b".into(),
            amount: 30,
        }))
        .expect_events([prepared.clone()])
        .expect_state(|s| assert_eq!((s.balance, s.held), (70, 30)));
    spec()
        .given([opened(100), prepared.clone()])
        .when(AccountCommand::ConfirmTransfer(Transfer {
            to: "acc-b".into(),
            amount: 30,
        }))
        .expect_state(|s| assert_eq!((s.balance, s.held), (70, 0)));
    spec()
        .given([opened(100), prepared])
        .when(AccountCommand::CancelTransfer(Transfer {
            to: "acc-b".into(),
            amount: 30,
        }))
        .expect_state(|s| assert_eq!((s.balance, s.held), (100, 0)));
}

#[test]
fn a_transfer_to_itself_is_refused() {
    spec()
        .given([opened(100)])
        .when(AccountCommand::Transfer(Transfer {
            to: "acc-a".into(),
            amount: 1,
        }))
        .expect_error_code(ErrorCode::domain("SameAccount"));
}

#[test]
fn check_records_nothing() {
    spec()
        .given([opened(1)])
        .when(AccountCommand::Check)
        .expect_no_events();
}

#[test]
fn a_frozen_account_refuses_an_incoming_transfer() {
    spec()
        .given([opened(1), AccountEvent::AccountFrozen])
        .when(AccountCommand::ReceiveTransfer(ReceiveTransfer {
            from: "acc-b".into(),
            amount: 5,
        }))
        .expect_error_code(ErrorCode::domain("AccountFrozen"));
}

#[test]
fn money_in_that_would_overflow_the_account_is_refused() {
    // Available and held together count: a hold does not make room.
    let prepared = AccountEvent::TransferPrepared(TransferStep {
        account: "acc-b".into(),
        amount: 10,
    });
    for command in [
        AccountCommand::Deposit(Amount { amount: 1 }),
        AccountCommand::ReceiveTransfer(ReceiveTransfer {
            from: "acc-b".into(),
            amount: 1,
        }),
    ] {
        spec()
            .given([opened(i64::MAX), prepared.clone()])
            .when(command)
            .expect_error_code(ErrorCode::domain("BalanceOverflow"));
    }
    spec()
        .given([opened(i64::MAX - 1)])
        .when(AccountCommand::Deposit(Amount { amount: 1 }))
        .expect_events([AccountEvent::Deposited(Moved { amount: 1 })]);
}

#[test]
fn ids_and_names_in_bodies_follow_the_rules() {
    for to in ["   ", "../x", "a b", &"x".repeat(129), ""] {
        spec()
            .given([opened(100)])
            .when(AccountCommand::Transfer(Transfer {
                to: to.to_owned(),
                amount: 1,
            }))
            .expect_error_code(ErrorCode::CommandValidation)
            .expect_binding_errors(&["to"]);
    }
    for name in ["   ", "Ann\u{7}", &"n".repeat(201)] {
        spec()
            .given_nothing()
            .when(AccountCommand::Open(Open {
                name: name.to_owned(),
                balance: 1,
            }))
            .expect_error_code(ErrorCode::CommandValidation)
            .expect_binding_errors(&["name"]);
    }
    spec()
        .given([opened(100)])
        .when(AccountCommand::Transfer(Transfer {
            to: "bob-2.x:y_z".into(),
            amount: 1,
        }))
        .expect_events([AccountEvent::TransferPrepared(TransferStep {
            account: "bob-2.x:y_z".into(),
            amount: 1,
        })]);
}
